"""Stage 3's Spark step: `SimhashStage` (candidates, verification, clustering) and its report counters."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ...clustering import (candidate_components, cluster_sizes, cut_lineage, links_from_edges, order_key,
                           order_micros)
from ..base import StageResult
from .candidates import MINHASH, TABLES, candidate_pairs
from .keys import STAGE_COLUMNS
from .live import SimhashLookup
from .verify import (EDGE, LINK, component_edges_and_links, held_components, pair_features, similarity,
                     verified)


class SimhashStage:
    """Candidates (Manku tables on simhash_w + MinHash bands); then, per connected component of the
    candidate pairs, exact verification and clustering; each link scores the duplicate against its
    canonical."""

    name = "simhash"
    columns = STAGE_COLUMNS           # what run() reads from the unresolved rows

    def lookup(self, conf) -> SimhashLookup:
        return SimhashLookup(conf)

    def run(self, ctx, unresolved: DataFrame) -> StageResult:
        sim_conf = ctx.conf.simhash
        pairs, split = candidate_pairs(unresolved, sim_conf)
        pairs, split = cut_lineage(pairs), cut_lineage(split)   # both read more than once
        vertices = unresolved.select("id", order_key().alias("key"))
        # Every verified cluster lies inside a connected component of the candidate pairs: each
        # component is verified, clustered and scored where its features meet its pairs.
        comps = cut_lineage(candidate_components(pairs, vertices, sim_conf.max_iterations, sim_conf.driver_components_max)
                            .join(unresolved.select("id", order_micros().alias("ts")), "id"))
        n_in_pairs = comps.count()
        broadcast = n_in_pairs <= sim_conf.verify_broadcast_max
        held = held_components(comps, n_in_pairs, sim_conf) if broadcast else None
        feats = pair_features(ctx.archive, comps.select("id"), ctx.conf, ctx.verify, ctx.verify_complete,
                              broadcast=broadcast, held=held)
        sizes = cut_lineage(comps.groupBy("comp").count())
        # The largest component sets what one task holds (verify_group_docs is only the typical group).
        largest = sizes.agg(F.max("count")).first()[0] or 0
        big = (sizes.where(F.col("count") > sim_conf.local_component_max)
               .join(comps, "comp").select(F.col("id").alias("a")))
        has_big = largest > sim_conf.local_component_max
        if has_big or not (broadcast and ctx.verify_complete):
            # Read more than once, or derived from the text: materialised. Otherwise the features
            # are picked out where they lie, and reading them again would cost less than writing them.
            feats = cut_lineage(feats)
        local = pairs.join(big, "a", "left_anti") if has_big else pairs
        out = cut_lineage(component_edges_and_links(local, feats, comps, sim_conf, n_in_pairs, held))
        edges = out.where(F.col("kind") == EDGE).select("a", "b", "score")
        links = out.where(F.col("kind") == LINK).select(
            F.col("a").alias("duplicate_id"), F.col("b").alias("canonical_id"), F.lit(self.name).alias("stage"),
            "score", "via_id")
        if has_big:
            # Components no single task should hold: the same rules by joins and rounds over the cluster.
            big_edges, big_links = self._by_joins(pairs.join(big, "a", "left_semi"), feats, vertices, sim_conf)
            edges, links = edges.unionByName(big_edges), cut_lineage(links.unionByName(big_links))
        counts, notes = _stage_counts(unresolved, pairs, edges, links, split, cluster_sizes(links), sim_conf)
        counts["simhash.candidate_documents"] = n_in_pairs
        counts["simhash.candidate_component_max"] = int(largest)
        found_by = F.when(F.col("found_by") == TABLES, "tables").otherwise("minhash")
        flags = split.select("id", F.concat(F.lit("simhash_bucket_split:"), found_by).alias("flag"))
        return StageResult(links, notes, counts, flags=flags)

    def _by_joins(self, pairs: DataFrame, feats: DataFrame, vertices: DataFrame, sim_conf) -> tuple[DataFrame, DataFrame]:
        """(edges, links) of pairs by `similarity`'s joins and `links_from_edges`' rounds."""
        edges = cut_lineage(verified(similarity(pairs, feats, "a", "b"), sim_conf)
                            .select("a", "b", F.col("jaccard").alias("score")))

        def to_canonical(members: DataFrame) -> DataFrame:
            scored = similarity(members, feats, "duplicate_id", "canonical_id")
            return scored.select("duplicate_id", "canonical_id", F.col("jaccard").alias("score"))

        links = links_from_edges(edges, vertices, self.name, sim_conf.max_iterations, canonical_score=to_canonical)
        return edges, links.select("duplicate_id", "canonical_id", "stage", "score", "via_id")


SIZE_BINS = ((2, 2), (3, 5), (6, 10), (11, 100), (101, None))


def _stage_counts(unresolved, pairs, edges, links, split, sizes, sim_conf) -> tuple[dict[str, int], list[str]]:
    """Report counters: candidates per search (tables, minhash), verified edges, split buckets, cluster sizes."""
    row = pairs.agg(F.sum((F.col("found_by") == TABLES).cast("int")).alias("tables"),
                    F.sum((F.col("found_by") == MINHASH).cast("int")).alias("minhash")).first()
    n_docs = unresolved.where(F.col("simhash_w").isNotNull()).count()
    counts = {"simhash.documents": n_docs, "simhash.candidates.tables": int(row.tables or 0),
              "simhash.candidates.minhash": int(row.minhash or 0), "simhash.edges": edges.count(),
              "simhash.split_documents": split.select("id").distinct().count()}
    # Every candidate pair involves two documents: per-document candidates = 2 * pairs / docs.
    counts["simhash.candidates_per_doc_x1000"] = (
        int(round(2000 * (counts["simhash.candidates.tables"] + counts["simhash.candidates.minhash"])
                  / n_docs)) if n_docs else 0)
    bins = {f"simhash.clusters.size_{lo}{'+' if hi is None else f'_{hi}'}":
            (F.col("size") >= lo if hi is None else F.col("size").between(lo, hi)) for lo, hi in SIZE_BINS}
    bins["simhash.clusters_over_max"] = F.col("size") > sim_conf.max_cluster_size
    hist = sizes.agg(*[F.sum(cond.cast("int")).alias(name) for name, cond in bins.items()]).first().asDict()
    counts.update({name: int(v or 0) for name, v in hist.items()})     # one pass for every bin
    n_big = counts["simhash.clusters_over_max"]
    big = sizes.where(F.col("size") > sim_conf.max_cluster_size).orderBy(F.col("size").desc())
    notes = []
    if counts["simhash.split_documents"]:
        notes.append(f"{counts['simhash.split_documents']} document(s) sat in stage-3 buckets over "
                     f"simhash.max_band_bucket and were compared only within their chunk "
                     f"(flagged simhash_bucket_split on their documents rows)")
    if n_big:
        top = ", ".join(f"{r.canonical_id} ({r.size})" for r in big.limit(10).collect())
        notes.append(f"{n_big} stage-3 cluster(s) over simhash.max_cluster_size={sim_conf.max_cluster_size}: {top}")
    return counts, notes
