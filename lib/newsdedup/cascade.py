"""The cascade: prepare every document once, then run the configured stages in order.

Each stage sees only the documents the earlier ones could not resolve. The
cascade itself writes no Delta table of the job's results (that is `job.run`),
but stage 4, given an output, merges the vectors it computed into
<output>/embeddings so that later runs reuse them.

Every step (prepare, then each stage) goes through `steps.step`, which, for a
run with an output, persists the step's frames and report under
<output>/_runs/<run_id> and skips steps an earlier attempt of the same run
finished (runstate.py). Each stage names the columns it reads (`columns`), so
the cascade carries those and no others from stage to stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from . import incremental, prepare, runstate, stages
from .clustering import cut_lineage, survivors_after
from .io import store
from .io.input import TEXT_COLUMNS, conform, order_date, plausible_range, split_invalid
from .report import RunReport, StepReport

if TYPE_CHECKING:
    from .config import Config


@dataclass
class CascadeResult:
    documents: DataFrame
    links: DataFrame
    quarantine: DataFrame
    # The ids whose links the run computed (incremental.closure); None: the whole archive.
    scope: DataFrame | None = None
    # The archive's rows of scope, as the stages saw them (before this run's write); None when scope is None.
    scope_rows: DataFrame | None = None
    # The components rows of the documents the run computed links for (None: a dry run).
    components: DataFrame | None = None
    # No document's id is in the documents table yet (incremental.Archive.all_new): appended, not merged.
    documents_new: bool = False
    # prepare's verification features (id plus prepare.VERIFY_COLUMNS) of the accepted documents that
    # have them; the Postgres load takes them instead of deriving them from the text again. None: a
    # prepare step written before they were carried.
    features: DataFrame | None = None


# Why a prepared document (one that has an id, url, source and date) is quarantined after all.
ID_COLLISION = ("id_collision: this id is already stored with another canonical URL "
                "(input.id_collision: quarantine)")


def _quarantine(invalid: DataFrame, failed: DataFrame) -> DataFrame:
    """Rows that are not documents, with their reason and the whole record as JSON."""
    return (invalid.select(
        F.col("raw_id"), F.col("quarantine_reason").alias("reason"),
        F.to_json(F.struct(
            F.col("raw_id").alias("id"), F.col("raw_published_at").alias("published_at"),
            *[F.col(c).cast("string").alias(c) for c in TEXT_COLUMNS])).alias("record"))
        .unionByName(_refused(failed, F.col("prepare_error"))))


def _refused(docs: DataFrame, reason: Column) -> DataFrame:
    """Quarantine rows for prepared documents: their id, the reason, and who they are as JSON."""
    return docs.select(F.col("id").cast("string").alias("raw_id"), reason.alias("reason"),
                       F.to_json(F.struct("id", "url", "source", "published_at")).alias("record"))


def _count_prepared(prepared: DataFrame, invalid: DataFrame) -> dict[str, int]:
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
    counts = {"input_rows": summary["documents"] + summary["failed"] + n_invalid,
              "quarantined": summary["failed"] + n_invalid}
    for key in ("documents", "url_unparseable", "no_content_hash", "no_simhash", "bad_published_at", "text_from_html"):
        counts[key] = summary[key]
    return counts


def run_cascade(spark: SparkSession, raw: DataFrame, conf: "Config", report: RunReport,
                output: str | None = None, steps: "runstate.Persisted | runstate.InMemory | None" = None,
                stored_features: "incremental.StoredFeatures | None" = None) -> CascadeResult:
    """Prepare and deduplicate raw (the job's input schema), one step at a time.

    Every step's report is added to `report` as the step finishes (or is reused on --resume).
    output: where stage 4 keeps its vectors (None: they stay in memory).
    steps: runstate.Persisted to keep each step's frames for --resume; default in memory (cached).
    stored_features: where an incremental run's closure may read stored documents' verification
    features instead of their text (Postgres, pg_documents.verification_features); None: the text.
    """
    steps = steps or runstate.InMemory()

    def prepare_step() -> runstate.StepOutput:
        valid, invalid = split_invalid(conform(raw, conf.input.naive_timezone, plausible_range(conf.input)))
        # Not cached: the keys are computed once, by the step's write, and counted from what was
        # written (caching every document's text before the write cost more than the write itself).
        return runstate.StepOutput({"prepared": prepare.fingerprint(valid, conf), "invalid": invalid})

    prepared = steps.step("prepare", prepare_step, lambda r: (
        f"{r.counts['input_rows']} input rows, {r.counts['documents']} documents, "
        f"{r.counts['quarantined']} quarantined"),
        measure=lambda written: _count_prepared(written["prepared"], written["invalid"]))
    report.add(prepared.report)
    frames = prepared.frames
    prepared_ok = frames["prepared"].where(F.col("prepare_error").isNull())
    new_docs = prepared_ok.drop("prepare_error", *prepare.VERIFY_COLUMNS)
    # Stage 3 verifies on these instead of deriving them again from the text (a frame written
    # before they were carried lacks them: stage 3 then derives them all, as it used to).
    verify = (prepared_ok.where(F.col("shingles").isNotNull()).select("id", *prepare.VERIFY_COLUMNS)
              if set(prepare.VERIFY_COLUMNS) <= set(frames["prepared"].columns) else None)
    quarantine = _quarantine(frames["invalid"], frames["prepared"].where(F.col("prepare_error").isNotNull()))

    # The stages deduplicate the archive: this slice plus, when the output already holds
    # documents, the stored ones the slice does not replace (incremental.py).
    archive = incremental.with_stored(spark, new_docs, output, conf.input.id_collision, report.run_id)
    report.counts.update(archive.counts)
    if archive.collisions is not None:   # refused documents are quarantined, so every input row stays counted
        quarantine = quarantine.unionByName(_refused(archive.collisions, F.lit(ID_COLLISION)))
        report.counts["documents"] -= archive.counts["id_collisions"]
        report.counts["quarantined"] += archive.counts["id_collisions"]
    new_docs = archive.accepted
    if verify is not None and archive.stored:
        # Only the accepted documents' own features: a refused newcomer's id names a stored document.
        verify = verify.join(new_docs.select("id"), "id", "left_semi")
    n_archive = report.counts["documents"] + archive.counts.get("existing_documents", 0)
    # The documents the stages see: on an incremental run only those the slice can change.
    docs, scope, n_docs = archive.documents, None, n_archive
    if archive.stored and conf.input.incremental == "slice":
        out = steps.step("closure", lambda: _closure_step(spark, archive, conf, output, verify, stored_features),
                         lambda r: (
            f"{r.counts['incremental.affected_documents']} of {n_archive} documents affected "
            f"in {r.counts['incremental.rounds']} rounds"),
            measure=lambda frames: {"incremental.affected_documents": frames["affected"].count()})
        report.add(out.report)
        docs, scope = out.frames["archive"], out.frames["affected"]
        n_docs = out.report.counts["incremental.affected_documents"]
    elif archive.stored:   # input.incremental: archive, the whole archive again
        docs = cut_lineage(docs)   # the job later rewrites the documents table these rows come from
    ctx = stages.StageContext(spark=spark, conf=conf, run_id=report.run_id, archive=docs, output=output,
                              verify=verify, verify_complete=verify is not None and not archive.stored)
    cascade = stages.build(conf)
    # Implausible dates are kept on the documents but order last, like unknown ones.
    unresolved = docs.select("id", order_date().alias("published_at"), "lang",
                             *dict.fromkeys(c for stage in cascade for c in stage.columns))
    linked: dict[str, int] = {}          # links per stage, in cascade order
    all_links, all_flags = [], []
    for stage in cascade:
        def step(stage=stage, unresolved=unresolved) -> runstate.StepOutput:
            result = stage.run(ctx, unresolved)
            frames = {"links": result.links}
            if result.flags is not None:   # persisted with the step so that --resume keeps them
                frames["flags"] = result.flags
            return runstate.StepOutput(frames, StepReport(result.counts, result.seconds, result.notes))

        key = f"links.{stage.name}"
        left_before = n_docs - sum(linked.values())
        out = steps.step(stage.name, step, lambda r, key=key, left=left_before: (
            f"{r.counts[key]} links, {left - r.counts[key]} documents left"),
            measure=lambda frames, key=key: {key: frames["links"].count()})
        report.add(out.report)
        linked[stage.name] = out.report.counts[key]
        all_links.append(out.frames["links"])
        if "flags" in out.frames:
            all_flags.append(out.frames["flags"])
        # Survivors are derived, not stored: a step persists only its links (and flags), and the
        # next stage reads the unresolved columns minus those links (writing the survivors of every
        # stage cost more than the anti-joins that replace them).
        unresolved = survivors_after(unresolved, out.frames["links"])

    links = all_links[0]
    for extra in all_links[1:]:
        links = links.unionByName(extra, allowMissingColumns=True)   # exact stages have no via_id
    # links.<stage> count what this run computed (over the affected documents on an incremental
    # run); links.total and unique_documents are the whole archive's: the active links outside the
    # scope stay as they are.
    kept = 0 if scope is None else incremental.active_outside(
        spark, store.table_path(output, "duplicate_links"), scope, n_docs)
    report.counts["links.total"] = kept + sum(linked.values())
    report.counts["unique_documents"] = n_archive - report.counts["links.total"]
    components = None
    if output is not None:   # what the next slice's closure expands by (incremental.component_rows)
        out = steps.step("components", lambda: runstate.StepOutput({"components": incremental.component_rows(
            spark, docs if scope is None else scope, links, docs.select("id", "lang"))}),
            lambda r: f"{r.counts['incremental.components_written']} documents labelled",
            measure=lambda frames: {"incremental.components_written": frames["components"].count()})
        report.add(out.report)
        components = out.frames["components"]
    return CascadeResult(documents=_with_flags(new_docs, all_flags), links=links, quarantine=quarantine,
                         scope=scope, scope_rows=None if scope is None else docs, components=components,
                         documents_new=archive.all_new, features=verify)


def _closure_step(spark: SparkSession, archive: "incremental.Archive", conf: "Config",
                  output: str, carried: DataFrame | None,
                  stored_features: "incremental.StoredFeatures | None" = None) -> runstate.StepOutput:
    """The documents the slice can change (incremental.closure) and their archive rows."""
    links_path = store.table_path(output, "duplicate_links")
    links = None
    if store.exists(spark, links_path):
        links = store.active_links(spark, output).select("duplicate_id", "canonical_id")
    near = None
    if conf.semantic.enabled:
        from .stages.semantic.step import near_ids   # torch & co. load only when stage 4 is on

        dates = archive.documents.select("id", order_date().alias("published_at"))

        def near(frontier: DataFrame) -> DataFrame:
            rows = frontier.select("id", order_date().alias("published_at"), "lang", "title", "body")
            return near_ids(spark, conf, rows, dates, output)
    components, why = _stored_components(spark, archive, conf, output)
    stats: dict[str, int] = {}
    affected, sizes, passes = incremental.closure(archive.documents, archive.accepted, conf, links,
                                                  near, components, carried, stored_features, stats)
    counts = {"incremental.rounds": len(sizes) - 1, "incremental.slice_documents": sizes[0], **stats,
              "incremental.keys_passes": passes, "incremental.by_components": int(components is not None),
              **{f"incremental.round_{i}": n for i, n in enumerate(sizes[1:], start=1)}}
    notes = [f"closure by rounds: {why}"] if why else []
    by_date = incremental.read_by_date(archive.documents, archive.accepted, sum(sizes))
    rows = incremental.restrict(archive.documents, affected, sum(sizes), by_date)
    counts["incremental.read_by_date"] = int(by_date)
    return runstate.StepOutput({"affected": affected, "archive": rows}, StepReport(counts=counts, notes=notes))


def _stored_components(spark: SparkSession, archive: "incremental.Archive", conf: "Config",
                       output: str) -> tuple["incremental.Components | None", str | None]:
    """The stored components the closure may expand by, or None and why it takes rounds instead
    (None, None: rounds were asked for)."""
    if conf.input.closure != "components":
        return None, None
    replaced = archive.counts.get("recrawled", 0) + (
        archive.counts.get("id_collisions", 0) if conf.input.id_collision == "replace" else 0)
    if replaced:   # a replaced document's URL group may pick another first: components do not cover that
        return None, f"the slice replaces {replaced} stored documents"
    components = incremental.read_components(spark, output)
    if components is None:
        return None, "no components stored (an output written before them; an archive run stores them all)"
    if not components.covers(archive.kept_ids):
        return None, ("stored documents without a component (written by a run that did not store them; "
                      "an archive run stores them all)")
    return components, None


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
