"""Stage 4: semantic near-duplicates (same event, other outlet, possibly other language).

Survivors of stages 1-3 are embedded on the executors (mapInPandas, one model
per Python worker, GPU when Spark assigned one to the task), the vectors are
kept in the Delta table <output>/embeddings tagged with their model_version,
and candidates are searched only inside a time window: each document is
placed in a bucket of window_hours and compared, with one matrix product per
bucket, against its own bucket and the previous one, then filtered exactly on
|published_at difference| <= window_hours. Pairs at or above the cosine
threshold are clustered like stage 3, so the earliest document is canonical.
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

from .. import clustering
from ..clustering import order_key
from ..io import store
from . import StageResult
from . import embeddings as emb

if TYPE_CHECKING:
    from ..config import SemanticConfig

EMBEDDINGS_TABLE = "embeddings"
EMBEDDINGS_SCHEMA = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("model_version", T.StringType(), False),
    T.StructField("text_hash", T.StringType(), True),
    T.StructField("embedding", T.ArrayType(T.FloatType()), False),
    T.StructField("embedded_at", T.TimestampType(), False),
])
EDGE_SCHEMA = "a long, b long, score double"

def embeddings_path(output: str | None) -> str | None:
    return store.table_path(output, EMBEDDINGS_TABLE) if output else None


# ---------------------------------------------------------------- text and embedding

def _blank_to_null(c: Column) -> Column:
    stripped = F.regexp_replace(c, r"^\s+|\s+$", "")
    return F.when(stripped != "", stripped)


_JAVA_SPACE = " \t\n\x0b\f\r"   # what Java's \s (the regex in _blank_to_null) strips


def embedding_text(title: str | None, body: str | None, max_chars: int) -> str:
    """The text one article is embedded from, in plain Python: what with_text computes in Spark."""
    parts = [p.strip(_JAVA_SPACE) for p in (title, body) if p is not None]
    return "\n".join(p for p in parts if p)[: int(max_chars)]


def with_text(docs: DataFrame, max_chars: int) -> DataFrame:
    """Adds text (title, newline, body; trimmed, cut to max_chars; '' when both are blank) and text_hash."""
    text = F.substring(F.concat_ws("\n", _blank_to_null(F.col("title")), _blank_to_null(F.col("body"))),
                       1, int(max_chars))
    return docs.withColumn("text", text).withColumn("text_hash", F.sha2(F.col("text"), 256))


def _task_gpus() -> tuple[str, ...]:
    """GPU addresses Spark's resource scheduling gave the running task (empty without GPU scheduling)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    resources = ctx.resources() if ctx is not None else {}
    return tuple(resources["gpu"].addresses) if "gpu" in resources else ()


def embed(texts: DataFrame, sem: "SemanticConfig", version: str) -> DataFrame:
    """Embed texts (id, text, text_hash; no empty text) on the executors; EMBEDDINGS_SCHEMA rows."""
    batch_size = sem.batch_size

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        model = None  # loaded on the first non-empty batch: idle tasks load nothing
        for pdf in batches:
            if pdf.empty:
                continue
            model = model or emb.model_for(sem, _task_gpus())
            vecs = emb.encode(model, pdf["text"].tolist(), batch_size)
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


# ---------------------------------------------------------------- candidate search

def window_pairs(ids: np.ndarray, ts: np.ndarray, langs: np.ndarray, home: np.ndarray, vecs: np.ndarray,
                 window_s: float, same_thr: float, cross_thr: float, chunk: int = 512) -> list[tuple[int, int, float]]:
    """Pairs of one bucket group at or above threshold and at most window_s apart.

    The group holds the documents of bucket k (home) and of bucket k-1 (guests).
    A pair is scored here when at least one side is home (two guests meet in
    their own bucket); two home documents are taken once (i < j). Returns
    (a, b, cosine) with a earlier than b. vecs must be unit length.
    """
    n = len(ids)
    if n < 2:
        return []
    home_idx = np.flatnonzero(home)
    out: list[tuple[int, int, float]] = []
    for start in range(0, len(home_idx), int(chunk)):
        rows = home_idx[start:start + int(chunk)]
        sims = vecs[rows] @ vecs.T
        close = np.abs(ts[rows, None] - ts[None, :]) <= window_s
        thr = np.where(langs[rows, None] == langs[None, :], same_thr, cross_thr)
        once = ~home[None, :] | (rows[:, None] < np.arange(n)[None, :])
        hit_r, hit_c = np.nonzero(close & once & (sims >= thr))
        for hr, c in zip(hit_r, hit_c):
            r = rows[hr]
            i, j = (r, c) if (ts[r], ids[r]) <= (ts[c], ids[c]) else (c, r)
            out.append((int(ids[i]), int(ids[j]), float(min(1.0, sims[hr, c]))))
    return out


def _bucketed(meta: DataFrame, window_s: int) -> DataFrame:
    """Each document under its own bucket key (home) and the next one (guest)."""
    ts = F.col("published_at").cast("long")
    return (meta.withColumn("ts", ts).withColumn("bucket", F.floor(ts / F.lit(window_s)).cast("long"))
            .select("id", "ts", F.coalesce("lang", F.lit("")).alias("lang"), "embedding", "bucket",
                    F.posexplode(F.array(F.col("bucket"), F.col("bucket") + 1)).alias("guest", "key"))
            .select("id", "ts", "lang", "embedding", "key", (F.col("guest") == 0).alias("home")))


