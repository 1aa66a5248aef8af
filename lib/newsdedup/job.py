"""The batch job: read a snapshot, run the cascade, write Delta tables, load Postgres."""

from __future__ import annotations

import json
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import config, incremental, progress, runstate
from .cascade import run_cascade
from .errors import UserError
from .io import layout, lock, paths, pg, pg_documents, store
from .io.input import Input, check_columns, open_input
from .io.input_check import shown
from .report import RunReport, StepReport, new_run_id
from .runstate import StepOutput

if TYPE_CHECKING:
    from .config import Config


@contextmanager
def _checkpoints_dropped(spark: SparkSession):
    """Delete the checkpoints a run's steps write (the rdd-* directories of the session's
    checkpoint directory that were not there before) once they end, however they end. They hold
    intermediate frames for this process only: a resumed run starts from the run state
    (<output>/_runs), never from them. Left alone they grew with every run (a two-slice job on a
    1M archive left 125 MB). Best effort: a store that fails here must not hide what the run raised."""
    where = spark.sparkContext.getCheckpointDir()
    existing = set(paths.children(spark, where))
    try:
        yield
    finally:
        try:
            for name in paths.children(spark, where):
                if name.startswith("rdd-") and name not in existing:
                    paths.delete(spark, paths.join(where, name))
        except Exception as exc:   # noqa: BLE001 (reported, never raised)
            progress.line(f"could not remove this run's checkpoints under {where}: {exc}")


def _sweep_checkpoints(spark: SparkSession, output: str, conf: "Config") -> None:
    """Remove what sessions that died left under <output>/_checkpoints (each Spark session writes
    into a directory of its own there), all but this session's. Called under the output's lock, so
    no other run is using them; a configured spark.checkpoint_dir may be shared with other jobs and
    is left alone."""
    if conf.spark.checkpoint_dir:
        return
    base = store.table_path(output, "_checkpoints")
    current = paths.qualified(spark.sparkContext.getCheckpointDir())
    for name in paths.children(spark, base):
        path = paths.join(base, name)
        if paths.qualified(path) != current:
            paths.delete(spark, path)


def _checkpoint_dir(conf: "Config", output: str, dry_run: bool) -> str:
    """Configured, else under the output (any FileSystem the executors share); a dry run's is scratch."""
    if conf.spark.checkpoint_dir:
        return paths.qualified(conf.spark.checkpoint_dir)
    if dry_run:
        return tempfile.mkdtemp(prefix="newsdedup-ckpt-")
    return store.table_path(output, "_checkpoints")


def run(spark: SparkSession, input_path: str | None, output: str, conf: "Config", *,
        dsn: str | None = None, dry_run: bool = False, load_pg: bool = True,
        run_id: str | None = None, resume: str | None = None) -> RunReport:
    """One run; with resume=RUN_ID, continue that run from its first unfinished step.

    A run that writes holds the output's lock, so a concurrent second run fails fast.
    """
    if dry_run:
        return _run(spark, input_path, output, conf, None, dsn, True, load_pg, run_id, resume)
    with lock.hold(output, conf.lock, "newsdedup run") as held:
        return _run(spark, input_path, output, conf, held, dsn, False, load_pg, run_id, resume)


def run_slices(spark: SparkSession, inputs: list[str], output: str, conf: "Config", *, dsn: str | None = None,
               load_pg: bool = True, on_report: "Callable[[str, RunReport], None]" = lambda path, report: None
               ) -> list[RunReport]:
    """A backfill's slices, in order, in this one Spark session: each slice is a run of its own (its
    run id, report, markers and resume), incremental against the slices before it, exactly as if each
    had been submitted alone. What the session saves is every fixed cost a fresh job pays again (the
    JVM, the Python workers and their compiled kernels, the code paths' first use: about half of a 1%
    slice of 1M documents, docs/benchmarks-incremental.md). OPTIMIZE runs once, after the last slice
    (with layout.optimize_after_run): compacting between slices only rewrites what the next slice's
    MERGEs split again. on_report(path, report) is called as each slice finishes.

    A slice that fails stops the job; the slices before it stay written (and reported), and the
    error says how to go on: resume the failed run, then submit the slices after it.
    """
    reports: list[RunReport] = []
    # The slices before the last run with OPTIMIZE off: the same switch a user sets to optimize later.
    deferred = conf.with_overrides({"layout": {"optimize_after_run": False}})
    with lock.hold(output, conf.lock, "newsdedup run") as held:
        for i, path in enumerate(inputs):
            last = i == len(inputs) - 1
            run_id = new_run_id()
            progress.line(f"slice {i + 1} of {len(inputs)}: {path}")
            t0 = time.perf_counter()
            try:
                report = _run(spark, path, output, conf if last else deferred, held, dsn, False, load_pg, run_id,
                              None)
            except Exception as exc:
                try:
                    started = run_id in runstate.list_runs(spark, output)
                except Exception:   # the store that failed the slice may fail this too
                    started = True
                how = _going_on(inputs, i, run_id if started else None, reports)
                if isinstance(exc, UserError):
                    raise SliceFailed(f"slice {i + 1} of {len(inputs)} ({path}): {exc}\n{how}") from exc
                progress.line(f"slice {i + 1} of {len(inputs)} ({path}) failed; {how}")   # a bug keeps its trace
                raise
            if not last and conf.layout.optimize_after_run:
                report.notes.append("OPTIMIZE deferred to the job's last slice")
            reports.append(report)
            progress.finished(f"slice {i + 1} of {len(inputs)}", time.perf_counter() - t0, report.run_id)
            on_report(path, report)
    return reports


