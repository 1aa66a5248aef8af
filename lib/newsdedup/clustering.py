"""Grouping documents into clusters, and the canonical rule, for every stage.

The canonical of a group is its earliest document: earliest published_at
(unknown dates last), then the lowest id. Because every survivor of a stage is
the earliest of what it absorbed, chaining stages keeps that rule across the
whole cluster.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

FAR_FUTURE = "9999-12-31 00:00:00"


def order_key(prefix: str = "") -> Column:
    """Canonical order: earliest published_at (unknown dates last), then lowest id."""
    ts = F.coalesce(F.col(f"{prefix}published_at"), F.lit(FAR_FUTURE).cast("timestamp"))
    return F.struct(ts.alias("ts"), F.col(f"{prefix}id").alias("id"))


def cut_lineage(df: DataFrame) -> DataFrame:
    """Materialise df: a reliable checkpoint when the job set a checkpoint dir, else a local one."""
    if df.sparkSession.sparkContext.getCheckpointDir():
        return df.checkpoint(eager=True)
    return df.localCheckpoint(eager=True)


def survivors_after(docs: DataFrame, links: DataFrame) -> DataFrame:
    """docs without the documents links suppressed."""
    return docs.join(links.select(F.col("duplicate_id").alias("id")), "id", "left_anti")


def exact_groups(docs: DataFrame, key: str, stage: str) -> tuple[DataFrame, DataFrame]:
    """Group by an exact key; every member but the earliest links to the earliest (score 1).

    Returns (links, survivors); documents with a null key are survivors.
    """
    keyed = docs.where(F.col(key).isNotNull())
    w = Window.partitionBy(key).orderBy(F.col("_ok").asc())
    ranked = keyed.withColumn("_ok", order_key()).withColumn("_canon", F.first("id").over(w))
    links = (ranked.where(F.col("_canon") != F.col("id"))
             .select(F.col("id").alias("duplicate_id"), F.col("_canon").alias("canonical_id"),
                     F.lit(stage).alias("stage"), F.lit(1.0).alias("score")))
    return links, survivors_after(docs, links)


def connected_labels(edges: DataFrame, vertices: DataFrame, max_iterations: int) -> DataFrame:
    """Smallest order key in each connected component, by iterative min-label propagation.

    vertices: id, key (struct). edges: a, b. Returns id, label (struct) for every
    vertex touched by an edge. Lineage is cut with checkpoints every round.
    """
    und = edges.select("a", "b").unionByName(edges.select(F.col("b").alias("a"), F.col("a").alias("b")))
    labels = (und.select(F.col("a").alias("id")).distinct()
              .join(vertices, "id").select("id", F.col("key").alias("label")))
    labels = cut_lineage(labels)
    for _ in range(max_iterations):
        proposals = (und.join(labels.withColumnRenamed("id", "a"), "a")
                     .select(F.col("b").alias("id"), "label"))
        new = cut_lineage(labels.unionByName(proposals).groupBy("id").agg(F.min("label").alias("label")))
        changed = (new.alias("n").join(labels.alias("o"), "id")
                   .where(F.col("n.label") != F.col("o.label")).limit(1).count())
        labels = new
        if changed == 0:
            return labels
    raise RuntimeError(f"clustering did not converge in {max_iterations} rounds; raise max_iterations")


def local_labels(edges: DataFrame, vertices: DataFrame) -> DataFrame:
    """connected_labels computed on the driver: for an edge set that fits in memory.

    The distributed version runs several Spark jobs per round (join, aggregate,
    checkpoint, compare); near-duplicate edges are few (about one per duplicate),
    so collecting them and labelling with vectorised min-label propagation plus
    pointer jumping costs one collect. Same result: per component, the smallest key.
    """
    import numpy as np
    import pyarrow as pa

    spark = edges.sparkSession
    pairs = edges.select("a", "b").toArrow()
    a, b = pairs.column("a").to_numpy(), pairs.column("b").to_numpy()
    ids = np.unique(np.concatenate([a, b]))
    touched = spark.createDataFrame(pa.table({"id": ids}))
    key_type = vertices.schema["key"].dataType
    fields = [f.name for f in key_type.fields]
    keys = (vertices.join(F.broadcast(touched) if len(ids) < 1_000_000 else touched, "id")
            .select("id", *[F.col(f"key.{f}").alias(f"k_{f}") for f in fields]).toArrow())
    order = keys.sort_by([(f"k_{f}", "ascending") for f in fields])       # rank 0 = smallest key
    ranked_ids = order.column("id").to_numpy()
    rank_of = np.empty(len(ids), dtype=np.int64)
    rank_of[np.searchsorted(ids, ranked_ids)] = np.arange(len(ranked_ids))
    ia, ib = rank_of[np.searchsorted(ids, a)], rank_of[np.searchsorted(ids, b)]
    label = np.arange(len(ids), dtype=np.int64)      # indexed by rank
    while True:
        low = np.minimum(label[ia], label[ib])
        new = label.copy()
        np.minimum.at(new, ia, low)
        np.minimum.at(new, ib, low)
        new = new[new]                                # pointer jumping
        if np.array_equal(new, label):
            break
        label = new
    out = pa.table({"id": ranked_ids, **{f"k_{f}": order.column(f"k_{f}").take(pa.array(label)) for f in fields}})
    return (spark.createDataFrame(out)
            .select("id", F.struct(*[F.col(f"k_{f}").alias(f) for f in fields]).alias("label")))


def links_from_edges(edges: DataFrame, vertices: DataFrame, stage: str, max_iterations: int,
                     local_max_edges: int = 0) -> DataFrame:
    """Cluster scored edges (a, b, score); every member links to its cluster's canonical.

    vertices: id, key (order_key struct). A member's link carries the best score
    of the edges that put it into the cluster. Up to local_max_edges edges are
    clustered on the driver (`local_labels`), more with Spark (`connected_labels`).
    """
    if local_max_edges > 0 and edges.count() <= local_max_edges:
        labels = local_labels(edges, vertices)
    else:
        labels = connected_labels(edges, vertices, max_iterations)
    best = (edges.select(F.col("a").alias("id"), "score")
            .unionByName(edges.select(F.col("b").alias("id"), "score"))
            .groupBy("id").agg(F.max("score").alias("score")))
    return (labels.join(best, "id").where(F.col("label.id") != F.col("id"))
            .select(F.col("id").alias("duplicate_id"), F.col("label.id").alias("canonical_id"),
                    F.lit(stage).alias("stage"), F.col("score").cast("double").alias("score")))


# ---------------------------------------------------------------- non-transitive grouping (stage 4)

def earliest_canonicals(edges: list[tuple[int, int, float]], order: dict[int, tuple]) -> list[tuple[int, int, float]]:
    """(duplicate, canonical, score): each document links to the earliest document it is directly
    similar to that is not itself a duplicate; the others stay canonical.

    Greedy in canonical order, so a week-long story does not chain day 7 to day 1
    through the days between: a link needs a direct edge, and its score is that
    edge's, the similarity to the canonical. order: id -> order key (earlier is smaller).
    """
    earlier: dict[int, list[tuple[tuple, int, float]]] = {}
    for a, b, s in edges:
        a, b = (a, b) if order[a] <= order[b] else (b, a)
        earlier.setdefault(b, []).append((order[a], a, s))
    links: list[tuple[int, int, float]] = []
    duplicate: set[int] = set()
    for doc in sorted(earlier, key=order.__getitem__):
        for _, cand, score in sorted(earlier[doc]):
            if cand not in duplicate:
                links.append((doc, cand, score))
                duplicate.add(doc)
                break
    return links


def earliest_canonical_links(edges: DataFrame, vertices: DataFrame, stage: str, max_iterations: int) -> DataFrame:
    """earliest_canonicals over scored edges (a, b, score), one connected group per task.

    vertices: id, key (order_key struct). Groups only bound each task's work;
    links never follow paths through them.
    """
    import pandas as pd

    labels = connected_labels(edges, vertices, max_iterations)
    keyed = vertices.select("id", F.col("key.ts").cast("long").alias("ts"))
    tagged = (edges.join(labels.select(F.col("id").alias("a"), F.col("label.id").alias("group")), "a")
              .join(keyed.select(F.col("id").alias("a"), F.col("ts").alias("ts_a")), "a")
              .join(keyed.select(F.col("id").alias("b"), F.col("ts").alias("ts_b")), "b"))

    def group_links(pdf: pd.DataFrame) -> pd.DataFrame:
        order = {int(i): (int(t), int(i)) for i, t in zip(pdf["a"], pdf["ts_a"])}
        order.update({int(i): (int(t), int(i)) for i, t in zip(pdf["b"], pdf["ts_b"])})
        out = earliest_canonicals(list(zip(pdf["a"].astype(int), pdf["b"].astype(int), pdf["score"])), order)
        return pd.DataFrame(out, columns=["duplicate_id", "canonical_id", "score"])

    links = tagged.groupBy("group").applyInPandas(group_links, "duplicate_id long, canonical_id long, score double")
    return links.select("duplicate_id", "canonical_id", F.lit(stage).alias("stage"), "score")
