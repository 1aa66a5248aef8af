"""Least-privilege roles and passwords, end to end, on a password-protected server.

The roles are made by the SQL of docs/postgres-roles.md (read from the page). The loader runs the
job into `postgres.schema` with its password in the DSN and Spark's event log on; error paths follow
(a wrong password, a malformed DSN, a lookup role asking to insert, to run the job, to lock a table,
to read stats); then every
output is searched for every password: stdout and stderr, the output directory (the run report,
the runs table's Parquet files read back, checkpoints), the event log and Spark's own log.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from newsdedup import cli
from newsdedup.config import load_config
from newsdedup.io import pg, pg_embedded
from newsdedup.ops import check

from conftest import REPO, SAMPLE
from servers import free_port

ROLES_DOC = REPO / "docs" / "postgres-roles.md"
SCHEMA = "newsdedup"
# Each password holds a URI delimiter, a space and an ampersand, and a random token to search for.
PASSWORDS = {role: f"{role[:3]}@/ {secrets.token_hex(8)}&x" for role in ("loader", "lookup", "writer")}
WRONG = f"wrong {secrets.token_hex(8)}"


def doc_sql(block: str) -> str:
    """The ```sql <block> fence of docs/postgres-roles.md."""
    m = re.search(rf"```sql {block}\n(.*?)```", ROLES_DOC.read_text(encoding="utf-8"), re.S)
    assert m, f"docs/postgres-roles.md has no ```sql {block} block"
    return m.group(1)


def with_passwords(text: str) -> str:
    return re.sub(r"CREATE ROLE newsdedup_(\w+) LOGIN PASSWORD 'change-me'",
                  lambda m: f"CREATE ROLE newsdedup_{m.group(1)} LOGIN PASSWORD '{PASSWORDS[m.group(1)]}'", text)


def key_value_dsn(port: int, role: str, password: str, schema: str | None = SCHEMA) -> str:
    dsn = psycopg.conninfo.make_conninfo(host="127.0.0.1", port=port, dbname="news", user=f"newsdedup_{role}",
                                         password=password)
    return pg.with_schema(dsn, schema)


def uri_dsn(port: int, role: str, password: str) -> str:
    return f"postgresql://newsdedup_{role}:{quote(password, safe='')}@127.0.0.1:{port}/news"


