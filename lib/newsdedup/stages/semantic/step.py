"""Stage 4: semantic near-duplicates (same event, other outlet, possibly other language).

Survivors of stages 1-3 are embedded on the executors (mapInPandas, one model
per Python worker, GPU when Spark assigned one to the task), the vectors are
kept in the Delta table <output>/embeddings tagged with their model_version,
and candidates are searched only inside a time window (search.py: exact
cosine block against block, or an index per large bucket whose proposals are scored exactly). Only documents in a language the model covers
are embedded. Each document links to the earliest document it is directly
similar to that is not itself a duplicate (clustering.earliest_canonicals),
so links never chain through intermediate days.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Iterator

import numpy as np
import pandas as pd
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ... import clustering
from ...clustering import order_key
from ...io import store
from ...report import StepReport
from ..base import StageResult
from . import embeddings as emb
from . import evidence
from . import search
from .live import SemanticLookup

if TYPE_CHECKING:
    from ...config import EvidenceConfig, SemanticConfig, SemanticThresholds

EMBEDDINGS_TABLE = "embeddings"
EMBEDDINGS_SCHEMA = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("model_version", T.StringType(), False),
    T.StructField("text_hash", T.StringType(), True),
    T.StructField("embedding", T.ArrayType(T.FloatType()), False),
    T.StructField("embedded_at", T.TimestampType(), False),
])

def embeddings_path(output: str | None) -> str | None:
    return store.table_path(output, EMBEDDINGS_TABLE) if output else None


# Pairs whose cosine passed and whose evidence did not: what a data scientist reads to
# see what stage 4 kept apart, and why (`newsdedup stats` counts them by reason).
REFUSALS_TABLE = "semantic_refusals"
REFUSALS_SCHEMA = T.StructType([
    T.StructField("a", T.LongType(), False),
    T.StructField("b", T.LongType(), False),
    T.StructField("score", T.DoubleType(), False),
    T.StructField("lang_pair", T.StringType(), True),
    T.StructField("reason", T.StringType(), False),
    T.StructField("run_id", T.StringType(), False),
    T.StructField("refused_at", T.TimestampType(), False),
])


def write_refusals(spark: SparkSession, output: str, refused: DataFrame, run_id: str) -> None:
    """This run's refused pairs; a rerun of the step replaces them (replaceWhere on run_id)."""
    rows = refused.select("a", "b", "score", "lang_pair", "reason", F.lit(run_id).alias("run_id"),
                          F.current_timestamp().alias("refused_at"))
    rows = rows.select(*[F.col(f.name).cast(f.dataType) for f in REFUSALS_SCHEMA.fields])
    path = store.table_path(output, REFUSALS_TABLE)
    if not store.exists(spark, path):
        spark.createDataFrame([], REFUSALS_SCHEMA).write.format("delta").save(path)
    (rows.write.format("delta").mode("overwrite").option("replaceWhere", f"run_id = '{run_id}'").save(path))


# ---------------------------------------------------------------- text and embedding

def _blank_to_null(c: Column) -> Column:
    # emb.document_text is the same rule in plain Python (Java's \s: emb.JAVA_SPACE).
    stripped = F.regexp_replace(c, r"^\s+|\s+$", "")
    return F.when(stripped != "", stripped)


def with_text(docs: DataFrame, max_chars: int) -> DataFrame:
    """Adds text (title, newline, body; trimmed, cut to max_chars) and text_hash: emb.document_text in Spark.

    text is '' when the body is blank: like stages 2-3, a page without body (two
    "Live updates" shells) must not collapse into one on its title alone.
    """
    body = _blank_to_null(F.col("body"))
    text = F.when(body.isNotNull(), F.substring(F.concat_ws("\n", _blank_to_null(F.col("title")), body),
                                                1, int(max_chars))).otherwise(F.lit(""))
    return docs.withColumn("text", text).withColumn("text_hash", F.sha2(F.col("text"), 256))


