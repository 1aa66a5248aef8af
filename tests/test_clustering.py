"""Connected components (large-star / small-star) and the links they produce."""

from pyspark.sql import functions as F

from newsdedup import clustering


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