def needles() -> list[str]:
    """Every form a password could take in an output: as is, percent-encoded, and its random token."""
    out = []
    for pw in [*PASSWORDS.values(), WRONG]:
        out += [pw, quote(pw, safe=""), pw.split(" ")[1][:16]]
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A scram-only embedded server on a TCP port, the database `news` and the documented roles."""
    pgdata = tmp_path_factory.mktemp("roles") / "pgdata"
    port = free_port()
    admin = pg_embedded.start(pgdata, listen=f"127.0.0.1:{port}")
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE news")
        news_admin = psycopg.conninfo.make_conninfo(admin, dbname="news")
        with psycopg.connect(news_admin, autocommit=True) as conn:
            conn.execute(with_passwords(doc_sql("roles")))
        yield port, news_admin
    finally:
        pg_embedded.stop(pgdata)


def newsdedup(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    """The command line in a process of its own (its own Spark session, event log included), with its
    temporary files (Spark's log among them) under tmp."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("NEWSDEDUP_PG_DSN", None)
    return subprocess.run([sys.executable, "-m", "newsdedup.cli", *args], capture_output=True, text=True,
                          env=env, timeout=1200, cwd=REPO)


@pytest.fixture(scope="module")
def loaded(server, tmp_path_factory):
    """The sample run by the loader (password in a URI DSN, event log on), then the error paths."""
    port, admin = server
    root = tmp_path_factory.mktemp("run")
    events, out, tmp = root / "events", root / "out", root / "tmp"
    events.mkdir()
    conf = root / "c.yaml"
    conf.write_text(json.dumps({
        "spark": {"shuffle_partitions": 2, "delta_snapshot_partitions": 1,
                  "extra": {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri()}},
        "postgres": {"schema": SCHEMA}}))
    runs = {"run": newsdedup(["run", "--input", str(SAMPLE), "--output", str(out), "--no-semantic",
                              "--conf", str(conf), "--pg", uri_dsn(port, "loader", PASSWORDS["loader"])], tmp)}
    assert runs["run"].returncode == 0, runs["run"].stderr[-3000:]
    with psycopg.connect(admin, autocommit=True) as conn:    # the writer's grant needs the loaded tables
        conn.execute(doc_sql("writer"))
    jsonl = root / "incoming.jsonl"
    first = json.loads((REPO / "samples" / "articles.jsonl").read_text(encoding="utf-8").splitlines()[0])
    jsonl.write_text(json.dumps({**first, "id": 990001, "url": "https://elsewhere.example/copy"}) + "\n")
    lookup = key_value_dsn(port, "lookup", PASSWORDS["lookup"])
    writer = key_value_dsn(port, "writer", PASSWORDS["writer"])
    runs.update({
        "wrong password": newsdedup(["run", "--input", str(SAMPLE), "--output", str(root / "out2"), "--no-semantic",
                                     "--conf", str(conf), "--pg", uri_dsn(port, "loader", WRONG)], tmp),
        # The password as typed, not percent-encoded: libpq would read its tail as host and database.
        "malformed": newsdedup(["stats", "--source", "postgres", "--pg",
                                f"postgresql://newsdedup_loader:{PASSWORDS['loader']}@127.0.0.1:{port}/news"], tmp),
        "lookup check": newsdedup(["check", "--pg", lookup, "--input", str(jsonl)], tmp),
        "lookup insert": newsdedup(["check", "--pg", lookup, "--input", str(jsonl), "--insert"], tmp),
        "writer insert": newsdedup(["check", "--pg", writer, "--input", str(jsonl), "--insert"], tmp),
        # A lookup role may not lock the table: refused by the server, one line.
        "lookup migrate": newsdedup(["migrate-urls", "--pg", lookup, "--table", f"{SCHEMA}.documents", "--apply"],
                                    tmp),
        # A lookup role given to run: refused before Spark starts, not at the load after the job.
        "lookup run": newsdedup(["run", "--input", str(SAMPLE), "--output", str(root / "out3"), "--no-semantic",
                                 "--conf", str(conf), "--pg", lookup], tmp),
        "lookup stats": newsdedup(["stats", "--source", "postgres", "--json", "--pg", lookup], tmp),
        "missing table": newsdedup(["migrate-urls", "--pg", lookup, "--table", f"{SCHEMA}.no_such_table"], tmp),
    })
    return {"port": port, "admin": admin, "root": root, "events": events, "out": out, "tmp": tmp, "runs": runs}


def test_the_loader_role_runs_the_job_into_its_schema(loaded):
    with psycopg.connect(loaded["admin"]) as conn:
        tables = conn.execute("SELECT schemaname, tablename, tableowner FROM pg_tables "
                              "WHERE tablename IN ('documents', 'duplicate_links') ORDER BY 2").fetchall()
        assert tables == [(SCHEMA, "documents", "newsdedup_loader"), (SCHEMA, "duplicate_links", "newsdedup_loader")]
        n = conn.execute(f'SELECT count(*) FROM "{SCHEMA}".documents WHERE id < 990000').fetchone()[0]
    assert n == len((REPO / "samples" / "articles.jsonl").read_text().splitlines())


def test_each_error_path_is_one_line_and_exit_2(loaded):
    runs = loaded["runs"]
    for name, marker in [("wrong password", "password authentication failed"),
                         ("malformed", "unencoded '@' or '/'"),
                         ("lookup insert", "lacks INSERT on documents, INSERT on duplicate_links"),
                         ("lookup migrate", "permission denied for table documents: the role lacks a right"),
                         ("lookup run", "role 'newsdedup_lookup' may not create in schema newsdedup; run, load "
                                        "and revert need the loader role"),
                         ("missing table", 'relation "newsdedup.no_such_table" does not exist')]:
        done = runs[name]
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and marker in done.stderr, (name, done.stderr)
    assert not any((loaded["root"] / "out3").rglob("*"))   # refused before anything was written (the lock's dir only)


def test_a_role_that_may_only_read_runs_stats_from_the_views(loaded):
    done = loaded["runs"]["lookup stats"]
    assert done.returncode == 0, done.stderr
    daily = json.loads(done.stdout)["daily"]
    assert sum(r["active"] for r in daily) > 0 and {r["stage"] for r in daily} >= {"url", "content"}


def test_a_lookup_role_is_no_loader_and_the_loader_is(loaded):
    lookup = key_value_dsn(loaded["port"], "lookup", PASSWORDS["lookup"])
    with psycopg.connect(lookup) as conn:
        assert pg.loader_refusal(conn, lookup) == \
            "role 'newsdedup_lookup' may not create in schema newsdedup"
    with psycopg.connect(loaded["admin"], autocommit=True) as conn:   # CREATE alone is not enough: ALTER needs owning
        conn.execute(f"GRANT CREATE ON SCHEMA {SCHEMA} TO newsdedup_lookup")
        try:
            with psycopg.connect(lookup) as lk:
                assert pg.loader_refusal(lk, lookup).startswith(
                    "role 'newsdedup_lookup' does not own documents (owner 'newsdedup_loader'), duplicate_links")
        finally:
            conn.execute(f"REVOKE CREATE ON SCHEMA {SCHEMA} FROM newsdedup_lookup")
    loader = key_value_dsn(loaded["port"], "loader", PASSWORDS["loader"])
    with psycopg.connect(loader) as conn:
        assert pg.loader_refusal(conn, loader) is None


def test_a_role_that_may_only_read_runs_check(loaded):
    done = loaded["runs"]["lookup check"]
    assert done.returncode == 0, done.stderr
    (verdict,) = [json.loads(x) for x in done.stdout.splitlines()]
    assert (verdict["id"], verdict["canonical_id"], verdict["stage"]) == (990001, 1, "content")
    # In process too: the Checker reads the catalogue, creates nothing, and answers.
    lookup = key_value_dsn(loaded["port"], "lookup", PASSWORDS["lookup"])
    with check.Checker(load_config(overrides={"semantic": {"enabled": False}}), lookup) as checker:
        assert checker.check({"id": 990002, "url": "https://a.example/x", "title": "t", "body": "b",
                              "published_at": "2026-01-01T00:00:00Z", "source": "s", "lang": "en"}).canonical_id is None


def test_a_writer_role_inserts_what_check_finds(loaded):
    done = loaded["runs"]["writer insert"]
    assert done.returncode == 0, done.stderr
    with psycopg.connect(loaded["admin"]) as conn:
        assert conn.execute(f'SELECT duplicate_id, canonical_id, stage FROM "{SCHEMA}".duplicate_links '
                            "WHERE duplicate_id = 990001").fetchall() == [(990001, 1, "content")]


def test_a_role_without_the_tables_gets_a_clear_error_not_a_create(server, capsys):
    """A database whose schema the lookup role cannot see: check names what is missing and what to do."""
    port, _ = server
    lookup = key_value_dsn(port, "lookup", PASSWORDS["lookup"], schema="elsewhere")
    assert cli.main(["check", "--pg", lookup, "--input", os.devnull]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "may not create them" in err and "with the loader role" in err, err


def _outputs(loaded) -> dict[str, str]:
    """name -> text of every output of the module's runs."""
    texts = {}
    for name, done in loaded["runs"].items():
        texts[f"{name}: stdout"], texts[f"{name}: stderr"] = done.stdout, done.stderr
    for folder in (loaded["out"], loaded["events"], loaded["tmp"]):
        for path in folder.rglob("*"):
            if path.is_file():
                texts[str(path)] = path.read_bytes().decode("utf-8", "replace")
                if path.suffix == ".parquet":   # compressed: read the values back
                    import pyarrow.parquet as pq

                    texts[f"{path} (values)"] = str(pq.read_table(path).to_pylist())
                elif path.suffix == ".zstd":   # Spark 4 compresses its event log with zstd by default
                    import pyarrow as pa

                    texts[f"{path} (text)"] = pa.input_stream(str(path), compression="zstd").read().decode("utf-8")
                else:   # a codec this search cannot read would make it see nothing
                    assert not path.name.startswith("events_") or path.suffix == "", path
    return texts


def test_no_password_is_in_any_output(loaded):
    texts = _outputs(loaded)
    # The places searched hold what they should: the event log, the run report, the runs table, Spark's log.
    assert any(p.startswith(str(loaded["events"])) and "SparkListenerJobStart" in t and "duplicate_links" in t
               for p, t in texts.items()), "no readable event log of the run"
    assert any("/reports/" in p and p.endswith(".json") for p in texts)
    assert any("/runs/" in p and p.endswith("(values)") for p in texts)
    assert any(Path(p).name.startswith("spark-") and p.endswith(".log") for p in texts)
    leaks = [(name, needle) for name, text in texts.items() for needle in needles() if needle in text]
    assert leaks == []