FACTS_TYPE = "struct<numbers:array<string>,scores:array<string>,days:array<string>,names:array<string>>"


def with_facts(docs: DataFrame, rules: "EvidenceConfig") -> DataFrame:
    """Adds facts (semantic_evidence.Facts as a struct) from text and published_at."""
    tz, lead = rules.timezone, rules.lead_chars

    @F.pandas_udf(FACTS_TYPE)
    def facts(text: pd.Series, published: pd.Series) -> pd.DataFrame:
        rows = [evidence.facts_of(t, None if pd.isna(p) else p.to_pydatetime(), tz, lead).as_row()
                for t, p in zip(text, published)]
        return pd.DataFrame(rows, columns=["numbers", "scores", "days", "names"])

    return docs.withColumn("facts", facts(F.col("text"), F.col("published_at")))


def _task_gpus() -> tuple[str, ...]:
    """GPU addresses Spark's resource scheduling gave the running task (empty without GPU scheduling)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    resources = ctx.resources() if ctx is not None else {}
    return tuple(resources["gpu"].addresses) if "gpu" in resources else ()


def _task_cpus() -> int:
    """spark.task.cpus of the running task (1 outside a task): the threads one task may use."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return max(1, int(ctx.cpus())) if ctx is not None else 1


def embed(texts: DataFrame, sem: "SemanticConfig", version: str) -> DataFrame:
    """Embed texts (id, text, text_hash; no empty text) on the executors; EMBEDDINGS_SCHEMA rows.

    sem should be resolved (emb.resolve): its backend is then fixed, and every
    executor writes vectors of `version`. One model per Python worker (a
    per-process cache); on CPU it uses semantic.cpu_threads threads, else
    spark.task.cpus (one thread per task slot by default).
    """
    batch_size, batch_tokens = sem.batch_size, sem.batch_tokens

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        model = None  # loaded on the first non-empty batch: idle tasks load nothing
        for pdf in batches:
            if pdf.empty:
                continue
            model = model or emb.model_for(sem, _task_gpus(), cpu_threads=_task_cpus())
            vecs = emb.encode(model, pdf["text"].tolist(), batch_size, batch_tokens)
            yield pd.DataFrame({"id": pdf["id"], "text_hash": pdf["text_hash"], "embedding": list(vecs)})

    src = texts.select("id", "text", "text_hash")
    if sem.embed_partitions:
        src = src.repartition(int(sem.embed_partitions))
    out = src.mapInPandas(run, "id long, text_hash string, embedding array<float>")
    now = datetime.now(timezone.utc)
    return out.select("id", F.lit(version).alias("model_version"), "text_hash", "embedding",
                      F.lit(now).cast("timestamp").alias("embedded_at"))


def merge_embeddings(spark: SparkSession, fresh: DataFrame, path: str) -> None:
    """Upsert by (id, model_version): vectors of other versions are never touched."""
    fresh = fresh.select(*[F.col(f.name).cast(f.dataType) for f in EMBEDDINGS_SCHEMA.fields])
    if not store.exists(spark, path):
        spark.createDataFrame([], EMBEDDINGS_SCHEMA).write.format("delta").save(path)
    (DeltaTable.forPath(spark, path).alias("t")
     .merge(fresh.alias("s"), "t.id = s.id AND t.model_version = s.model_version")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())


def stored_vectors(spark: SparkSession, path: str | None, version: str) -> DataFrame | None:
    if path is None or not store.exists(spark, path):
        return None
    return spark.read.format("delta").load(path).where(F.col("model_version") == version)