def semantic_edges(meta: DataFrame, sem: "SemanticConfig") -> tuple[DataFrame, list]:
    """Edges (a, b, score) among documents (id, published_at, lang, model_version, embedding).

    Refuses vectors of more than one model_version. Returns (edges, oversize
    buckets as rows of bucket, n): buckets over semantic.max_bucket are left out.
    """
    versions = [r[0] for r in meta.select("model_version").distinct().limit(5).collect()]
    if not versions:
        return meta.sparkSession.createDataFrame([], EDGE_SCHEMA), []
    emb.require_same_version(versions, "embeddings")
    window_s = int(float(sem.window_hours) * 3600)
    bucket = F.floor(F.col("published_at").cast("long") / F.lit(window_s)).cast("long")
    dated = meta.where(F.col("published_at").isNotNull()).withColumn("bucket", bucket)
    sizes = dated.groupBy("bucket").agg(F.count("*").alias("n"))
    # Few rows (one per skipped 48h bucket): kept on the driver.
    oversize = sizes.where(F.col("n") > int(sem.max_bucket)).collect()
    # Documents of an oversize bucket are left out everywhere, so no group exceeds 2 x max_bucket.
    kept = dated.where(~F.col("bucket").isin([r["bucket"] for r in oversize])).drop("bucket")
    grouped = _bucketed(kept, window_s)
    same_thr, cross_thr = sem.thresholds.same_language, sem.thresholds.cross_language
    chunk = int(sem.pair_chunk)

    def score(pdf: pd.DataFrame) -> pd.DataFrame:
        pairs = window_pairs(pdf["id"].to_numpy(), pdf["ts"].to_numpy(dtype=np.float64),
                             pdf["lang"].to_numpy(dtype=object), pdf["home"].to_numpy(dtype=bool),
                             np.stack(pdf["embedding"].to_numpy()).astype(np.float32),
                             window_s, same_thr, cross_thr, chunk)
        return pd.DataFrame(pairs, columns=["a", "b", "score"])

    edges = grouped.groupBy("key").applyInPandas(score, EDGE_SCHEMA)
    return edges, oversize


# ---------------------------------------------------------------- the stage

class SemanticStage:
    """Links (duplicate_id, canonical_id, stage='semantic', score) among the survivors of stages 1-3.

    With ctx.output None (dry run) vectors are computed but not stored; otherwise
    they are merged into <output>/embeddings and reused by later runs.
    """

    name = "semantic"

    def run(self, ctx, unresolved: DataFrame) -> StageResult:
        spark, report, sem = ctx.spark, ctx.report, ctx.conf.semantic
        version = emb.model_version(sem)
        candidates = with_text(unresolved.select("id").join(
            ctx.documents.select("id", "published_at", "lang", "title", "body"), "id"), sem.max_chars)
        candidates = clustering.cut_lineage(candidates.drop("title", "body"))
        texts = candidates.where((F.col("text") != "") & F.col("published_at").isNotNull())

        row = candidates.agg(
            F.sum((F.col("text") == "").cast("int")).alias("empty"),
            F.sum(((F.col("text") != "") & F.col("published_at").isNull()).cast("int")).alias("undated")).first()
        n_empty, n_undated = int(row["empty"] or 0), int(row["undated"] or 0)
        report.counts["semantic.no_text"] = n_empty
        report.counts["semantic.no_published_at"] = n_undated
        notes = []
        if n_empty:
            notes.append(f"semantic: {n_empty} document(s) without title or body text were not embedded")
        if n_undated:
            notes.append(f"semantic: {n_undated} document(s) without published_at have no time window; "
                         "stage 4 skipped them")

        vectors, n_embedded, n_reused = report.timed(
            "semantic.vectors", lambda: vectors_for(spark, texts, sem, version, embeddings_path(ctx.output)))
        report.counts["semantic.embedded"] = n_embedded
        report.counts["semantic.reused_vectors"] = n_reused
        meta = vectors.join(texts.select("id", "published_at", "lang"), "id")
        edges, oversize = report.timed("semantic.search", lambda: semantic_edges(meta, sem))
        edges = report.timed("semantic.search", lambda: clustering.cut_lineage(edges))
        if oversize:
            notes.append(f"semantic: {len(oversize)} time bucket(s) over semantic.max_bucket={sem.max_bucket} "
                         f"were skipped ({sum(r['n'] for r in oversize)} documents not compared)")
        report.counts["semantic.pairs"] = edges.count()
        vertices = texts.select("id", order_key().alias("key"))
        links = report.timed("semantic.cluster",
                             lambda: clustering.links_from_edges(edges, vertices, self.name, sem.max_iterations))
        return StageResult(links, clustering.survivors_after(unresolved, links), notes)


# ---------------------------------------------------------------- backfill

def backfill(spark: SparkSession, output: str, sem: "SemanticConfig", limit: int | None = None) -> dict[str, object]:
    """Embed up to `limit` documents of <output>/documents that lack a vector of this model_version.

    Like stage 4, it skips documents that stages 1-3 linked as duplicates (active
    links). Newest documents first (the serving window is the last 48 hours).
    Vectors of other versions stay as they are; running it again continues where it stopped.
    """
    version = emb.model_version(sem)
    limit = int(limit or sem.backfill_batch)
    if limit <= 0:
        raise ValueError(f"--limit {limit}: must be positive")
    path = embeddings_path(output)
    docs = with_text(store.read(spark, output, "documents").select("id", "published_at", "title", "body"),
                     sem.max_chars)
    texts = docs.where(F.col("text") != "")
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
