"""Stage 3's pair measures (simhash.verify.similarity) against their definition on Python sets."""

import random

import pytest

import numpy as np
import pyarrow as pa

from newsdedup.stages.simhash.verify import _measures_of_rows, similarity


def reference(x, y, empty):
    """|x & y| / min(|x|, |y|), `empty` when either is empty."""
    small = min(len(x), len(y))
    return len(set(x) & set(y)) / small if small else empty


def features(rng, i):
    # As shingle_set stores them: sorted as unsigned 32-bit values, written as int32.
    shingles = [v - 2 ** 32 if v >= 2 ** 31 else v for v in sorted(rng.sample(
        [*range(40), *range(2 ** 31 - 20, 2 ** 31 + 20), *range(2 ** 32 - 20, 2 ** 32)], rng.choice([0, 1, 5, 20, 60])))]
    nums = sorted({str(rng.randrange(12)) for _ in range(rng.choice([0, 1, 3, 6]))})
    names = sorted({rng.choice(["Dhaka", "Khulna", "Messi", "Ronaldo", "Tigers", "Rhinos", "ঢাকা"])
                    for _ in range(rng.choice([0, 2, 4]))})
    return (i, shingles, nums, names)


@pytest.mark.parametrize("batch", ["10000", "3"])
def test_similarity_is_the_set_definition(spark, batch):
    rng = random.Random(5)
    feats = [features(rng, i) for i in range(60)]
    by_id = {f[0]: f for f in feats}
    pairs = sorted({tuple(sorted(rng.sample(range(60), 2))) for _ in range(300)})
    pairs += [(7, 7)]                                          # a document against itself
    pdf = spark.createDataFrame([(a, b, "en") for a, b in pairs], "a long, b long, lang string")
    fdf = spark.createDataFrame(feats, "id long, shingles array<int>, nums array<string>, names array<string>")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", batch)   # "3": sliced batches
    try:
        got = {(r.a, r.b): r for r in similarity(pdf, fdf, "a", "b").collect()}
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert set(got) == set(pairs)
    for a, b in pairs:
        x, y = by_id[a], by_id[b]
        inter, union = len(set(x[1]) & set(y[1])), len(set(x[1]) | set(y[1]))
        r = got[(a, b)]
        assert r.lang == "en"
        assert r.jaccard == (inter / union if union else 0.0)
        assert r.containment == reference(x[1], y[1], 0.0)
        assert r.numbers == reference(x[2], y[2], None)
        assert r.names == reference(x[3], y[3], None)
    assert got[(7, 7)].jaccard in (0.0, 1.0)
    assert 0 < sum(r.jaccard for r in got.values()) and any(r.numbers is None for r in got.values())


@pytest.mark.parametrize("chunk, column_chunks", [(1, 1), (7, 1), (10000, 1), (7, 3), (10000, 4)])
def test_measures_of_rows_in_chunks_are_the_set_definition(chunk, column_chunks):
    """A verification group measures its pairs chunk pairs at a time: every pair, in order, whether
    the feature columns are one array or arrive in several chunks."""
    rng = random.Random(11)
    feats = [features(rng, i) for i in range(40)]
    left = np.array([rng.randrange(40) for _ in range(150)])
    right = np.array([rng.randrange(40) for _ in range(150)])
    values = {"shingles": pa.array([f[1] for f in feats], pa.list_(pa.int32())),
              "nums": pa.array([f[2] for f in feats], pa.list_(pa.string())),
              "names": pa.array([f[3] for f in feats], pa.list_(pa.string()))}
    if column_chunks > 1:
        cuts = [0, 3, 17, 18, 40][:column_chunks] + [40]
        values = {k: pa.chunked_array([v.slice(lo, hi - lo) for lo, hi in zip(cuts[:-1], cuts[1:])])
                  for k, v in values.items()}
        assert values["shingles"].num_chunks == column_chunks
    got = _measures_of_rows(values, left, right, chunk=chunk)
    assert all(len(v) == len(left) for v in got.values())
    for i, (a, b) in enumerate(zip(left, right)):
        x, y = feats[a], feats[b]
        union = len(set(x[1]) | set(y[1]))
        assert got["jaccard"][i] == (len(set(x[1]) & set(y[1])) / union if union else 0.0)
        assert got["containment"][i] == reference(x[1], y[1], 0.0)
        for name, column in (("numbers", 2), ("names", 3)):
            want = reference(x[column], y[column], None)
            assert (np.isnan(got[name][i]) if want is None else got[name][i] == want)