def vectors_for(spark: SparkSession, texts: DataFrame, sem: "SemanticConfig", version: str,
                path: str | None) -> tuple[DataFrame, int, int]:
    """Vectors of this version for every text: stored ones whose text is unchanged, the rest embedded now.

    Returns (id, model_version, embedding), embedded count, reused count. With a
    path the new vectors are merged into the Delta table.
    """
    cols = ["id", "model_version", "embedding"]
    stored = stored_vectors(spark, path, version)
    if stored is None:
        reused, todo = None, texts
    else:
        # Materialised before the merge below changes the table under it.
        reused = clustering.cut_lineage(stored.join(texts.select("id", "text_hash"), ["id", "text_hash"], "left_semi")
                                     .select(*cols))
        todo = texts.join(reused.select("id"), "id", "left_anti")
    fresh = clustering.cut_lineage(embed(todo, sem, version))  # inference runs exactly once
    n_fresh = fresh.count()
    if path is not None and n_fresh:
        merge_embeddings(spark, fresh, path)
    if reused is None:
        return fresh.select(*cols), n_fresh, 0
    return reused.unionByName(fresh.select(*cols)), n_fresh, reused.count()


# ---------------------------------------------------------------- neighbours of a slice (incremental.py)

NEAR_SCHEMA = "id long"


def lowest_threshold(thr: "SemanticThresholds") -> float:
    """The lowest cosine any language pair must reach: a pair below it links in no language."""
    return min(v for v in (thr.same_language, thr.cross_language, *thr.pairs.values()) if v is not None)


