"""The peers bench (lab/newsdedup_lab/bench_peers.py): each peer, run for real on a tiny corpus,
must find a planted near-duplicate and nothing else, through the same scoring as `newsdedup eval`."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from newsdedup_lab import bench_peers

WORDS = ("market river council school budget rain harbour station minister court report festival "
         "bridge farmer hospital election cricket museum railway village factory tender police garden").split()


def _text(seed: int, n: int = 120) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(n))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Five English documents: 2 is 1 with its last word changed; the rest unrelated."""
    from datetime import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    base = _text(1)
    bodies = {1: base, 2: base.rsplit(" ", 1)[0] + " changed", 3: _text(3), 4: _text(4), 5: _text(5)}
    root = tmp_path_factory.mktemp("peers")
    ids = sorted(bodies)
    pq.write_table(pa.table({
        "id": pa.array(ids, pa.int64()), "url": [f"https://e.com/{i}" for i in ids], "title": ["T"] * len(ids),
        "body": [bodies[i] for i in ids], "published_at": pa.array([datetime(2024, 1, i) for i in ids]),
        "source": ["e"] * len(ids), "lang": ["en"] * len(ids)}), root / "docs.parquet")
    truth = pd.DataFrame({"id": ids, "cluster_id": [1, 1, 3, 4, 5], "kind": ["origin", "typo", "origin", "origin",
                                                                             "origin"],
                          "lang": "en", "template_id": 0, "parent_id": [0, 1, 0, 0, 0]})
    return root, truth


def _assert_found_only_the_plant(run, truth):
    links = set(zip(run.links["duplicate_id"], run.links["canonical_id"]))
    assert links in ({(2, 1)}, {(1, 2)}), links
    s = bench_peers.score(run.links, truth)
    assert (s["overall"]["precision"], s["overall"]["recall_cumulative"]) == (1.0, 1.0)
    assert s["languages"]["en"]["true_pairs_found"] == 1
    assert run.seconds > 0


def test_datatrove_peer_finds_the_planted_duplicate(tiny, tmp_path):
    pytest.importorskip("datatrove")
    root, truth = tiny
    run = bench_peers.run_datatrove(root / "docs.parquet", tmp_path / "dt", tasks=2, workers=2)
    _assert_found_only_the_plant(run, truth)
    assert run.steps["signatures"] > 0 and run.prep_seconds > 0


def test_spark_lsh_peer_finds_the_planted_duplicate(spark, tiny, tmp_path):
    root, truth = tiny
    run = bench_peers.run_spark_lsh(spark, root / "docs.parquet", tmp_path / "lsh", bands_rows=(25, 10))
    _assert_found_only_the_plant(run, truth)
    kept = spark.read.parquet(str(tmp_path / "lsh" / "kept"))
    assert sorted(r.id for r in kept.select("id").collect()) == [1, 3, 4, 5]   # text-dedup keeps the component min


def test_score_counts_must_not_link_pairs_and_clusters_chain():
    truth = pd.DataFrame({"id": [1, 2, 3, 4], "cluster_id": [1, 1, 1, 4], "kind": "origin", "lang": ["en", "en",
                                                                                                   "bn", "bn"],
                          "template_id": 0, "parent_id": 0})
    links = bench_peers.cluster_links([1, 2, 3, 4], ["a", "a", "a", "b"])          # cluster a -> its lowest id
    assert sorted(zip(links["duplicate_id"], links["canonical_id"])) == [(2, 1), (3, 1)]
    s = bench_peers.score(links, truth, pd.DataFrame({"a": [1, 3], "b": [4, 2], "kind": "neighbour_id"}))
    assert s["overall"]["recall_cumulative"] == 1.0 and s["overall"]["precision"] == 1.0
    assert (s["must_not_link"], s["must_not_link_merged"]) == (2, 1)              # 3 and 2 share a cluster