def components(pairs):
    """id -> smallest id of its connected component (union-find over the pairs)."""
    parent = {}

    def root(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = root(a), root(b)
        parent[max(ra, rb)] = min(ra, rb)
    return {x: root(x) for x in parent}


@pytest.mark.parametrize("group_docs, broadcast", [(7, True), (7, False), (1000, True)])
def test_component_edges_and_links_are_the_joins_and_rounds(spark, conf, group_docs, broadcast):
    """Verified and clustered inside candidate components (several groups or one, labels broadcast
    or joined), the edges are `verified(similarity(...))`'s and the links `links_from_edges`' with
    the canonical scored by Jaccard; a pair missing a document's features is dropped by both."""
    from dataclasses import replace

    from pyspark.sql import functions as F

    from newsdedup.clustering import links_from_edges
    from newsdedup.stages.simhash.verify import EDGE, LINK, component_edges_and_links, held_components, verified

    rng = random.Random(11)
    feats = []
    for i in range(80):     # near-copies in runs of four, so that verification keeps some pairs
        base = features(random.Random(i // 4), i)
        feats.append((i, base[1] + ([] if i % 4 else [7000 + i]), base[2], base[3]))
    feats = [(i, sorted(set(s), key=lambda v: v % 2 ** 32), n, m) for i, s, n, m in feats]
    pairs = {(i, i + 1) for i in range(0, 78)} | {(i, i + 5) for i in range(0, 70, 7)} | {(70, 99)}
    pairs = sorted(pairs)
    comps = components(pairs)
    ts = {i: rng.choice([None, 3, 3, 8]) for i in comps}              # tied and unknown dates
    sim_conf = replace(conf.simhash, verify_group_docs=group_docs)
    pdf = spark.createDataFrame([(a, b, rng.choice(["en", "bn"]), 0) for a, b in pairs],
                                "a long, b long, lang string, found_by int")
    fdf = spark.createDataFrame(feats, "id long, shingles array<int>, nums array<string>, names array<string>")
    far = 2 ** 62
    cdf = spark.createDataFrame([(i, c, far if ts[i] is None else ts[i]) for i, c in sorted(comps.items())],
                                "id long, comp long, ts long")
    vertices = cdf.select("id", F.struct(F.col("ts"), F.col("id")).alias("key"))

    want_edges = verified(similarity(pdf, fdf, "a", "b"), sim_conf).select("a", "b", F.col("jaccard").alias("score"))

    def to_canonical(members):
        return similarity(members, fdf, "duplicate_id", "canonical_id").select(
            "duplicate_id", "canonical_id", F.col("jaccard").alias("score"))

    want_links = links_from_edges(want_edges, vertices, "simhash", 30, canonical_score=to_canonical)
    held = held_components(cdf, len(comps), sim_conf) if broadcast else None
    out = component_edges_and_links(pdf, fdf, cdf, sim_conf, len(comps), held).collect()
    edges = sorted((r.a, r.b, r.score) for r in out if r.kind == EDGE)
    links = sorted((r.a, r.b, r.score, r.via_id) for r in out if r.kind == LINK)
    assert edges == sorted((r.a, r.b, r.score) for r in want_edges.collect())
    assert links == sorted((r.duplicate_id, r.canonical_id, r.score, r.via_id) for r in want_links.collect())
    assert 10 < len(edges) < len(pairs) - 10 and len({c for _, c, _, _ in links}) > 3
