"""Stage 3's pair measures (simhash.verify.similarity) against their definition on Python sets."""

import random

import pytest

from newsdedup.stages.simhash.verify import similarity


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
