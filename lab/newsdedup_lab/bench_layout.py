"""Delta layouts for documents and duplicate_links, measured: files a reader's query reads, write and OPTIMIZE cost.

    python -m newsdedup_lab.bench_layout --docs 1000000 [--out /tmp/bench-layout] [--layouts none,liquid]

The cascade is not run: an output of N documents is written directly with the job's own store
functions (store.merge_documents, incremental.write_links, layout.prepare_table/optimize), from a
synthetic documents frame with the documents table's schema. Texts come from lab/synth.py (a block
of up to 20,000 generated articles, repeated with new ids, each body prefixed by its id so that no
two rows are equal, in random order); published_at is drawn uniformly over three years (synth's span), links are
drawn for 45% of the documents over the four stages. The output is written as a backfill in two
slices (90% of the ids, then 10%, each slice a run: its own linked_at day), with OPTIMIZE after
each, as a run does. For each layout it reports the files in each table, the files a one-day, a
one-month and a one-day-one-language query over documents reads, the files a one-stage and a
one-stage-one-linked-day query over duplicate_links reads (DataFrame.inputFiles(): what is left
after Delta's data skipping / partition pruning), and the seconds of the writes and of OPTIMIZE.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from datetime import datetime, timedelta, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from newsdedup import incremental
from newsdedup.config import load_config, parse_size
from newsdedup.io import layout, store
from newsdedup.io.spark import get_spark

from . import synth

BLOCK = 20_000
LINK_SHARE = 45                          # % of documents that are some other's duplicate
STAGES = (("url", 20), ("content", 30), ("simhash", 35), ("semantic", 15))   # % of links per stage
RUN_DAY = datetime(2026, 1, 5, 3, 0, tzinfo=timezone.utc)
QUERY_DAY = "2024-06-13"

# name -> (documents layout, links layout); each layout: ("none" | "partition" | "zorder" | "liquid", columns)
LAYOUTS = {
    "none": (("none", []), ("none", [])),
    "partition_month": (("partition", ["published_month"]), ("partition", ["stage"])),
    "zorder": (("zorder", ["published_at"]), ("zorder", ["stage", "linked_at"])),
    "liquid": (("liquid", ["published_at"]), ("liquid", ["stage", "linked_at"])),
    "liquid_lang": (("liquid", ["published_at", "lang"]), ("liquid", ["stage", "linked_at", "duplicate_id"])),
}


def documents_frame(spark: SparkSession, n: int, seed: int = 7) -> DataFrame:
    """n documents with the documents table's columns (values derived from synthetic articles)."""
    block, _ = synth.generate(min(n, BLOCK), seed=seed)
    base = spark.createDataFrame(block.select(["id", "url", "title", "body", "source", "lang"]).to_pandas())
    reps = spark.range((n + BLOCK - 1) // BLOCK).withColumnRenamed("id", "rep")
    docs = base.crossJoin(reps).select(
        (F.col("rep") * BLOCK + F.col("id")).alias("id"), "rep", "url", "title", "body", "source", "lang")
    docs = docs.where(F.col("id") < n)
    h = F.xxhash64("body", "id")
    simhash = F.xxhash64(F.lit("s"), "body", "id")
    return docs.select(
        "id",
        (F.lit(synth.T0).cast("timestamp")
         + F.make_dt_interval(F.lit(0), F.lit(0), F.pmod(F.xxhash64("id", F.lit(seed)), F.lit(3 * 365 * 24 * 60))
                              .cast("int"))).alias("published_at"),
        "source",
        F.concat("url", F.lit("?r="), F.col("rep").cast("string")).alias("url"),
        F.concat("url", F.lit("?r="), F.col("rep").cast("string")).alias("canonical_url"),
        F.sha2(F.concat("url", F.col("rep").cast("string")), 256).alias("url_hash"),
        F.lit(None).cast("string").alias("url_error"),
        "title",
        F.concat(F.col("id").cast("string"), F.lit(" "), "body").alias("body"),
        "lang",
        F.lit(False).alias("lang_detected"),
        F.sha2(F.concat(F.col("id").cast("string"), "body"), 256).alias("content_hash"),
        F.length("body").cast("int").alias("text_chars"),
        simhash.alias("simhash"),
        (F.length("body") / 6).cast("int").alias("n_features"),
        *[(F.shiftright(simhash, 16 * i).bitwiseAND(0xFFFF)).cast("int").alias(f"band_{i}") for i in range(4)],
        F.xxhash64(F.lit("w"), "body", "id").alias("simhash_w"),
        F.array(*[F.xxhash64(F.lit(i), "body", "id") for i in range(25)]).alias("mh_bands"),
        F.array().cast("array<string>").alias("flags"),
        F.lit("bench").alias("run_id"),
    ).withColumn("_h", h).orderBy("_h")   # no run of copies of one text side by side (they would compress away)


def links_frame(docs: DataFrame) -> DataFrame:
    """Computed links (duplicate_id, canonical_id, stage, score, via_id) for LINK_SHARE% of docs."""
    pick = F.pmod(F.col("_h"), F.lit(100))
    bucket = F.pmod(F.shiftright(F.col("_h"), 8), F.lit(100))
    stage, edge = None, 0
    for name, share in STAGES:
        edge += share
        stage = (F.when(bucket < edge, name) if stage is None else stage.when(bucket < edge, name))
    return docs.where(pick < LINK_SHARE).select(
        F.col("id").alias("duplicate_id"), F.greatest(F.col("id") - 1 - F.pmod(F.col("_h"), F.lit(50)), F.lit(0))
        .alias("canonical_id"), stage.alias("stage"), (0.9 + F.rand(3) / 10).alias("score"),
        F.lit(None).cast("long").alias("via_id"))


def _create(spark: SparkSession, path: str, schema, how: str, cols: list[str]) -> None:
    """The empty table for a layout (none and zorder: left to the writers, as the job does without layout)."""
    from delta.tables import DeltaTable
    from pyspark.sql import types as T

    if how == "liquid":
        layout.prepare_table(spark, path, path.rsplit("/", 1)[-1], schema, cols)
    elif how == "partition" and not store.exists(spark, path):
        nullable = T.StructType([T.StructField(f.name, f.dataType, True) for f in schema.fields
                                 if f.name != "published_month"])
        b = DeltaTable.create(spark).location(path).addColumns(nullable)
        if cols == ["published_month"]:   # generated: Delta prunes months from a published_at filter
            b = b.addColumn("published_month", "STRING", generatedAlwaysAs="date_format(published_at, 'yyyy-MM')")
        b.partitionedBy(*cols).execute()


def _optimize(spark: SparkSession, path: str, how: str, cols: list[str], max_bytes: int) -> tuple[int, int]:
    if how != "zorder":
        return layout.optimize(spark, path, max_bytes)
    before, _ = layout.detail(spark, path)
    spark.conf.set(layout.MAX_FILE_SIZE_CONF, str(max_bytes))
    spark.sql(f"OPTIMIZE delta.`{path}` ZORDER BY ({', '.join(cols)})").collect()
    spark.conf.unset(layout.MAX_FILE_SIZE_CONF)
    return before, layout.detail(spark, path)[0]


def _size_mb(spark: SparkSession, path: str) -> float:
    """The table's current files (from its log, not the removed ones still on disk)."""
    return spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["sizeInBytes"] / 2 ** 20


def _rewritten_mb(spark: SparkSession, path: str) -> float:
    """What the table's last commit (its OPTIMIZE) read and wrote again: the size of the files it removed."""
    from delta.tables import DeltaTable

    last = DeltaTable.forPath(spark, path).history(1).first()
    if last["operation"] != "OPTIMIZE":
        return 0.0
    return int(last["operationMetrics"].get("numRemovedBytes", 0)) / 2 ** 20


def run_layout(spark: SparkSession, name: str, docs: DataFrame, links: DataFrame, root: str,
               max_bytes: int) -> dict:
    (dh, dcols), (lh, lcols) = LAYOUTS[name]
    dpath, lpath = f"{root}/{name}/documents", f"{root}/{name}/duplicate_links"
    out: dict = {"layout": name, "documents_layout": f"{dh} {','.join(dcols)}".strip(),
                 "links_layout": f"{lh} {','.join(lcols)}".strip(), "write_s": [], "optimize_s": [],
                 "files_before_after": [], "optimize_rewrote_mb": []}
    slices = [F.pmod(F.col("id"), F.lit(10)) < 9, F.pmod(F.col("id"), F.lit(10)) >= 9]
    for k, cond in enumerate(slices):
        now = RUN_DAY + timedelta(days=k)
        t0 = time.perf_counter()
        part = docs.where(cond).drop("_h")
        if dh == "partition":   # MERGE's UPDATE SET * needs every column in the source, the generated one too
            part = part.withColumn("published_month", F.date_format("published_at", "yyyy-MM"))
        _create(spark, dpath, part.schema, dh, dcols)
        _create(spark, lpath, incremental.TABLE_SCHEMA, lh, lcols)
        store.merge_documents(spark, part, dpath)
        # A run's link set is over the whole archive so far: earlier slices' links are recomputed too.
        incremental.write_links(spark, links.where(F.col("duplicate_id") % 10 < (9 if k == 0 else 10)),
                                lpath, f"run{k}", now)
        out["write_s"].append(round(time.perf_counter() - t0, 1))
        t0 = time.perf_counter()
        (db, da), (lb, la) = (_optimize(spark, dpath, dh, dcols, max_bytes),
                              _optimize(spark, lpath, lh, lcols, max_bytes))
        out["optimize_s"].append(round(time.perf_counter() - t0, 1))
        out["files_before_after"].append({"documents": [db, da], "links": [lb, la]})
        out["optimize_rewrote_mb"].append(round(_rewritten_mb(spark, dpath) + _rewritten_mb(spark, lpath), 1))
    d = spark.read.format("delta").load(dpath)
    ln = spark.read.format("delta").load(lpath)
    day = F.col("published_at").between(F.lit(QUERY_DAY).cast("timestamp"),
                                        F.lit(QUERY_DAY + " 23:59:59.999999").cast("timestamp"))
    month = (F.col("published_at") >= F.lit("2024-06-01").cast("timestamp")) & \
            (F.col("published_at") < F.lit("2024-07-01").cast("timestamp"))
    linked_day = F.col("linked_at") >= F.lit(RUN_DAY.date().isoformat()).cast("timestamp") + F.expr("INTERVAL 1 DAY")
    out.update({
        "docs_files": layout.detail(spark, dpath)[0], "docs_mb": round(_size_mb(spark, dpath), 1),
        "docs_day_files": layout.files_read(d.where(day)),
        "docs_day_rows": d.where(day).count(),
        "docs_month_files": layout.files_read(d.where(month)),
        "docs_day_lang_files": layout.files_read(d.where(day & (F.col("lang") == "bn"))),
        "links_files": layout.detail(spark, lpath)[0], "links_mb": round(_size_mb(spark, lpath), 1),
        "links_stage_files": layout.files_read(ln.where(F.col("stage") == "semantic")),
        "links_stage_day_files": layout.files_read(ln.where((F.col("stage") == "semantic") & linked_day)),
    })
    return out


# name -> max_read_share given to layout.optimize (None: Delta's own 100 GiB cube threshold)
POLICIES = {"full": None, "new": 1.0, "tiered": 0.04}
SAMPLE_DAYS = 20


def _day(d: datetime):
    return F.col("published_at").between(F.lit(d.strftime("%Y-%m-%d")).cast("timestamp"),
                                         F.lit(d.strftime("%Y-%m-%d") + " 23:59:59.999999").cast("timestamp"))


def _reads(spark: SparkSession, dpath: str, lpath: str, stage_day: datetime) -> dict:
    """Files read by the readers' queries, and the table's files and cubes, from the Delta log."""
    d = spark.read.format("delta").load(dpath)
    ln = spark.read.format("delta").load(lpath)
    days = [datetime(2023, 1, 1) + timedelta(days=int(i * 1095 / SAMPLE_DAYS) + 3) for i in range(SAMPLE_DAYS)]
    day_reads = [layout.files_read(d.where(_day(x))) for x in days]
    month = (F.col("published_at") >= F.lit("2024-06-01").cast("timestamp")) & \
            (F.col("published_at") < F.lit("2024-07-01").cast("timestamp"))
    c = layout.cubes(spark, dpath)
    return {"docs_files": layout.detail(spark, dpath)[0], "docs_cubes": len(c.sizes),
            "docs_unclustered": c.unclustered_files, "docs_mb": round(_size_mb(spark, dpath), 1),
            "day_files": layout.files_read(d.where(_day(datetime.fromisoformat(QUERY_DAY)))),
            "day_files_max": max(day_reads), "day_files_mean": round(sum(day_reads) / len(day_reads), 2),
            "month_files": layout.files_read(d.where(month)),
            "links_files": layout.detail(spark, lpath)[0],
            "links_stage_files": layout.files_read(ln.where(F.col("stage") == "semantic")),
            "links_stage_day_files": layout.files_read(
                ln.where((F.col("stage") == "semantic") & (F.col("linked_at") >= F.lit(stage_day).cast("timestamp"))))}


def _slice_step(spark: SparkSession, docs: DataFrame, links: DataFrame, dpath: str, lpath: str, lo: int, hi: int,
                k: int, max_bytes: int, share: float | None) -> dict:
    """One backfill slice (ids with id % 100 in [lo, hi)) written as a run does, then OPTIMIZE under a policy."""
    now = RUN_DAY + timedelta(days=k)
    t0 = time.perf_counter()
    part = docs.where((F.pmod("id", F.lit(100)) >= lo) & (F.pmod("id", F.lit(100)) < hi)).drop("_h")
    layout.prepare_table(spark, dpath, "documents", part.schema, ["published_at"])
    layout.prepare_table(spark, lpath, "duplicate_links", incremental.TABLE_SCHEMA, ["stage", "linked_at"])
    store.merge_documents(spark, part, dpath)
    # The run's links are those of its documents (scope: its ids), as an incremental run writes them.
    scope = part.select("id")
    incremental.write_links(spark, links.where((F.pmod("duplicate_id", F.lit(100)) >= lo)
                                               & (F.pmod("duplicate_id", F.lit(100)) < hi)),
                            lpath, f"run{k}", now, scope=scope)
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    db, da = layout.optimize(spark, dpath, max_bytes, share)
    lb, la = layout.optimize(spark, lpath, max_bytes, share)
    opt_s = time.perf_counter() - t0
    return {"slice": k, "share_pct": hi - lo, "write_s": round(write_s, 1), "optimize_s": round(opt_s, 1),
            "docs_rewritten_mb": round(_rewritten_mb(spark, dpath), 1),
            "links_rewritten_mb": round(_rewritten_mb(spark, lpath), 1),
            "docs_files_before_after": [db, da], "links_files_before_after": [lb, la],
            **_reads(spark, dpath, lpath, now)}


def run_slices(spark: SparkSession, docs: DataFrame, links: DataFrame, root: str, max_bytes: int,
               slices: list[int], policies: list[str], emit=lambda row: None) -> list[dict]:
    """A backfill in slices (percent of the ids each): the first is written once, then copied for each policy."""
    edges = [0]
    for pct in slices:
        edges.append(edges[-1] + pct)
    assert edges[-1] <= 100, "slices add up to more than 100%"
    base = f"{root}/base"
    first = _slice_step(spark, docs, links, f"{base}/documents", f"{base}/duplicate_links", 0, edges[1], 0,
                        max_bytes, None)   # one cube of everything under every policy
    rows = []
    for name in policies:
        shutil.copytree(base, f"{root}/{name}")
        dpath, lpath = f"{root}/{name}/documents", f"{root}/{name}/duplicate_links"
        rows.append({"policy": name, **first})
        emit(rows[-1])
        for k in range(1, len(slices)):
            rows.append({"policy": name, **_slice_step(spark, docs, links, dpath, lpath, edges[k], edges[k + 1], k,
                                                       max_bytes, POLICIES[name])})
            emit(rows[-1])
    return rows


def markdown_slices(rows: list[dict]) -> str:
    """The per-slice results of --slices as the table in docs/benchmarks-layout.md."""
    head = ("| docs | policy | slice | % | write s | OPTIMIZE s | rewrote MB (docs + links) | documents files | "
            "cubes | one day: files read (QUERY_DAY; max of 20 days) | % of files (max) | one month | "
            "links files | one stage | stage + run day |")
    lines = [head, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['docs']:,} | {r['policy']} | {r['slice']} | {r['share_pct']} | {r['write_s']} | {r['optimize_s']} | "
            f"{r['docs_rewritten_mb']} + {r['links_rewritten_mb']} | {r['docs_files']} | {r['docs_cubes']} | "
            f"{r['day_files']}; {r['day_files_max']} | {100 * r['day_files_max'] / r['docs_files']:.1f}% | "
            f"{r['month_files']} | {r['links_files']} | {r['links_stage_files']} | {r['links_stage_day_files']} |")
    return "\n".join(lines)