class SliceFailed(UserError):
    """A slice of a multi-slice run failed; the message names what is written and how to go on."""


def _going_on(inputs: list[str], i: int, started: str | None, done: list[RunReport]) -> str:
    """What a multi-slice run that failed at slice i left, and the commands that go on from it
    (started: the failed slice's run id when its run was recorded, so it can be resumed)."""
    went = (f"slices 1-{i} are written (runs {', '.join(r.run_id for r in done)}); " if done
            else "no slice is written; ")
    if started is None:
        return f"{went}go on with: newsdedup run --input {' '.join(inputs[i:])}"
    rest = f"; then: newsdedup run --input {' '.join(inputs[i + 1:])}" if i + 1 < len(inputs) else ""
    return f"{went}go on with: newsdedup run --resume {started} (same --output, --pg and --conf){rest}"


def _run(spark: SparkSession, input_path: str | None, output: str, conf: "Config", held: "lock.OutputLock | None",
         dsn: str | None, dry_run: bool, load_pg: bool, run_id: str | None, resume: str | None) -> RunReport:
    paths.check_reachable(spark, output)   # a wrong endpoint or missing key fails here, in one line
    if not dry_run:
        store.check_new_or_ours(spark, output)
    if resume and dry_run:
        raise UserError("--resume and --dry-run exclude each other")
    if spark.sparkContext.getCheckpointDir() is None:
        spark.sparkContext.setCheckpointDir(_checkpoint_dir(conf, output, dry_run))
    if held is not None:
        _sweep_checkpoints(spark, output, conf)

    state = None
    if resume:
        state = runstate.Persisted.resume(spark, output, resume)
        if input_path and paths.qualified(input_path) != paths.qualified(state.input_path):
            raise UserError(f"--resume {resume}: that run read {state.input_path}, not {input_path}")
        input_path, now = state.input_path, state.started_at
        progress.line(f"resuming run {resume}; finished steps: {', '.join(state.completed()) or 'none'}")
    elif input_path is None:
        raise UserError("--input is required (unless --resume RUN_ID)")
    else:
        now = datetime.now(timezone.utc)
    if load_pg and not dry_run:
        # A bad DSN, a wrong password, a missing pgvector or no DSN for an s3a output must fail now,
        # not after the computation.
        dsn = pg.resolve_dsn(conf, output, dsn)
        pg.check_dsn(dsn, need_vector=conf.semantic.enabled, loader=True)
    # Before any work: an output whose keys or links other settings made refuses this run (one line).
    settings = None if dry_run else _settings_to_record(spark, output, conf)
    report = RunReport(run_id=resume or run_id or new_run_id())
    # Every input file is checked before anything is written under the output: an unusable one
    # stops the run here (one line each) unless input.skip_unreadable.
    given = report.timed("check_input", lambda: open_input(spark, input_path, conf.input))
    raw = given.frame
    check_columns(raw)   # the types no rule reads (a struct body): a refusal too, and alone on stderr
    progress.finished("check_input", report.seconds["check_input"],
                      f"{given.files} files, {len(given.skipped)} skipped")
    _report_skipped(report, given, output)
    if state is None and not dry_run:
        state = runstate.Persisted.start(spark, output, report.run_id, input_path, now)
    if given.skipped and not dry_run:
        store.insert_skipped(spark, [(shown(b.path), b.reason, b.row_group, b.rows, report.run_id, now)
                                     for b in given.skipped], store.table_path(output, "skipped_files"))
    progress.line(f"run {report.run_id}: {input_path} -> {output}")
    try:
        with _checkpoints_dropped(spark):
            return _steps(spark, raw, output, conf, held, dsn, dry_run, load_pg, input_path, now, report, state,
                          settings)
    except Exception as exc:
        if not dry_run:
            _resumable(exc, output, report.run_id)
        raise


