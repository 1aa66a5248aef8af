"""Connected components (large-star / small-star) and the links they produce."""

import numpy as np
import pytest
from pyspark.sql import functions as F

from newsdedup import clustering
from newsdedup.clustering import rows_in


def _vertices(spark, ids, rank=lambda i: i):
    return spark.createDataFrame([(i, (rank(i), i)) for i in ids], "id long, key struct<ts:long,id:long>")


def test_a_1000_long_chain_is_one_component_in_few_rounds(spark):
    n = 1000
    # Keys fall along the chain, so min-label propagation would need ~1,000 rounds.
    edges = spark.createDataFrame([(i, i + 1) for i in range(1, n)], "a long, b long")
    vertices = _vertices(spark, range(1, n + 1), rank=lambda i: -i)
    labels = clustering.connected_labels(edges, vertices, max_iterations=25)
    rows = labels.collect()
    assert len(rows) == n
    assert {r.label.id for r in rows} == {n}      # the smallest key: rank -n


def test_components_and_their_minimum(spark):
    edges = spark.createDataFrame([(1, 2), (2, 3), (3, 4), (10, 11), (20, 21), (21, 22), (22, 20)],
                                  "a long, b long")
    keys = {1: 5, 2: 1, 3: 9, 4: 2, 10: 3, 11: 0, 20: 7, 21: 8, 22: 6}
    labels = clustering.connected_labels(edges, _vertices(spark, keys, rank=keys.get), 10)
    got = {r.id: r.label.id for r in labels.collect()}
    assert got == {1: 2, 2: 2, 3: 2, 4: 2, 10: 11, 11: 11, 20: 22, 21: 22, 22: 22}


def test_links_score_against_the_canonical_and_name_the_neighbour(spark):
    # 1 - 2 - 3: 3 reaches the canonical 1 only through 2.
    edges = spark.createDataFrame([(1, 2, 0.9), (2, 3, 0.8)], "a long, b long, score double")
    vertices = _vertices(spark, [1, 2, 3])

    def to_canonical(members):
        sims = {(2, 1): 0.9, (3, 1): 0.55}
        return members.select("duplicate_id", "canonical_id", F.udf(lambda d, c: sims[(d, c)], "double")(
            "duplicate_id", "canonical_id").alias("score"))

    links = clustering.links_from_edges(edges, vertices, "simhash", 10, canonical_score=to_canonical)
    got = {(r.duplicate_id, r.canonical_id, r.via_id, r.score) for r in links.collect()}
    assert got == {(2, 1, 1, 0.9), (3, 1, 2, 0.55)}
    # Without canonical_score (stage 4): the best edge score, as before.
    plain = clustering.links_from_edges(edges, vertices, "semantic", 10)
    assert {(r.duplicate_id, r.score, r.via_id) for r in plain.collect()} == {(2, 0.9, 1), (3, 0.8, 2)}
    sizes = clustering.cluster_sizes(links).collect()
    assert [(r.canonical_id, r.size) for r in sizes] == [(1, 3)]


def test_component_links_are_links_from_edges(spark):
    """The numpy form gives the Spark form's members, canonicals and via neighbours on a random graph
    with tied timestamps, tied scores, repeated edges and a long chain."""
    import random

    import numpy as np

    rng = random.Random(3)
    ids = rng.sample(range(1, 10_000), 300)
    ts = {i: rng.choice([None, 5, 7, 7, 9, 11]) for i in ids}          # ties: the id decides
    edges = [(rng.choice(ids), rng.choice(ids), rng.choice([0.5, 0.75, 0.75, 1.0])) for _ in range(260)]
    edges = [(a, b, s) for a, b, s in edges if a != b]
    edges += edges[:20]                                                  # found by both searches
    chain = ids[200:260]
    edges += [(x, y, 0.6) for x, y in zip(chain, chain[1:])]
    vertices = spark.createDataFrame([(i, ts[i]) for i in ids], "id long, ts long").select(
        "id", F.struct(F.coalesce("ts", F.lit(2 ** 62)).alias("ts"), F.col("id").alias("id")).alias("key"))
    want = {(r.duplicate_id, r.canonical_id, r.via_id) for r in clustering.links_from_edges(
        spark.createDataFrame(edges, "a long, b long, score double"), vertices, "simhash", 30).collect()}

    index = {i: k for k, i in enumerate(ids)}
    id_array = np.array(ids, np.int64)
    ts_array = np.array([2 ** 62 if ts[i] is None else ts[i] for i in ids], np.int64)
    members, canonical, via = clustering.component_links(
        id_array, ts_array, np.array([index[a] for a, _, _ in edges]), np.array([index[b] for _, b, _ in edges]),
        np.array([s for _, _, s in edges]))
    got = set(zip(id_array[members].tolist(), id_array[canonical].tolist(), id_array[via].tolist()))
    assert len(want) > 150 and got == want


@pytest.mark.parametrize("driver_max", [1000, 1])
def test_candidate_components_on_the_driver_and_by_rounds(spark, driver_max):
    """Union-find on the driver (driver_max 1000) and the rounds of joins (1) put the same documents
    together, and only documents of the pairs."""
    edges = spark.createDataFrame([(1, 2), (2, 3), (3, 4), (10, 11), (20, 21), (21, 22), (22, 20), (40, 30)],
                                  "a long, b long")
    comps = clustering.candidate_components(edges, _vertices(spark, range(1, 50)), 10, driver_max).collect()
    groups = {}
    for r in comps:
        groups.setdefault(r.comp, set()).add(r.id)
    assert sorted(map(sorted, groups.values())) == [[1, 2, 3, 4], [10, 11], [20, 21, 22], [30, 40]]


def test_rows_in_finds_each_id_in_a_sorted_array_and_says_which_are_missing():
    sorted_ids = np.array([3, 7, 9], np.int64)
    at, found = rows_in(sorted_ids, np.array([9, 2, 7, 10, 3], np.int64))
    assert found.tolist() == [True, False, True, False, True]
    assert at[found].tolist() == [2, 1, 0]
    assert at.max() < len(sorted_ids)                      # ids past the end still index a row
    at, found = rows_in(np.zeros(0, np.int64), np.array([1, 2], np.int64))
    assert found.tolist() == [False, False] and at.tolist() == [0, 0]
