"""`newsdedup` command line."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from . import config
from .errors import UserError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint


from .stages import STAGE_NAMES


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--conf", help="YAML file merged over conf/default.yaml")
    p.add_argument("--verbose", action="store_true", help="show Ivy's and Spark's own log on stderr")


def cmd_run(args: argparse.Namespace) -> int:
    from . import job
    from .io.spark import get_spark

    from .io import lock, pg

    overrides = {}
    if args.no_semantic:
        overrides["semantic"] = {"enabled": False}
    if args.skip_unreadable:
        overrides["input"] = {"skip_unreadable": True}
    conf = config.load_config(args.conf, overrides=overrides or None)
    if conf.semantic.enabled:
        from .stages.semantic import embeddings

        embeddings.resolve(conf.semantic)   # an unusable stage-4 setup fails before any Spark work
    inputs = args.input or []
    if not (inputs or args.resume):
        raise UserError("run needs --input (or --resume RUN_ID)")
    if len(inputs) > 1 and (args.resume or args.dry_run):
        # A dry run writes nothing, so its second slice could not see its first; a resumed run is one slice.
        raise UserError("several --input slices exclude --resume and --dry-run: give one slice")
    first = inputs[0] if inputs else None
    if args.dry_run:
        spark = get_spark(conf, "newsdedup-run", [first, args.output])
        print(job.run(spark, first, args.output, conf, dry_run=True, resume=args.resume).table())
        return 0
    # Lock and Postgres are checked before the JVM starts: a second run or a bad DSN fails in a second.
    with lock.hold(args.output, conf.lock, "newsdedup run"):
        dsn = None if args.no_postgres else pg.resolve_dsn(conf, args.output, args.pg)
        if dsn:
            pg.check_dsn(dsn, need_vector=conf.semantic.enabled, loader=True)
        spark = get_spark(conf, "newsdedup-run", [*inputs, args.output])
        if len(inputs) > 1:
            job.run_slices(spark, inputs, args.output, conf, dsn=dsn, load_pg=not args.no_postgres,
                           on_report=lambda path, report: print(f"slice {path}\n{report.table()}", flush=True))
        else:
            print(job.run(spark, first, args.output, conf, dsn=dsn, load_pg=not args.no_postgres,
                          resume=args.resume).table())
    pgdata = None if args.no_postgres else pg.embedded_pgdata(conf, args.output, args.pg)
    if pgdata is not None:   # what psql or a notebook needs; the password stays in its 0600 file
        from .io.pg_embedded import secret_path

        print(f"postgres: embedded server {pg.redact(dsn)}; password in {secret_path(pgdata.resolve())}")
    return 0


def cmd_load(args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    from .report import new_run_id
    from .io import pg, store
    from .io.spark import get_spark

    conf = config.load_config(args.conf)
    dsn = None if args.dry_run else _pg_for(args, conf, loader=True)   # a bad DSN fails before Spark starts
    spark = get_spark(conf, "newsdedup-load", [args.output])
    store.check_is_output(spark, args.output)
    links = store.read(spark, args.output, "duplicate_links")
    if args.run:
        links = links.where(F.col("run_id") == args.run)
    if args.dry_run:
        counts = links.groupBy("stage").count().orderBy("stage").collect()
        for row in counts:
            print(f"{row['stage']:<10} {row['count']}")
        print(f"{'total':<10} {sum(r['count'] for r in counts)}  (dry run: nothing loaded)")
        return 0
    from .io import lock

    load_id = args.load_id or new_run_id()
    with lock.hold(args.output, conf.lock, "newsdedup load"):
        if store.exists(spark, store.table_path(args.output, "documents")):
            from .io import pg_documents  # the documents first: the links reference them

            docs = pg_documents.load_from_delta(spark, args.output, dsn, conf, load_id)
            print("documents: " + " ".join(f"{k}={v}" for k, v in docs.items()))
        result = pg.load_links(links, dsn, load_id)
    print(" ".join(f"{k}={v}" for k, v in result.items()))
    return 0


def _pg_for(args: argparse.Namespace, conf, loader: bool = False) -> str | None:
    """The DSN a maintenance command should use, checked (with loader: for the loader's rights too);
    None when --no-postgres was given."""
    from .io import pg

    if getattr(args, "no_postgres", False):
        return None
    dsn = pg.resolve_dsn(conf, getattr(args, "output", None), args.pg)
    pg.check_dsn(dsn, loader=loader)
    return dsn


def cmd_revert(args: argparse.Namespace) -> int:
    from .ops import revert
    from .io.spark import get_spark

    conf = config.load_config(args.conf)
    sel = revert.Selection(stage=args.stage, below=args.below, run_id=args.run, undo=args.undo)
    dsn = _pg_for(args, conf, loader=True)   # a bad DSN or role fails before Spark starts
    spark = get_spark(conf, "newsdedup-revert", [args.output])
    from .io import store

    store.check_is_output(spark, args.output)
    verb = "restore" if args.undo else "revert"
    if args.dry_run:
        counts = revert.count_delta(spark, args.output, sel)
        for stage in sorted(counts):
            print(f"{stage:<10} {counts[stage]}")
        pg_part = f", postgres {revert.count_postgres(dsn, sel)}" if dsn else ""
        print(f"would {verb}: delta {sum(counts.values())}{pg_part} (dry run: nothing changed)")
        return 0
    from .io import lock

    with lock.hold(args.output, conf.lock, "newsdedup revert"):
        result = revert.apply(spark, args.output, sel, dsn=dsn, reason=args.reason)
    pg_part = "" if result.postgres is None else f" postgres={result.postgres}"
    print(f"{'restored' if args.undo else 'reverted'}: delta={result.delta}{pg_part}")
    return 0


def _date(text: str, today=None):
    """YYYY-MM-DD, or 'today' / 'yesterday' (UTC days, like linked_at in stats)."""
    from datetime import date, datetime, timedelta, timezone

    today = today or datetime.now(timezone.utc).date()
    relative = {"today": today, "yesterday": today - timedelta(days=1)}
    if text.lower() in relative:
        return relative[text.lower()]
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected YYYY-MM-DD, 'today' or 'yesterday', got {text!r}") from None


def cmd_stats(args: argparse.Namespace) -> int:
    import json

    from .ops import stats

    conf = config.load_config(args.conf)
    flt = stats.Filter(stage=args.stage, day=args.day, since=args.since, until=args.until)
    refused: list[dict] = []   # kept in Delta only: --source delta shows them
    if args.source == "postgres":
        daily, hist = stats.postgres_stats(_pg_for(args, conf), flt)
    else:
        from .io.spark import get_spark

        if not args.output:
            raise ValueError("stats --source delta needs --output")
        from .io import store

        spark = get_spark(conf, "newsdedup-stats", [args.output])
        store.check_is_output(spark, args.output)
        daily, hist = stats.delta_stats(spark, args.output, flt)
        refused = stats.delta_refusals(spark, args.output, flt)
    if args.json:
        print(json.dumps({"daily": daily, "histogram": hist, "refused": refused}, default=str, indent=2))
    else:
        print(stats.format_stats(daily, hist))
        if refused:
            print("\n" + stats.format_refusals(refused))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .io import pg
    from .ops import check

    conf = config.load_config(args.conf)
    if not args.pg and not args.output:
        raise UserError("check needs --pg DSN or --output DIR (whose embedded server to use)")
    checker = check.Checker(conf, pg.resolve_dsn(conf, args.output, args.pg), insert=args.insert,
                            batch_size=args.batch_size, workers=args.workers)
    # This process only checks from here on: what start-up built (modules, the Preparer's numba and
    # pyarrow objects) is kept out of the garbage collector's full passes, which otherwise walked it
    # every few batches (0.047 of a bulk lookup's 0.250 ms of CPU per article at 1M documents; 0.011 frozen).
    # Thawed at the end: objects left frozen are never collected, and extension modules report them
    # as leaked when the interpreter exits (or the caller's process, e.g. a test, goes on).
    import gc

    gc.freeze()
    # The next round's keys are computed in a helper thread while Postgres answers this one
    # (Checker._with_probes). When an answer comes, the waiting thread gets the GIL back only after
    # the switch interval (5 ms by default); at 0.5 ms bulk lookups at 1M documents were 1.06x as fast
    # (median of 8 alternations, docs/benchmarks_check.md). Restored at the end, as the collector is.
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(check.SWITCH_INTERVAL_S)
    refused: list = []
    shown = 0

    def show_refusals() -> None:   # each where the stream has reached it, so nothing goes unanswered
        nonlocal shown
        for refusal in refused[shown:]:
            print(refusal.json(), flush=True)
        shown = len(refused)

    try:
        with checker:
            for verdict in checker.check_batch(check.read_jsonl(args.input, conf.input.max_line_bytes, refused)):
                print(verdict.json(), flush=True)
                show_refusals()
    finally:
        gc.unfreeze()
        sys.setswitchinterval(switch_interval)
        show_refusals()
        if refused:
            print(f"newsdedup: check: {check.refusal_summary(refused)}", file=sys.stderr)
        if checker.stats.gave_up:
            print(f"newsdedup: check: {check.gave_up_summary(checker)}", file=sys.stderr)
    return 0


def cmd_migrate_urls(args: argparse.Namespace) -> int:
    from .ops import migrate

    from .io import pg

    conf = config.load_config(args.conf)
    pg.check_dsn(args.pg)
    target = migrate.Target(args.table, args.id_column, args.url_column, args.source_column)
    report = migrate.migrate(args.pg, target, conf.url, apply=args.apply, batch_size=args.batch_size,
                             skip_collisions=args.skip_collisions)
    print(report.text(limit=args.show))
    return 0


def cmd_embed_backfill(args: argparse.Namespace) -> int:
    from .stages.semantic import step as semantic
    from .io.spark import get_spark

    sem = {k: v for k, v in (("model", args.model), ("model_version", args.model_version),
                             ("device", args.device)) if v}
    if args.model and not args.model_version:
        sem["model_version"] = None  # derive it from the new model, never inherit another model's tag
    conf = config.load_config(args.conf, overrides={"semantic": sem})
    spark = get_spark(conf, "newsdedup-embed-backfill", [args.output])
    result = semantic.backfill(spark, args.output, conf.semantic, limit=args.limit)
    print(" ".join(f"{k}={v}" for k, v in result.items()))
    return 0


def lab_commands() -> dict[str, "EntryPoint"]:
    """Commands other packages add (the lab: eval, bench, calibrate), by name; read from package
    metadata, so nothing of theirs is imported unless their command runs."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group="newsdedup.commands")}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="newsdedup", description="Deduplicate a news archive with Spark.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run the dedup cascade on a Parquet or Delta snapshot")
    _common(p)
    p.add_argument("--input", nargs="+", metavar="PATH",
                   help="Parquet file/dir or Delta table (any Hadoop URI: s3a://, abfss://, ...); several: a "
                        "backfill's slices, run in order in one Spark session, each a run of its own")
    p.add_argument("--output", required=True, help="directory (or URI) for the Delta tables")
    p.add_argument("--resume", metavar="RUN_ID", help="continue a crashed run from its first unfinished step")
    p.add_argument("--pg", help="Postgres DSN (default: embedded server under OUTPUT/pgdata)")
    p.add_argument("--dry-run", action="store_true", help="compute and print counts, write nothing")
    p.add_argument("--no-postgres", action="store_true", help="write Delta only")
    p.add_argument("--no-semantic", action="store_true", help="skip stage 4 (semantic embeddings)")
    p.add_argument("--skip-unreadable", action="store_true",
                   help="skip input files that cannot be read (recorded in OUTPUT/skipped_files and the report) "
                        "instead of stopping (input.skip_unreadable)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("load", help="(re)load documents and duplicate_links from Delta into Postgres, idempotently")
    _common(p)
    p.add_argument("--output", required=True)
    p.add_argument("--pg")
    p.add_argument("--run", help="only links of this run id")
    p.add_argument("--load-id", help="reuse a load id to resume a failed load")
    p.add_argument("--dry-run", action="store_true", help="print counts per stage, load nothing")
    p.set_defaults(func=cmd_load)

    p = sub.add_parser("revert", help="soft-revert links (stamp reverted_at) in Delta and Postgres")
    _common(p)
    p.add_argument("--output", required=True)
    p.add_argument("--stage", required=True, choices=STAGE_NAMES)
    p.add_argument("--below", type=float, help="only links with score < BELOW")
    p.add_argument("--run", help="only links of this run id")
    p.add_argument("--reason", help="text stored in revert_reason")
    p.add_argument("--undo", action="store_true", help="restore matching reverted links instead")
    p.add_argument("--pg", help="Postgres DSN (default: embedded server under OUTPUT/pgdata)")
    p.add_argument("--no-postgres", action="store_true", help="Delta only")
    p.add_argument("--dry-run", action="store_true", help="print how many links per stage would change")
    p.set_defaults(func=cmd_revert)

    p = sub.add_parser("stats", help="links per stage per day and score histograms")
    _common(p)
    p.add_argument("--output", help="directory of the Delta tables (for --source delta)")
    p.add_argument("--stage", choices=STAGE_NAMES)
    p.add_argument("--day", type=_date, help="YYYY-MM-DD, today or yesterday (UTC day of linked_at)")
    p.add_argument("--since", type=_date, help="YYYY-MM-DD, inclusive")
    p.add_argument("--until", type=_date, help="YYYY-MM-DD, inclusive")
    p.add_argument("--source", choices=["delta", "postgres"], default="delta")
    p.add_argument("--pg", help="Postgres DSN for --source postgres")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("check", help="look incoming articles up in Postgres: one JSON verdict per line")
    _common(p)
    p.add_argument("--input", required=True, help="JSON lines, one article per line (the input columns)")
    p.add_argument("--pg", help="Postgres DSN (default: the embedded server of --output)")
    p.add_argument("--output", help="directory whose embedded server to use when --pg is not given")
    p.add_argument("--insert", action="store_true", help="also insert each article's document and link")
    p.add_argument("--batch-size", type=int, default=256,
                   help="articles looked up per round trip (default 256); verdicts stream out per batch, "
                        "and with --insert each batch is one transaction")
    p.add_argument("--workers", type=int, default=1,
                   help="processes looking batches up side by side, each with its own connection (default 1; "
                        "read-only: not with --insert; stages 1-3: not with semantic.enabled). Verdicts are "
                        "the same and in input order; each worker costs a second or two to start")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("migrate-urls", help="rewrite a Postgres table's URLs to canonical form (dry run by default)")
    _common(p)
    p.add_argument("--pg", required=True)
    p.add_argument("--table", required=True, help="table name, optionally schema-qualified")
    p.add_argument("--id-column", default="id")
    p.add_argument("--url-column", default="url")
    p.add_argument("--source-column", help="column naming the source, for per-source URL rules")
    p.add_argument("--apply", action="store_true", help="update the rows (one transaction)")
    p.add_argument("--skip-collisions", action="store_true",
                   help="leave rows whose new URL collides with another row unchanged")
    p.add_argument("--batch-size", type=int, default=10_000)
    p.add_argument("--show", type=int, default=20, help="how many collisions/malformed URLs to list")
    p.set_defaults(func=cmd_migrate_urls)

    p = sub.add_parser("embed-backfill", help="embed documents lacking a vector of a model version, one bounded batch")
    _common(p)
    p.add_argument("--output", required=True, help="directory with the documents and embeddings Delta tables")
    p.add_argument("--model", help="sentence-transformers name or local path (default: semantic.model)")
    p.add_argument("--model-version", help="version tag stored with the vectors (default: semantic.model_version)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="default: semantic.device")
    p.add_argument("--limit", type=int, help="documents per run (default: semantic.backfill_batch)")
    p.set_defaults(func=cmd_embed_backfill)

    for name, ep in sorted(lab_commands().items()):   # listed in --help; main() hands them their argv
        sub.add_parser(name, add_help=False, help=f"(from {ep.value.split(':')[0]}) see: newsdedup {name} --help")

    return parser


def main(argv: list[str] | None = None) -> int:
    import os

    argv = sys.argv[1:] if argv is None else argv
    plugin = lab_commands().get(argv[0]) if argv else None
    if plugin is not None:
        args = argparse.Namespace(output=None)

        def command(_args: argparse.Namespace) -> int:
            return plugin.load()(argv[1:])
    else:
        args = build_parser().parse_args(argv)
        command = args.func
        if getattr(args, "verbose", False):
            os.environ["NEWSDEDUP_VERBOSE"] = "1"   # read by io.spark when the session is built
    try:
        return command(args)
    except (UserError, ValueError) as exc:
        # One line per problem (a refusal of several input files has one per file), each prefixed;
        # a password that reached the message is masked.
        for line in _shown(str(exc)).splitlines() or [""]:
            print(f"newsdedup: error: {line}", file=sys.stderr)
        return 2
    except Exception as exc:
        # Postgres first: its "Connection refused" is not the object store's.
        message = _postgres_failure(exc) or _store_failure(exc, args)
        if message is None:
            # Not one of ours: the whole trace, as Python would print it, but with passwords masked
            # (a Spark task's failure quotes whatever its Python worker raised).
            import traceback

            sys.stderr.write(_shown("".join(traceback.format_exception(exc))))
            return 1
        print(f"newsdedup: error: {_shown(message)}", file=sys.stderr)
        return 2


def _shown(message: str) -> str:
    """message as it may reach the terminal: every Postgres password the process used masked."""
    from .io import dsn

    return dsn.mask_known(message)


def _postgres_failure(exc: Exception) -> str | None:
    """One line, no trace, for a server that goes away mid-command (killed, stopped, restarted, lock
    timeout) and for a role refused a right, on the driver or in a Spark task (whose failure quotes it)."""
    from .io.pg import describe_denied, describe_failure

    return describe_failure(exc) or describe_denied(exc)


def _store_failure(exc: Exception, args: argparse.Namespace) -> str | None:
    """A Java failure of the object store met outside io.paths (inside a Delta read/write), or a
    write the file system refused (read-only, permissions, full): one line."""
    from .io.paths import describe_failure, describe_os_error

    return describe_failure(getattr(args, "output", None) or "", exc) or describe_os_error(exc)


if __name__ == "__main__":
    sys.exit(main())
