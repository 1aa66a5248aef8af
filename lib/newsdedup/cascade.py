"""The cascade: prepare every document once, then run the configured stages in order.

Each stage sees only the documents the earlier ones could not resolve. The
cascade itself writes no Delta table of the job's results (that is `job.run`),
but stage 4, given an output, merges the vectors it computed into
<output>/embeddings so that later runs reuse them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import prepare, stages
from .io.input import TEXT_COLUMNS, conform, split_invalid
from .stages.simhash import STAGE_COLUMNS as SIMHASH_COLUMNS

if TYPE_CHECKING:
    from .config import Config
    from .job import Report


@dataclass
class CascadeResult:
    documents: DataFrame
    links: DataFrame
    quarantine: DataFrame


def _quarantine(invalid: DataFrame, failed: DataFrame) -> DataFrame:
    """Rows that are not documents, with their reason and the whole record as JSON."""
    return (invalid.select(
        F.col("raw_id"), F.col("quarantine_reason").alias("reason"),
        F.to_json(F.struct(
            F.col("raw_id").alias("id"), F.col("raw_published_at").alias("published_at"),
            *[F.col(c).cast("string").alias(c) for c in TEXT_COLUMNS])).alias("record"))
        .unionByName(failed.select(F.col("id").cast("string").alias("raw_id"),
                                   F.col("prepare_error").alias("reason"),
                                   F.to_json(F.struct("id", "url", "source", "published_at")).alias("record"))))


def _count_prepared(prepared: DataFrame, invalid: DataFrame, report: "Report") -> None:
    """One pass over the prepared rows for all the per-document counters."""
    ok = F.col("prepare_error").isNull()
    row = prepared.agg(
        F.sum(ok.cast("int")).alias("documents"),
        F.sum((~ok).cast("int")).alias("failed"),
        F.sum((ok & F.col("url_error").isNotNull()).cast("int")).alias("url_unparseable"),
        F.sum((ok & F.col("content_hash").isNull()).cast("int")).alias("no_content_hash"),
        F.sum((ok & F.col("simhash").isNull()).cast("int")).alias("no_simhash"),
    ).first().asDict()
    summary = {k: int(v or 0) for k, v in row.items()}
    n_invalid = invalid.count()
    report.counts["input_rows"] = summary["documents"] + summary["failed"] + n_invalid
    report.counts["quarantined"] = summary["failed"] + n_invalid
    for key in ("documents", "url_unparseable", "no_content_hash", "no_simhash"):
        report.counts[key] = summary[key]


def run_cascade(spark: SparkSession, raw: DataFrame, conf: "Config", report: "Report",
                output: str | None = None) -> CascadeResult:
    """Prepare and deduplicate raw (the job's input schema); DataFrames are cached as they are reused.

    output: where stage 4 keeps its vectors (None: they stay in memory).
    """
    valid, invalid = split_invalid(conform(raw, conf.input.naive_timezone))
    prepared = prepare.fingerprint(valid, conf).cache()
    docs = prepared.where(F.col("prepare_error").isNull()).drop("prepare_error")
    quarantine = _quarantine(invalid, prepared.where(F.col("prepare_error").isNotNull()))
    report.timed("prepare", lambda: _count_prepared(prepared, invalid, report))

    ctx = stages.StageContext(spark=spark, conf=conf, report=report, documents=docs, output=output)
    unresolved = docs.select("id", "published_at", "lang", "url_hash", "content_hash", "simhash",
                             *[f"band_{i}" for i in range(conf.simhash.bands)], *SIMHASH_COLUMNS)
    all_links, all_flags = [], []
    cascade = stages.build(conf)
    for stage in cascade:
        def step(stage=stage, unresolved=unresolved):
            result = stage.run(ctx, unresolved)
            links = result.links.cache()
            return result, links.count()

        result, n_links = report.timed(stage.name, step)
        report.counts[f"links.{stage.name}"] = n_links
        report.notes.extend(result.notes)
        report.counts.update(result.counts)
        all_links.append(result.links)
        if result.flags is not None:
            all_flags.append(result.flags)
        unresolved = result.survivors

    links = all_links[0]
    for extra in all_links[1:]:
        links = links.unionByName(extra, allowMissingColumns=True)   # exact stages have no via_id
    report.counts["links.total"] = sum(report.counts[f"links.{s.name}"] for s in cascade)
    report.counts["unique_documents"] = report.counts["documents"] - report.counts["links.total"]
    return CascadeResult(documents=_with_flags(docs, all_flags), links=links, quarantine=quarantine)


def _with_flags(docs: DataFrame, flag_sets: list[DataFrame]) -> DataFrame:
    """docs with every stage's (id, flag) rows appended to their flags column."""
    if not flag_sets:
        return docs
    flags = flag_sets[0]
    for extra in flag_sets[1:]:
        flags = flags.unionByName(extra)
    extra = flags.groupBy("id").agg(F.array_sort(F.collect_set("flag")).alias("_stage_flags"))
    return (docs.join(extra, "id", "left")
            .withColumn("flags", F.when(F.col("_stage_flags").isNull(), F.col("flags"))
                        .otherwise(F.concat(F.coalesce("flags", F.array().cast("array<string>")), "_stage_flags")))
            .drop("_stage_flags"))
