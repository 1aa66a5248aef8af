"""The cascade: prepare every document once, then run the configured stages in order.

Each stage sees only the documents the earlier ones could not resolve. The
cascade itself writes no Delta table of the job's results (that is `job.run`),
but stage 4, given an output, merges the vectors it computed into
<output>/embeddings so that later runs reuse them.

Every step (prepare, then each stage) goes through `steps.step`, which, for a
run with an output, persists the step's frames under <output>/_runs/<run_id>
and skips steps an earlier attempt of the same run finished (runstate.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import incremental, prepare, runstate, stages
from .clustering import survivors_after
from .errors import UserError
from .io.input import TEXT_COLUMNS, conform, order_date, plausible_range, split_invalid
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
        # Dates the canonical rule cannot use, and text taken from html: visible in the report, not only in flags.
        F.sum((ok & F.exists("flags", lambda f: f.startswith("implausible_published_at")
                                 | f.startswith("unparseable_published_at"))).cast("int")).alias("bad_published_at"),
        F.sum((ok & F.array_contains("flags", "from_html")).cast("int")).alias("text_from_html"),
    ).first().asDict()
    summary = {k: int(v or 0) for k, v in row.items()}
    n_invalid = invalid.count()
    report.counts["input_rows"] = summary["documents"] + summary["failed"] + n_invalid
    report.counts["quarantined"] = summary["failed"] + n_invalid
    for key in ("documents", "url_unparseable", "no_content_hash", "no_simhash", "bad_published_at", "text_from_html"):
        report.counts[key] = summary[key]


def _left(report: "Report") -> int:
    linked = sum(v for k, v in report.counts.items() if k.startswith("links.") and k != "links.total")
    return report.counts.get("documents", 0) - linked


def run_cascade(spark: SparkSession, raw: DataFrame, conf: "Config", report: "Report",
                output: str | None = None, steps=None) -> CascadeResult:
    """Prepare and deduplicate raw (the job's input schema), one step at a time.

    output: where stage 4 keeps its vectors (None: they stay in memory).
    steps: runstate.Persisted to keep each step's frames for --resume; default in memory (cached).
    """
    steps = steps or runstate.InMemory()

    def prepare_step():
        valid, invalid = split_invalid(conform(raw, conf.input.naive_timezone, plausible_range(conf.input)))
        # Not cached: the keys are computed once, by the step's write, and counted from what was
        # written (caching every document's text before the write cost more than the write itself).
        return {"prepared": prepare.fingerprint(valid, conf), "invalid": invalid}

    frames = steps.step("prepare", report, prepare_step, lambda r: (
        f"{r.counts['input_rows']} input rows, {r.counts['documents']} documents, "
        f"{r.counts['quarantined']} quarantined"),
        measure=lambda written: _count_prepared(written["prepared"], written["invalid"], report)).frames
    if "invalid" not in frames:
        raise UserError("this run's prepare step was persisted by an older newsdedup (a prepare/quarantine "
                        "frame, no prepare/invalid); it cannot be resumed by this version: start the run again")
    docs = frames["prepared"].where(F.col("prepare_error").isNull()).drop("prepare_error")
    quarantine = _quarantine(frames["invalid"], frames["prepared"].where(F.col("prepare_error").isNotNull()))

    # With an output that already holds documents, the stages see those too (incremental.py).
    everything = incremental.with_existing(spark, docs, output, report)
    ctx = stages.StageContext(spark=spark, conf=conf, report=report, documents=everything, output=output)
    # Implausible dates are kept on the documents but order last, like unknown ones.
    unresolved = everything.select("id", order_date().alias("published_at"), "lang", "url_hash", "content_hash",
                                   "simhash", *[f"band_{i}" for i in range(conf.simhash.bands)],
                                   *SIMHASH_COLUMNS)
    all_links, all_flags = [], []
    cascade = stages.build(conf)
    for stage in cascade:
        def step(stage=stage, unresolved=unresolved):
            result = stage.run(ctx, unresolved)
            links = result.links.cache()
            report.counts[f"links.{stage.name}"] = links.count()
            report.notes.extend(result.notes)
            report.counts.update(result.counts)
            frames = {"links": links}
            if result.flags is not None:   # persisted with the step so that --resume keeps them
                frames["flags"] = result.flags
            return frames

        out = steps.step(stage.name, report, step, lambda r, name=stage.name: (
            f"{r.counts[f'links.{name}']} links, {_left(r)} documents left")).frames
        all_links.append(out["links"])
        if "flags" in out:
            all_flags.append(out["flags"])
        # Survivors are derived, not stored: a step persists only its links (and flags), and the
        # next stage reads the unresolved columns minus those links (writing the survivors of every
        # stage cost more than the anti-joins that replace them).
        unresolved = survivors_after(unresolved, out["links"])

    links = all_links[0]
    for extra in all_links[1:]:
        links = links.unionByName(extra, allowMissingColumns=True)   # exact stages have no via_id
    report.counts["links.total"] = sum(report.counts[f"links.{s.name}"] for s in cascade)
    report.counts["unique_documents"] = (report.counts["documents"] + report.counts.get("existing_documents", 0)
                                         - report.counts["links.total"])
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
