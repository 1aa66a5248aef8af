"""The batch job: read a snapshot, run the cascade, write Delta tables, load Postgres."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import cascade, pg, prepare, store

def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


@dataclass
class Report:
    run_id: str
    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def timed(self, name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - t0, 3)

    def table(self) -> str:
        rows = [("run_id", self.run_id)] + [(k, str(v)) for k, v in self.counts.items()]
        rows += [(f"seconds.{k}", f"{v:.2f}") for k, v in self.seconds.items()]
        width = max(len(k) for k, _ in rows)
        lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({"run_id": self.run_id, "counts": self.counts, "seconds": self.seconds,
                           "notes": self.notes}, indent=2, sort_keys=True)


@dataclass
class CascadeResult:
    documents: DataFrame
    links: DataFrame
    quarantine: DataFrame


def run_cascade(spark: SparkSession, raw: DataFrame, conf: Mapping[str, Any], report: Report,
                output: str | None = None) -> CascadeResult:
    """Prepare and deduplicate; nothing is written. DataFrames are cached as they are reused."""
    conformed = prepare.conform(raw, conf)
    valid, invalid = prepare.split_invalid(conformed)
    prepared = prepare.fingerprint(valid, conf).cache()
    failed = prepared.where(F.col("prepare_error").isNotNull())
    docs = prepared.where(F.col("prepare_error").isNull()).drop("prepare_error")

    quarantine = (invalid.select(
        F.col("raw_id"), F.col("quarantine_reason").alias("reason"),
        F.to_json(F.struct(
            F.col("raw_id").alias("id"), F.col("raw_published_at").alias("published_at"),
            *[F.col(c).cast("string").alias(c) for c in prepare.TEXT_COLUMNS])).alias("record"))
        .unionByName(failed.select(F.col("id").cast("string").alias("raw_id"),
                                   F.col("prepare_error").alias("reason"),
                                   F.to_json(F.struct("id", "url", "source", "published_at")).alias("record"))))

    def summarize():
        # One pass over the prepared rows for all the per-document counters.
        ok = F.col("prepare_error").isNull()
        row = prepared.agg(
            F.sum(ok.cast("int")).alias("documents"),
            F.sum((~ok).cast("int")).alias("failed"),
            F.sum((ok & F.col("url_error").isNotNull()).cast("int")).alias("url_unparseable"),
            F.sum((ok & F.col("content_hash").isNull()).cast("int")).alias("no_content_hash"),
            F.sum((ok & F.col("simhash").isNull()).cast("int")).alias("no_simhash"),
        ).first().asDict()
        return {k: int(v or 0) for k, v in row.items()}, invalid.count()

    summary, n_invalid = report.timed("prepare", summarize)
    report.counts["input_rows"] = summary["documents"] + summary["failed"] + n_invalid
    report.counts["quarantined"] = summary["failed"] + n_invalid
    for key in ("documents", "url_unparseable", "no_content_hash", "no_simhash"):
        report.counts[key] = summary[key]

    base = docs.select("id", "published_at", "lang", "url_hash", "content_hash", "simhash",
                       *[f"band_{i}" for i in range(int(conf["simhash"]["bands"]))])
    all_links = []

    url_links, survivors = cascade.exact_stage(base, "url_hash", "url")
    url_links = url_links.cache()
    report.counts["links.url"] = report.timed("url", url_links.count)
    all_links.append(url_links)

    content_links, survivors = cascade.exact_stage(survivors, "content_hash", "content")
    content_links = content_links.cache()
    report.counts["links.content"] = report.timed("content", content_links.count)
    all_links.append(content_links)

    def stage3():
        links, surv, oversize = cascade.simhash_stage(survivors, conf)
        links = links.cache()
        return links, surv, links.count(), oversize.count()

    sim_links, survivors, n_sim, n_oversize = report.timed("simhash", stage3)
    report.counts["links.simhash"] = n_sim
    if n_oversize:
        report.notes.append(f"{n_oversize} simhash band bucket(s) over simhash.max_band_bucket were skipped")
    all_links.append(sim_links)

    if conf.get("semantic", {}).get("enabled"):
        from .semantic import semantic_stage  # torch & co. load only when stage 4 is on

        sem_links = report.timed("semantic", lambda: semantic_stage(spark, survivors, docs, conf, output, report))
        report.counts["links.semantic"] = sem_links.count()
        all_links.append(sem_links)

    links = all_links[0]
    for extra in all_links[1:]:
        links = links.unionByName(extra)
    report.counts["links.total"] = sum(v for k, v in report.counts.items() if k.startswith("links.") and k != "links.total")
    report.counts["unique_documents"] = report.counts["documents"] - report.counts["links.total"]
    return CascadeResult(documents=docs, links=links, quarantine=quarantine)


def run(spark: SparkSession, input_path: str, output: str, conf: Mapping[str, Any], *,
        dsn: str | None = None, dry_run: bool = False, load_pg: bool = True,
        run_id: str | None = None) -> Report:
    report = Report(run_id=run_id or new_run_id())
    now = datetime.now(timezone.utc)
    Path(output).mkdir(parents=True, exist_ok=True)
    if spark.sparkContext.getCheckpointDir() is None:
        spark.sparkContext.setCheckpointDir(str(Path(output).resolve() / "_checkpoints"))
    raw = prepare.read_input(spark, input_path)
    # A dry run passes no output, so stage 4 keeps its vectors in memory instead of writing them.
    result = run_cascade(spark, raw, conf, report, None if dry_run else output)
    if dry_run:
        report.notes.append("dry run: nothing written to Delta or Postgres")
        return report

    run_col, ts = F.lit(report.run_id), F.lit(now).cast("timestamp")
    links = (result.links.withColumn("linked_at", ts).withColumn("run_id", run_col)
             .withColumn("reverted_at", F.lit(None).cast("timestamp"))
             .withColumn("revert_reason", F.lit(None).cast("string")))
    report.timed("write_delta", lambda: (
        store.merge_documents(spark, result.documents.withColumn("run_id", run_col),
                              store.table_path(output, "documents")),
        store.insert_links(spark, links, store.table_path(output, "duplicate_links")),
        store.insert_quarantine(spark,
                                result.quarantine.withColumn("run_id", run_col).withColumn("quarantined_at", ts),
                                store.table_path(output, "quarantine")),
    ))
    if load_pg:
        dsn = pg.resolve_dsn(conf, output, dsn)
        # Postgres converges to what Delta holds (all runs): links a failed earlier load missed arrive too.
        delta_links = store.read(spark, output, "duplicate_links")
        loaded = report.timed("load_postgres", lambda: pg.load_links(delta_links, dsn, report.run_id))
        report.counts.update({f"postgres.{k}": v for k, v in loaded.items()})
        if conf.get("semantic", {}).get("enabled"):
            from . import pg_vectors

            vec = report.timed("load_postgres_vectors",
                               lambda: pg_vectors.load_from_delta(spark, output, dsn, conf, report.run_id))
            report.counts.update({f"postgres.documents.{k}": v for k, v in vec.items() if k != "model_version"})
    runs_row = spark.createDataFrame([(report.run_id, now, input_path, report.to_json())],
                                     "run_id string, started_at timestamp, input string, report string")
    store.append(runs_row, store.table_path(output, "runs"))
    reports = Path(output) / "reports"
    reports.mkdir(exist_ok=True)
    (reports / f"{report.run_id}.json").write_text(report.to_json(), encoding="utf-8")
    return report
