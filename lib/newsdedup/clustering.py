"""Grouping documents into clusters, and the canonical rule, for every stage.

The canonical of a group is its earliest document: earliest published_at
(unknown dates last), then the lowest id. Because every survivor of a stage is
the earliest of what it absorbed, chaining stages keeps that rule across the
whole cluster.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa
from numba import njit
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

FAR_FUTURE = "9999-12-31 00:00:00"


def order_key(prefix: str = "") -> Column:
    """Canonical order: earliest published_at (unknown dates last), then lowest id."""
    ts = F.coalesce(F.col(f"{prefix}published_at"), F.lit(FAR_FUTURE).cast("timestamp"))
    return F.struct(ts.alias("ts"), F.col(f"{prefix}id").alias("id"))


def order_micros(prefix: str = "") -> Column:
    """order_key's timestamp as microseconds (long): with the id, the same order in numpy."""
    return F.unix_micros(order_key(prefix).getField("ts"))


def cut_lineage(df: DataFrame) -> DataFrame:
    """Materialise df: a reliable checkpoint when the job set a checkpoint dir, else a local one."""
    if df.sparkSession.sparkContext.getCheckpointDir():
        return df.checkpoint(eager=True)
    return df.localCheckpoint(eager=True)


def survivors_after(docs: DataFrame, links: DataFrame) -> DataFrame:
    """docs without the documents links suppressed."""
    return docs.join(links.select(F.col("duplicate_id").alias("id")), "id", "left_anti")


def exact_groups(docs: DataFrame, key: str, stage: str) -> DataFrame:
    """Links of the groups of an exact key: every member but the earliest links to the earliest
    (score 1). Documents with a null key are in no group."""
    keyed = docs.where(F.col(key).isNotNull())
    w = Window.partitionBy(key).orderBy(F.col("_ok").asc())
    ranked = keyed.withColumn("_ok", order_key()).withColumn("_canon", F.first("id").over(w))
    links = (ranked.where(F.col("_canon") != F.col("id"))
             .select(F.col("id").alias("duplicate_id"), F.col("_canon").alias("canonical_id"),
                     F.lit(stage).alias("stage"), F.lit(1.0).alias("score")))
    return links


def connected_labels(edges: DataFrame, vertices: DataFrame, max_iterations: int) -> DataFrame:
    """Smallest order key in each connected component, by alternating large-star / small-star.

    Kiveris et al. 2014 ("Connected Components in MapReduce and Beyond"): every
    round shrinks each component towards a star around its minimum; the number
    of rounds grows with log(n), not with the diameter, so a 1,000-long chain
    converges in a handful of rounds. Vertices are their order keys (struct
    ts, id), so the minimum is the canonical.

    vertices: id, key (struct). edges: a, b. Returns id, label (struct) for every
    vertex touched by an edge. Lineage is cut every round; max_iterations bounds
    the rounds and is checked before the next one starts (no work is wasted on a
    graph that cannot converge in time).
    """
    keyed = _keyed_edges(edges, vertices)
    current = cut_lineage(keyed)
    for _ in range(max_iterations):
        nxt = cut_lineage(_small_star(_large_star(current)))
        if _same_edges(current, nxt):
            return _star_labels(nxt)
        current = nxt
    raise RuntimeError(f"clustering did not converge in {max_iterations} rounds; raise max_iterations")


def _keyed_edges(edges: DataFrame, vertices: DataFrame) -> DataFrame:
    """Edges as (u, v) order keys with u > v, self-loops and repeats removed."""
    ka = vertices.select(F.col("id").alias("a"), F.col("key").alias("ka"))
    kb = vertices.select(F.col("id").alias("b"), F.col("key").alias("kb"))
    pairs = edges.select("a", "b").join(ka, "a").join(kb, "b")
    return (pairs.where(F.col("ka") != F.col("kb"))
            .select(F.greatest("ka", "kb").alias("u"), F.least("ka", "kb").alias("v")).distinct())


def _both_ways(e: DataFrame) -> DataFrame:
    return e.select("u", "v").unionByName(e.select(F.col("v").alias("u"), F.col("u").alias("v")))