class RunInterrupted(UserError):
    """The store or Postgres failed under a run that can be resumed once it is fixed."""


def _resumable(exc: Exception, output: str, run_id: str) -> None:
    """Raise a store's or Postgres' failure under a run as one line that says how to go on from it;
    return for anything else (a bug keeps its trace, other refusals their own line)."""
    if isinstance(exc, (paths.ObjectStoreError, pg.PostgresUnavailable)):
        message = str(exc)
    elif isinstance(exc, UserError):
        return
    else:
        # Postgres first: its "Connection refused" is not the object store's.
        message = pg.describe_failure(exc) or paths.describe_failure(output, exc) or paths.describe_os_error(exc)
    if message is None:
        return
    raise RunInterrupted(f"{message}; once that is fixed, run {run_id} goes on from its last finished step "
                         f"with: newsdedup run --resume {run_id} (same --output, --pg and --conf)") from None


def _steps(spark, raw, output: str, conf: "Config", held: "lock.OutputLock | None", dsn: str | None,
           dry_run: bool, load_pg: bool, input_path: str, now: datetime, report: RunReport,
           state: "runstate.Persisted | None", settings: dict | None = None) -> RunReport:
    """The run's steps, its Delta write and Postgres load, and its record (settings: to record with
    the documents table once they are written, _settings_to_record)."""
    with progress.TaskLine(spark):
        # A dry run passes no output, so stage 4 keeps its vectors in memory instead of writing them.
        # With Postgres loaded by this job, an incremental run reads its candidates' stored features there.
        stored_features = pg_documents.verification_features(dsn, conf) if load_pg and not dry_run else None
        result = run_cascade(spark, raw, conf, report, None if dry_run else output, steps=state,
                             stored_features=stored_features)
        if dry_run:
            report.notes.append("dry run: nothing written to Delta or Postgres")
            return report
        if held is not None:
            held.ensure_held()   # a run that stalled and lost its lock writes nothing
        changed = _write(spark, result, output, conf, report, now, state, settings)
        if load_pg:
            written, slice_rows = None, None
            if result.scope is not None and changed is not None:   # an incremental run loads what it changed
                written, slice_rows = _written(spark, output, conf, result, report, now)
            _load_postgres(spark, output, conf, dsn, report, written, changed if written is not None else None,
                           slice_rows, result.features)
    _record(spark, output, input_path, now, report, state)
    return report


def _settings_to_record(spark: SparkSession, output: str, conf: "Config") -> dict | None:
    """The settings this run records with the documents table (None: recorded already, the same).

    Refused, in one line, before any work: a run over an output whose documents' keys were computed
    with other settings (config.keys_settings: nothing this run computes could match them), and a
    slice over one whose stages 1-3 links were (config.pairing_settings: the closure reruns only
    what the slice touches, so every other document would keep links the old settings made). An
    `input.incremental: archive` run recomputes every link from the stored keys, so it may change
    the pairing settings, and records them. An output written before settings were recorded is
    taken as it is, and gets them recorded."""
    current = json.loads(json.dumps(config.stored_settings(conf)))   # as read back: lists, not tuples
    recorded = store.recorded_settings(spark, output)
    if recorded is None:
        return current
    documents = store.table_path(output, "documents")
    if recorded["keys"] is not None:
        changed = config.changed_settings(recorded["keys"], current["keys"])
        if changed:
            raise UserError(f"{documents} holds keys computed with other settings ({', '.join(changed)} changed): "
                            f"this run's keys could not be compared with them; restore those settings, or write "
                            f"to a new output")
    if recorded["pairing"] is not None and conf.input.incremental == "slice":
        changed = config.changed_settings(recorded["pairing"], current["pairing"])
        if changed:
            raise UserError(f"{output} holds stages 1-3 links found with other settings ({', '.join(changed)} "
                            f"changed): a slice would leave every document outside it linked as they were; "
                            f"run the whole archive once with input.incremental: archive, or restore those settings")
    return None if recorded == current else current


