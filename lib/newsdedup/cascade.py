"""The dedup cascade on Spark DataFrames.

Each stage takes the documents still unresolved ("survivors"), emits links
(duplicate_id -> canonical_id) and returns the new survivors. The canonical of
a group is its earliest document (unknown dates last, then lowest id); since
every survivor is the earliest of what it absorbed, chaining stages keeps that
rule across the whole cluster.
"""

from __future__ import annotations

from typing import Any, Mapping

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .prepare import order_key

LINK_COLUMNS = ("duplicate_id", "canonical_id", "stage", "score")


def exact_stage(docs: DataFrame, key: str, stage: str) -> tuple[DataFrame, DataFrame]:
    """Group by an exact hash; everything but the earliest member of a group is a duplicate."""
    keyed = docs.where(F.col(key).isNotNull())
    w = Window.partitionBy(key).orderBy(F.col("_ok").asc())
    ranked = keyed.withColumn("_ok", order_key()).withColumn("_canon", F.first("id").over(w))
    links = (ranked.where(F.col("_canon") != F.col("id"))
             .select(F.col("id").alias("duplicate_id"), F.col("_canon").alias("canonical_id"),
                     F.lit(stage).alias("stage"), F.lit(1.0).alias("score")))
    survivors = docs.join(links.select(F.col("duplicate_id").alias("id")), "id", "left_anti")
    return links, survivors


def _threshold_column(conf: Mapping[str, Any], lang: Column) -> Column:
    langs = conf["simhash"]["languages"]
    expr = F.lit(int(langs["default"]["max_hamming"]))
    for name, spec in langs.items():
        if name != "default":
            expr = F.when(lang == name, F.lit(int(spec["max_hamming"]))).otherwise(expr)
    return expr


def simhash_candidates(docs: DataFrame, conf: Mapping[str, Any]) -> tuple[DataFrame, DataFrame]:
    """Candidate pairs from a self-join on (lang, band index, band value), then exact Hamming.

    Returns (edges with columns a, b, distance; skipped oversize buckets).
    """
    n_bands = int(conf["simhash"]["bands"])
    max_bucket = int(conf["simhash"]["max_band_bucket"])
    fp = docs.where(F.col("simhash").isNotNull()).select("id", "lang", "simhash",
                                                          *[f"band_{i}" for i in range(n_bands)])
    exploded = fp.select(
        "id", "lang", "simhash",
        F.posexplode(F.array(*[F.col(f"band_{i}") for i in range(n_bands)])).alias("band", "value"))
    sizes = exploded.groupBy("lang", "band", "value").agg(F.count("*").alias("n"))
    oversize = sizes.where(F.col("n") > max_bucket)
    buckets = exploded.join(F.broadcast(oversize.select("lang", "band", "value")),
                            ["lang", "band", "value"], "left_anti")
    a, b = buckets.alias("a"), buckets.alias("b")
    pairs = (a.join(b, (F.col("a.lang") == F.col("b.lang")) & (F.col("a.band") == F.col("b.band"))
                    & (F.col("a.value") == F.col("b.value")) & (F.col("a.id") < F.col("b.id")))
             .select(F.col("a.id").alias("a"), F.col("b.id").alias("b"), F.col("a.lang").alias("lang"),
                     F.bit_count(F.col("a.simhash").bitwiseXOR(F.col("b.simhash"))).alias("distance"))
             .dropDuplicates(["a", "b"]))
    edges = pairs.where(F.col("distance") <= _threshold_column(conf, F.col("lang")))
    return edges.select("a", "b", "distance"), oversize


def cut_lineage(df: DataFrame) -> DataFrame:
    """Materialise df: a reliable checkpoint when the job set a checkpoint dir, else a local one."""
    if df.sparkSession.sparkContext.getCheckpointDir():
        return df.checkpoint(eager=True)
    return df.localCheckpoint(eager=True)


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
    raise RuntimeError(f"simhash clustering did not converge in {max_iterations} rounds; "
                       "raise simhash.max_iterations")


def simhash_stage(docs: DataFrame, conf: Mapping[str, Any]) -> tuple[DataFrame, DataFrame, DataFrame]:
    edges, oversize = simhash_candidates(docs, conf)
    edges = cut_lineage(edges)
    vertices = docs.select("id", order_key().alias("key"))
    labels = connected_labels(edges, vertices, int(conf["simhash"]["max_iterations"]))
    # Score: the best edge that put the document into its cluster.
    best = (edges.select(F.col("a").alias("id"), "distance")
            .unionByName(edges.select(F.col("b").alias("id"), "distance"))
            .groupBy("id").agg(F.min("distance").alias("distance")))
    links = (labels.join(best, "id")
             .where(F.col("label.id") != F.col("id"))
             .select(F.col("id").alias("duplicate_id"), F.col("label.id").alias("canonical_id"),
                     F.lit("simhash").alias("stage"), (1.0 - F.col("distance") / 64.0).alias("score")))
    survivors = docs.join(links.select(F.col("duplicate_id").alias("id")), "id", "left_anti")
    return links, survivors, oversize
