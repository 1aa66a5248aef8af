"""`newsdedup` command line."""

from __future__ import annotations

import argparse
import sys

from . import config


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--conf", help="YAML file merged over conf/default.yaml")


def cmd_run(args: argparse.Namespace) -> int:
    from . import job
    from .spark import get_spark

    conf = config.load_config(args.conf)
    spark = get_spark(conf, "newsdedup-run")
    report = job.run(spark, args.input, args.output, conf, dsn=args.pg, dry_run=args.dry_run,
                     load_pg=not args.no_postgres)
    print(report.table())
    return 0


def cmd_load(args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    from . import job, pg, store
    from .spark import get_spark

    conf = config.load_config(args.conf)
    spark = get_spark(conf, "newsdedup-load")
    links = store.read(spark, args.output, "duplicate_links")
    if args.run:
        links = links.where(F.col("run_id") == args.run)
    if args.dry_run:
        counts = links.groupBy("stage").count().orderBy("stage").collect()
        for row in counts:
            print(f"{row['stage']:<10} {row['count']}")
        print(f"{'total':<10} {sum(r['count'] for r in counts)}  (dry run: nothing loaded)")
        return 0
    dsn = pg.resolve_dsn(conf, args.output, args.pg)
    result = pg.load_links(links, dsn, args.load_id or job.new_run_id())
    print(" ".join(f"{k}={v}" for k, v in result.items()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="newsdedup", description="Deduplicate a news archive with Spark.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run the dedup cascade on a Parquet or Delta snapshot")
    _common(p)
    p.add_argument("--input", required=True, help="Parquet file/dir or Delta table")
    p.add_argument("--output", required=True, help="directory for the Delta tables")
    p.add_argument("--pg", help="Postgres DSN (default: embedded server under OUTPUT/pgdata)")
    p.add_argument("--dry-run", action="store_true", help="compute and print counts, write nothing")
    p.add_argument("--no-postgres", action="store_true", help="write Delta only")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("load", help="(re)load duplicate_links from Delta into Postgres, idempotently")
    _common(p)
    p.add_argument("--output", required=True)
    p.add_argument("--pg")
    p.add_argument("--run", help="only links of this run id")
    p.add_argument("--load-id", help="reuse a load id to resume a failed load")
    p.add_argument("--dry-run", action="store_true", help="print counts per stage, load nothing")
    p.set_defaults(func=cmd_load)

    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (config.ConfigError, ValueError) as exc:
        print(f"newsdedup: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