def _large_star(e: DataFrame) -> DataFrame:
    """Every vertex hands its larger neighbours to the smallest of its closed neighbourhood."""
    both = _both_ways(e)
    low = both.groupBy("u").agg(F.min("v").alias("m")).select("u", F.least("u", "m").alias("m"))
    return (both.join(low, "u").where(F.col("v") > F.col("u"))
            .select(F.col("v").alias("u"), F.col("m").alias("v")).distinct())


def _small_star(e: DataFrame) -> DataFrame:
    """Every vertex and its smaller neighbours attach to the smallest of them."""
    low = e.groupBy("u").agg(F.min("v").alias("m"))
    j = e.join(low, "u")
    moved = j.where(F.col("v") != F.col("m")).select(F.col("v").alias("u"), "m")
    own = j.select("u", "m")
    return moved.unionByName(own).select("u", F.col("m").alias("v")).distinct()


def _same_edges(old: DataFrame, new: DataFrame) -> bool:
    return old.count() == new.count() and new.subtract(old).limit(1).count() == 0


def _star_labels(stars: DataFrame) -> DataFrame:
    """A converged edge set is stars (leaf, root): the root labels itself and its leaves."""
    leaves = stars.select(F.col("u").getField("id").alias("id"), F.col("v").alias("label"))
    roots = stars.select(F.col("v").getField("id").alias("id"), F.col("v").alias("label"))
    return leaves.unionByName(roots).groupBy("id").agg(F.min("label").alias("label"))


def links_from_edges(edges: DataFrame, vertices: DataFrame, stage: str, max_iterations: int,
                     canonical_score: Callable[[DataFrame], DataFrame] | None = None) -> DataFrame:
    """Cluster scored edges (a, b, score); every member links to its cluster's canonical.

    vertices: id, key (order_key struct). via_id is the neighbour through which a
    member joined: its best-scored edge (ties: the lower id). The score is the
    member's similarity to the canonical when canonical_score is given (a function
    from duplicate_id, canonical_id to the same plus score); otherwise the best
    edge score, as before.
    """
    labels = connected_labels(edges, vertices, max_iterations)
    both = (edges.select(F.col("a").alias("id"), F.col("b").alias("via_id"), "score")
            .unionByName(edges.select(F.col("b").alias("id"), F.col("a").alias("via_id"), "score")))
    w = Window.partitionBy("id").orderBy(F.col("score").desc(), F.col("via_id").asc())
    best = both.withColumn("_r", F.row_number().over(w)).where(F.col("_r") == 1).drop("_r")
    members = (labels.where(F.col("label.id") != F.col("id"))
               .select(F.col("id").alias("duplicate_id"), F.col("label.id").alias("canonical_id")))
    joined = members.join(best.withColumnRenamed("id", "duplicate_id"), "duplicate_id")
    if canonical_score is not None:
        scored = canonical_score(members.select("duplicate_id", "canonical_id"))
        joined = joined.drop("score").join(scored.select("duplicate_id", "canonical_id", "score"),
                                           ["duplicate_id", "canonical_id"], "left")
    return joined.select("duplicate_id", "canonical_id", F.lit(stage).alias("stage"),
                         F.col("score").cast("double").alias("score"), F.col("via_id").cast("long"))


@njit(cache=True)
def _component_roots(n, a, b):
    """Union-find over vertices 0..n-1 and edges (a[i], b[i]): each vertex's root, the smallest
    index of its component."""
    parent = np.arange(n)
    for i in range(a.shape[0]):
        x = a[i]
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        y = b[i]
        while parent[y] != y:
            parent[y] = parent[parent[y]]
            y = parent[y]
        if x < y:
            parent[y] = x
        elif y < x:
            parent[x] = y
    for v in range(n):
        x = v
        while parent[x] != x:
            x = parent[x]
        parent[v] = x
    return parent