def near_rows(front: pd.DataFrame, other: pd.DataFrame, window_s: float, low: float,
              chunk: int = 512) -> np.ndarray:
    """Ids of `other` (id, ts, embedding) within window_s of some row of `front` (same columns) with a
    cosine >= low. Vectors are normalised here too; low should sit a little under the threshold so that
    float rounding (another block layout than search.block_pairs) can only add rows."""
    if front.empty or other.empty:
        return np.empty(0, np.int64)
    fv = _unit(np.stack(front["embedding"].to_numpy()).astype(np.float32))
    ov = _unit(np.stack(other["embedding"].to_numpy()).astype(np.float32))
    ft, ot = front["ts"].to_numpy(np.float64), other["ts"].to_numpy(np.float64)
    hit = np.zeros(len(other), bool)
    for start in range(0, len(other), int(chunk)):
        cols = slice(start, start + int(chunk))
        ok = (fv @ ov[cols].T >= low) & (np.abs(ft[:, None] - ot[None, cols]) <= window_s)
        hit[cols] = ok.any(axis=0)
    return other["id"].to_numpy(np.int64)[hit]


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def near_ids(spark: SparkSession, conf, frontier: DataFrame, dates: DataFrame, output: str | None) -> DataFrame:
    """Ids of documents that stage 4 could pair with a frontier document: a superset.

    frontier: id, published_at (the order date), lang, title, body. dates: id, published_at of the
    archive. A document qualifies when it has a vector of the configured model_version within
    semantic.window_hours of a frontier vector and a cosine >= the lowest threshold of any language
    pair (the evidence is not checked: it only removes pairs). Frontier documents stage 4 would
    embed get their vector now (merged into <output>/embeddings, where stage 4 then finds it);
    documents outside every slice's closure keep the vector an earlier run gave them
    (incremental.py says why that is enough).
    """
    model = emb.resolve(conf.semantic)
    sem, version = model.sem, model.version
    texts = with_text(frontier, sem.max_chars)
    texts = texts.where((F.col("text") != "") & F.col("published_at").isNotNull()
                        & F.coalesce(F.col("lang").isin(list(model.spec.languages)), F.lit(False)))
    path = embeddings_path(output)
    vectors, _, _ = vectors_for(spark, texts.select("id", "text", "text_hash"), sem, version, path)
    stored = stored_vectors(spark, path, version)
    if stored is None:
        return spark.createDataFrame([], NEAR_SCHEMA)
    window_s = float(sem.window_hours) * 3600
    low = lowest_threshold(model.pair_thresholds()) - 1e-5
    ts = F.col("published_at").cast("double")
    bucket = F.floor(ts / F.lit(window_s)).cast("long")
    front = (vectors.join(texts.select("id", "published_at"), "id")
             .select("id", ts.alias("ts"), "embedding", bucket.alias("home")))
    # A pair within the window lies in the same or in adjacent buckets: the frontier visits three.
    front = front.select("id", "ts", "embedding",
                         F.explode(F.array(*[F.col("home") + d for d in (-1, 0, 1)])).alias("bucket"))
    front = clustering.cut_lineage(front)
    other = (stored.select("id", "embedding").join(dates.where(F.col("published_at").isNotNull())
                                                    .select("id", ts.alias("ts"), bucket.alias("bucket")), "id")
             .join(front.select("bucket").distinct(), "bucket", "left_semi"))

    def near(f: pd.DataFrame, o: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({"id": near_rows(f, o, window_s, low)})

    return (front.groupBy("bucket").cogroup(other.groupBy("bucket"))
            .applyInPandas(near, NEAR_SCHEMA).distinct())


# ---------------------------------------------------------------- the stage

class SemanticStage:
    """Links (duplicate_id, canonical_id, stage='semantic', score) among the survivors of stages 1-3.

    With ctx.output None (dry run) vectors are computed but not stored; otherwise
    they are merged into <output>/embeddings and reused by later runs.
    """

    name = "semantic"
    columns: tuple[str, ...] = ()     # the text comes from ctx.archive

    def lookup(self, conf) -> "SemanticLookup":
        return SemanticLookup(conf)

    def run(self, ctx, unresolved: DataFrame) -> StageResult:
        spark, report = ctx.spark, StepReport()
        model = emb.resolve(ctx.conf.semantic)   # before any work: an uncalibrated version is refused
        sem, version, spec = model.sem, model.version, model.spec
        notes = [model.describe()]
        # published_at from unresolved: the cascade's order date (null when implausible: no time window).
        candidates = with_text(unresolved.select("id", "published_at").join(
            ctx.archive.select("id", "lang", "title", "body"), "id"), sem.max_chars)
        candidates = clustering.cut_lineage(candidates.drop("title", "body"))
        has_text, dated = F.col("text") != "", F.col("published_at").isNotNull()
        covered = F.coalesce(F.col("lang").isin(list(spec.languages)), F.lit(False))
        texts = candidates.where(has_text & dated & covered)

        row = candidates.agg(
            F.sum((~has_text).cast("int")).alias("empty"),
            F.sum((has_text & ~dated).cast("int")).alias("undated"),
            F.sum((has_text & dated & ~covered).cast("int")).alias("uncovered")).first()
        n_empty, n_undated, n_uncovered = (int(row[k] or 0) for k in ("empty", "undated", "uncovered"))
        report.counts["semantic.no_text"] = n_empty
        report.counts["semantic.no_published_at"] = n_undated
        report.counts["semantic.language_not_covered"] = n_uncovered
        if n_empty:
            notes.append(f"semantic: {n_empty} document(s) without body text were not embedded")
        if n_undated:
            notes.append(f"semantic: {n_undated} document(s) without published_at have no time window; "
                         "stage 4 skipped them")
        if n_uncovered:
            langs = sorted(str(r[0]) for r in candidates.where(has_text & dated & ~covered)
                           .select("lang").distinct().limit(20).collect())
            notes.append(f"semantic: {n_uncovered} document(s) in languages {model.spec_key} does not cover "
                         f"({', '.join(langs)}) were not compared")

        vectors, n_embedded, n_reused = report.timed(
            "semantic.vectors", lambda: vectors_for(spark, texts, sem, version, embeddings_path(ctx.output)))
        report.counts["semantic.embedded"] = n_embedded
        report.counts["semantic.reused_vectors"] = n_reused
        meta = vectors.join(with_facts(texts.select("id", "published_at", "lang", "text"), sem.evidence)
                            .drop("text"), "id")
        found = report.timed("semantic.search", lambda: search.semantic_edges(meta, sem, model.pair_thresholds()))
        edges = report.timed("semantic.search", lambda: clustering.cut_lineage(found.edges))
        report.counts["semantic.search_tasks"] = found.tasks
        report.counts["semantic.search_indexed_buckets"] = found.indexed
        notes += found.notes
        tally = {(r["lang_pair"], r["reason"]): r["n"] for r in
                 edges.groupBy("lang_pair", "reason").agg(F.count("*").alias("n")).collect()}
        report.counts["semantic.pairs"] = sum(tally.values())
        # Every language pair the model compares is reported, zeros included: a report that lacks
        # semantic.pairs.en-bn says the pair was never compared, not that nothing was found.
        compared = {search.lang_pair(a, b) for a in spec.languages for b in spec.languages
                    if a == b or spec.cross_language}
        for lp in sorted(compared | {lp for lp, _ in tally}):
            report.counts[f"semantic.pairs.{lp}"] = sum(n for (p, _), n in tally.items() if p == lp)
        refused = dict.fromkeys(evidence.REASONS, 0)
        for (_, reason), n in tally.items():
            if reason is not None:
                refused[reason] += n
        for reason, n in refused.items():
            report.counts[f"semantic.refused.{reason}"] = n
        if ctx.output is not None and sum(refused.values()):
            report.timed("semantic.refusals", lambda: write_refusals(
                spark, ctx.output, edges.where(F.col("reason").isNotNull()), ctx.run_id))
        vertices = texts.select("id", order_key().alias("key"))
        links = report.timed("semantic.cluster", lambda: clustering.earliest_canonical_links(
            edges.where(F.col("reason").isNull()).select("a", "b", "score"), vertices, self.name,
            sem.max_iterations))
        return StageResult(links, notes + report.notes, report.counts, report.seconds)


# ---------------------------------------------------------------- backfill

def backfill(spark: SparkSession, output: str, sem: "SemanticConfig", limit: int | None = None) -> dict[str, object]:
    """Embed up to `limit` documents of <output>/documents that lack a vector of this model_version.

    Like stage 4, it skips documents that stages 1-3 linked as duplicates (active
    links) and documents in languages the model does not cover. Newest documents first (the serving window is the last 48 hours).
    Vectors of other versions stay as they are; running it again continues where it stopped.
    """
    resolved = emb.resolve(sem, with_thresholds=False)
    sem, version = resolved.sem, resolved.version
    limit = int(limit or sem.backfill_batch)
    if limit <= 0:
        raise ValueError(f"--limit {limit}: must be positive")
    path = embeddings_path(output)
    docs = with_text(store.read(spark, output, "documents").select("id", "published_at", "lang", "title", "body"),
                     sem.max_chars)
    # Documents in a language the model does not cover are never compared: no vector either.
    texts = docs.where((F.col("text") != "") & F.col("lang").isin(list(resolved.spec.languages)))
    if store.exists(spark, store.table_path(output, "duplicate_links")):
        cheap = (store.active_links(spark, output).where(F.col("stage") != "semantic")
                 .select(F.col("duplicate_id").alias("id")))
        texts = texts.join(cheap, "id", "left_anti")
    stored = stored_vectors(spark, path, version)
    todo = texts if stored is None else texts.join(stored.select("id", "text_hash"), ["id", "text_hash"], "left_anti")
    todo = clustering.cut_lineage(todo.select("id", "published_at", "text", "text_hash"))
    pending = todo.count()
    batch = todo.orderBy(F.col("published_at").desc_nulls_last(), "id").limit(limit)
    fresh = clustering.cut_lineage(embed(batch, sem, version))
    n = fresh.count()
    if n:
        merge_embeddings(spark, fresh, path)
    return {"model_version": version, "embedded": n, "remaining": pending - n,
            "no_text": docs.where(F.col("text") == "").count()}