def _report_skipped(report: RunReport, given: Input, output: str) -> None:
    """The run's summary says which input files it skipped, and why (their rows are not in this run)."""
    report.counts["input_files"] = given.files
    report.counts["input_files_skipped"] = len(given.skipped)
    if not given.skipped:
        return
    counted = [b.rows for b in given.skipped if b.rows is not None]
    unread = len(given.skipped) - len(counted)
    rows = f"{sum(counted)} rows (as their footers count)" + (f" and {unread} without a readable footer"
                                                              if unread else "")
    report.notes.append(f"skipped {len(given.skipped)} of {given.files} input files (input.skip_unreadable), "
                        f"{rows}: their rows are not in this run; listed in "
                        f"{store.table_path(output, 'skipped_files')}; rerun them once repaired")
    report.notes.extend(f"skipped {shown(b.path)}: {b.reason}" for b in given.skipped)


def _write(spark, result, output: str, conf: "Config", report: RunReport, now: datetime,
           state: "runstate.Persisted", settings: dict | None = None) -> "DataFrame | None":
    """The three Delta writes, the settings they were computed with (when not recorded already), then
    OPTIMIZE; each is idempotent, so a step killed half-way is simply repeated.

    Returns the keys of the links the write changed (kept with the step, for a resumed load)."""
    run_col, ts = F.lit(report.run_id), F.lit(now).cast("timestamp")

    def write() -> StepOutput:
        notes = _prepare_layout(spark, result.documents.withColumn("run_id", run_col).schema, output, conf)
        # The links computed over the affected documents replace their active ones (incremental.py).
        changed: list = []
        actions = incremental.write_links(spark, result.links, store.table_path(output, "duplicate_links"),
                                          report.run_id, now, scope=result.scope, changed=changed)
        store.merge_documents(spark, result.documents.withColumn("run_id", run_col),
                              store.table_path(output, "documents"), all_new=result.documents_new)
        store.insert_quarantine(spark,
                                result.quarantine.withColumn("run_id", run_col).withColumn("quarantined_at", ts),
                                store.table_path(output, "quarantine"))
        # After the documents: a run that dies between the two leaves stored documents without a
        # component, which sends the next closure to rounds (exact); the other order could leave
        # components that count on documents never stored (a settled duplicate of a canonical
        # that is not there).
        if result.components is not None:
            incremental.write_components(spark, result.components, store.table_path(output, "components"),
                                         result.scope)
        keys = changed[0].select(*store.LINK_KEY)
        return StepOutput({"changed": keys}, StepReport(counts={f"links.{k}": v for k, v in actions.items()},
                                                        notes=notes))

    done = state.step("write_delta", write, lambda r: f"{r.counts['links.new']} new links")
    report.add(done.report)
    if settings is not None and store.exists(spark, store.table_path(output, "documents")):
        store.record_settings(spark, output, settings)
    if conf.layout.optimize_after_run:
        opt = state.step("optimize_delta", lambda: StepOutput({}, layout.optimize_tables(spark, output, conf.layout)),
                         lambda r: " ".join(f"{t}: {r.counts[f'files.{t}.before']}->{r.counts[f'files.{t}.after']} files"
                                            for t in layout.OPTIMIZED_TABLES if f"files.{t}.after" in r.counts))
        report.add(opt.report)
    return done.frames.get("changed")   # None from a run state written before it was kept


def _prepare_layout(spark, documents_schema, output: str, conf: "Config") -> list[str]:
    """documents and duplicate_links created clustered (conf layout), or an older table given its clustering."""
    tables = {"documents": documents_schema, "duplicate_links": incremental.TABLE_SCHEMA}
    notes = [layout.prepare_table(spark, store.table_path(output, name), name, schema,
                                  conf.layout.table(name).cluster_by) for name, schema in tables.items()]
    for note in filter(None, notes):
        progress.line(note)
    return [n for n in notes if n]


def _written(spark, output: str, conf: "Config", result, report: RunReport,
             now: datetime) -> tuple["DataFrame", "pg_documents.SliceRows | None"]:
    """Ids of the documents this run wrote: the slice's, and those stage 4 gave a vector (embedded_at
    from this run on; a resumed run keeps its start time); and, when the slice's are all, the rows
    the job holds that its Postgres load takes instead of reading the documents table again: the
    slice's as written, and the archive rows of the run's scope."""
    slice_rows = pg_documents.SliceRows(documents=result.documents.withColumn("run_id", F.lit(report.run_id)),
                                        archive=result.scope_rows)
    ids = result.documents.select("id")
    path = store.table_path(output, "embeddings")
    if conf.semantic.enabled and store.exists(spark, path):
        fresh = spark.read.format("delta").load(path).where(F.col("embedded_at") >= F.lit(now).cast("timestamp"))
        if not fresh.select("id").join(ids, "id", "left_anti").isEmpty():
            return ids.unionByName(fresh.select("id")).distinct(), None
    return ids, slice_rows