def candidate_components(pairs: DataFrame, vertices: DataFrame, max_iterations: int, driver_max: int) -> DataFrame:
    """id, comp (the same long for every document of one connected component) of every document in
    pairs (a, b).

    Up to driver_max pairs, the pairs are brought to the driver as two long arrays and joined by
    union-find (`_component_roots`) in one compiled pass (about 110 bytes a pair at peak, with the
    ids' np.unique; 9M pairs: 0.98 GB, 5.6 s): stage 3's 1.2M candidate pairs
    at 1M documents took 49 s of rounds of joins (`connected_labels`) on 2 cores. Larger graphs take
    the rounds, which no driver has to hold. comp is the smallest id of the component on the driver,
    the canonical's id in the rounds: a name for the component, no more."""
    if pairs.count() > driver_max:
        return connected_labels(pairs, vertices, max_iterations).select("id", F.col("label.id").alias("comp"))
    table = pairs.select("a", "b").toArrow()
    a, b = table.column("a").to_numpy(), table.column("b").to_numpy()
    ids = np.unique(np.concatenate([a, b]))
    labelled = pa.table({"id": pa.array(ids, pa.int64()), "comp": pa.array(component_labels(ids, a, b), pa.int64())})
    return pairs.sparkSession.createDataFrame(labelled)


def rows_in(sorted_ids: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each id's row in sorted_ids, clipped to the last row; whether it is there). The one lookup of
    ids in a sorted id array that stage 3's held labels and the incremental run's components share."""
    if len(sorted_ids) == 0:
        return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
    at = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
    return at, sorted_ids[at] == ids


def component_labels(ids: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest id of each vertex's connected component, by ids' order.

    ids: the vertices (distinct); a, b: edges as ids, every end among ids. A vertex without an
    edge is its own component."""
    ids = np.asarray(ids, np.int64)
    order = np.argsort(ids, kind="stable")
    ranked = ids[order]
    # Vertex indices in id order, so a root (the smallest index) is the smallest id.
    roots = _component_roots(ranked.shape[0], np.searchsorted(ranked, np.asarray(a, np.int64)),
                             np.searchsorted(ranked, np.asarray(b, np.int64)))
    labels = np.empty(ids.shape[0], np.int64)
    labels[order] = ranked[roots]
    return labels


def component_links(ids: np.ndarray, ts: np.ndarray, a: np.ndarray, b: np.ndarray,
                    score: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`links_from_edges`'s clusters for a graph held in numpy: (member, canonical, via) as indices
    into ids, one row per member.

    ids, ts: each vertex's order key (ts: order_micros); a, b, score: edges as vertex indices. The
    same rules: connected components of the edges; the canonical is the component's smallest
    (ts, id); via is the member's best-scored edge partner, ties to the lower id. For a graph that
    one task holds whole (stage 3's candidate components), where the Spark form's rounds of joins
    would cost more than the work."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if a.shape[0] == 0:
        empty = np.empty(0, np.int64)
        return empty, empty, empty
    roots = _component_roots(ids.shape[0], a, b)
    touched = np.zeros(ids.shape[0], bool)
    touched[a] = touched[b] = True
    vertices = np.flatnonzero(touched)
    # Sorted by component, then order key: each component's first vertex is its canonical.
    ranked = vertices[np.lexsort((ids[vertices], ts[vertices], roots[vertices]))]
    first = np.ones(ranked.shape[0], bool)
    first[1:] = roots[ranked[1:]] != roots[ranked[:-1]]
    canonical_of_root = np.full(ids.shape[0], -1, np.int64)
    canonical_of_root[roots[ranked[first]]] = ranked[first]
    canonical = canonical_of_root[roots[vertices]]
    members = vertices[canonical != vertices]
    # Best edge of every vertex: both directions, sorted by vertex, score descending, partner id.
    src, dst = np.concatenate([a, b]), np.concatenate([b, a])
    both_scores = np.concatenate([score, score])
    best = np.lexsort((ids[dst], -both_scores, src))
    starts = np.ones(best.shape[0], bool)
    starts[1:] = src[best[1:]] != src[best[:-1]]
    via_of = np.full(ids.shape[0], -1, np.int64)
    via_of[src[best[starts]]] = dst[best[starts]]
    return members, canonical_of_root[roots[members]], via_of[members]


def cluster_sizes(links: DataFrame) -> DataFrame:
    """canonical_id, size (members including the canonical) of every cluster the links form."""
    return links.groupBy("canonical_id").agg((F.count("*") + 1).alias("size"))


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