def markdown(rows: list[dict]) -> str:
    """The results of --json as the table in docs/benchmarks-layout.md."""
    head = ("| docs | layout (documents; links) | documents files | MB | one day: files read | one month | "
            "one day + lang | links files | one stage: files read | stage + linked day | write s (slices) | "
            "OPTIMIZE s (slices) | OPTIMIZE rewrote MB (slices) |")
    lines = [head, "|---:|---|" + "---:|" * 11]
    for r in rows:
        pct = 100 * r["docs_day_files"] / r["docs_files"]
        lines.append(
            f"| {r['docs']:,} | {r['layout']} ({r['documents_layout']}; {r['links_layout']}) | {r['docs_files']} | "
            f"{r['docs_mb']:,} | {r['docs_day_files']} ({pct:.1f}%) | {r['docs_month_files']} | "
            f"{r['docs_day_lang_files']} | {r['links_files']} | {r['links_stage_files']} | "
            f"{r['links_stage_day_files']} | {' + '.join(map(str, r['write_s']))} | "
            f"{' + '.join(map(str, r['optimize_s']))} | {' + '.join(map(str, r['optimize_rewrote_mb']))} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--out", default="/tmp/bench-layout")
    p.add_argument("--layouts", default=",".join(LAYOUTS))
    p.add_argument("--max-file-size", help="OPTIMIZE's largest file (default: conf layout.max_file_size)")
    p.add_argument("--driver-memory", default="5g")
    p.add_argument("--json", help="append each layout's result as a JSON line to this file")
    p.add_argument("--markdown", metavar="JSONL", help="print the results in JSONL (from --json) as a table; no run")
    p.add_argument("--slices", help="a backfill in slices, percent of the ids each (e.g. 90,2,2,2,2,2), liquid "
                                    "layout, OPTIMIZE after each under each of --policies; one JSON line per slice")
    p.add_argument("--policies", default=",".join(POLICIES), help=f"OPTIMIZE policies for --slices: {POLICIES}")
    args = p.parse_args(argv)
    if args.markdown:
        with open(args.markdown, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        print(markdown_slices(rows) if rows and "policy" in rows[0] else markdown(rows))
        return
    # The generated frame is cached (MEMORY_AND_DISK): a larger heap than the job's local default.
    conf = load_config(overrides={"spark": {"driver_memory": args.driver_memory}})
    max_bytes = parse_size(args.max_file_size or conf.layout.max_file_size)
    spark = get_spark(conf, "bench-layout")
    shutil.rmtree(args.out, ignore_errors=True)
    t0 = time.perf_counter()
    docs = documents_frame(spark, args.docs).cache()
    links = links_frame(docs).cache()
    n_docs, n_links = docs.count(), links.count()
    print(f"{n_docs} documents, {n_links} links generated in {time.perf_counter() - t0:.0f} s; "
          f"max_file_size {max_bytes} bytes", flush=True)
    if args.slices:
        def emit(row: dict) -> None:
            row = {"docs": n_docs, "links": n_links, "max_file_bytes": max_bytes, **row}
            print(json.dumps(row), flush=True)
            if args.json:
                with open(args.json, "a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")

        run_slices(spark, docs, links, args.out, max_bytes, [int(x) for x in args.slices.split(",")],
                   args.policies.split(","), emit)
        spark.stop()
        return
    for name in args.layouts.split(","):
        res = {"docs": n_docs, "links": n_links, "max_file_bytes": max_bytes, **run_layout(spark, name, docs, links,
                                                                                              args.out, max_bytes)}
        print(json.dumps(res), flush=True)
        if args.json:
            with open(args.json, "a", encoding="utf-8") as f:
                f.write(json.dumps(res) + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