def _pg_counts(dsn: str) -> tuple[int, int] | None:
    """(documents, duplicate_links) rows in Postgres; None before the tables exist."""
    with pg.connect(dsn) as conn:
        if conn.execute("SELECT to_regclass('documents') IS NULL OR to_regclass('duplicate_links') IS NULL"
                        ).fetchone()[0]:
            return None
        return (conn.execute("SELECT count(*) FROM documents").fetchone()[0],
                conn.execute("SELECT count(*) FROM duplicate_links").fetchone()[0])


def _load_postgres(spark, output: str, conf: "Config", dsn: str | None, report: RunReport,
                   written: "DataFrame | None" = None, changed: "DataFrame | None" = None,
                   slice_rows: "pg_documents.SliceRows | None" = None,
                   features: "DataFrame | None" = None) -> None:
    """Load Delta's documents and links into Postgres.

    written, changed: the documents this run wrote and the keys of the links it changed; only
    those are loaded, unless Postgres is empty or, after that load, holds other row counts than
    Delta (an earlier load failed): then everything is loaded, as without them. slice_rows: the rows
    the job holds for written's load, when it has them (_written). features: prepare's verification
    features of the run's documents (CascadeResult.features), which their rows take instead of
    deriving them again."""
    dsn = pg.resolve_dsn(conf, output, dsn)
    progress.started("load_postgres")
    delta_links = store.read(spark, output, "duplicate_links")
    before = _pg_counts(dsn) if written is not None else None
    if before is not None and before[0] > 0:
        rows = delta_links.join(changed, list(store.LINK_KEY), "left_semi")
        docs, loaded = _load(spark, output, conf, dsn, report, rows, written, slice_rows, features)
        expected = (store.read(spark, output, "documents").count(), delta_links.count())
        if _pg_counts(dsn) == expected:
            return _loaded(report, docs, loaded)
        report.notes.append(f"postgres held {_pg_counts(dsn)} documents and links, Delta {expected}: "
                            "reloading everything")
        report.counts["postgres.full_reload"] = 1
    # Postgres converges to what Delta holds (all runs): links a failed earlier load missed arrive too.
    _loaded(report, *_load(spark, output, conf, dsn, report, delta_links, None, None, features))


def _load(spark, output: str, conf: "Config", dsn: str, report: RunReport, links: "DataFrame",
          ids: "DataFrame | None", slice_rows: "pg_documents.SliceRows | None" = None,
          features: "DataFrame | None" = None) -> tuple[dict, dict]:
    # Documents (with the vectors of the configured model) first: the links reference them.
    docs = report.timed("load_postgres_documents", lambda: (
        pg_documents.load_slice(spark, output, dsn, conf, report.run_id, slice_rows, features)
        if slice_rows is not None
        else pg_documents.load_from_delta(spark, output, dsn, conf, report.run_id, ids, features)))
    loaded = report.timed("load_postgres", lambda: pg.load_links(links, dsn, report.run_id))
    return docs, loaded


def _loaded(report: RunReport, docs: dict, loaded: dict) -> None:
    report.counts.update({f"postgres.documents.{k}": v for k, v in docs.items()})
    report.counts.update({f"postgres.{k}": v for k, v in loaded.items()})
    progress.finished("load_postgres", report.seconds["load_postgres"],
                      " ".join(f"{k}={v}" for k, v in loaded.items()))


def _record(spark, output: str, input_path: str, now: datetime, report: RunReport,
            state: "runstate.Persisted") -> None:
    """The report goes into the runs table (once per run id); a JSON copy only next to a local output."""
    runs_path = store.table_path(output, "runs")
    # Only an earlier attempt of this run can have recorded it (a fresh run id is in no table).
    seen = state.attempted_before and store.exists(spark, runs_path) and (
        spark.read.format("delta").load(runs_path).where(F.col("run_id") == report.run_id).limit(1).count() > 0)
    if not seen:
        runs_row = spark.createDataFrame([(report.run_id, now, input_path, report.to_json())],
                                         "run_id string, started_at timestamp, input string, report string")
        store.append(runs_row, runs_path)
    if paths.is_local(output):
        reports = Path(paths.local_path(output)) / "reports"
        reports.mkdir(parents=True, exist_ok=True)
        (reports / f"{report.run_id}.json").write_text(report.to_json(), encoding="utf-8")
    state.finish(keep_frames=False)
