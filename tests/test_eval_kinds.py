"""Per-stage, per-kind metrics and the real-text corpus builder (on a tiny stand-in corpus)."""

import json
import random

import pandas as pd

from newsdedup_lab import eval_kinds, realtext


def test_stage_kind_metrics_count_duplicates_and_must_not_link_pairs():
    truth = pd.DataFrame({"id": [1, 2, 3, 4, 5], "cluster_id": [1, 1, 3, 4, 5],
                          "kind": ["origin", "typo", "origin", "template_report", "origin"],
                          "lang": ["en"] * 5, "template_id": [0] * 5, "parent_id": [0, 1, 0, 3, 0]})
    pairs = pd.DataFrame({"a": [1], "b": [5], "kind": ["same_topic"]})
    links = [(2, 1, "content"), (4, 3, "simhash"), (5, 1, "simhash")]
    rows = {(r["stage"], r["kind"]): r for r in eval_kinds.stage_kind_metrics(truth, links, pairs)}
    assert rows[("content", "typo")]["recall"] == 1.0 and rows[("content", "typo")]["precision"] == 1.0
    assert rows[("content", "template_report")]["linked_must_not"] == 0
    assert rows[("simhash", "template_report")]["linked_must_not"] == 1
    assert rows[("simhash", "same_topic")]["linked_must_not"] == 1
    assert rows[("simhash", "typo")]["precision"] == 0.5          # 2 now shares a cluster with 5 too


def _sentence(rng, words, n=14):
    return " ".join(rng.choice(words) for _ in range(n)) + "."


def test_realtext_builder_derives_edits_and_pairs(tmp_path):
    rng = random.Random(2)
    en_words = [f"w{i}" for i in range(3000)]
    bbc = tmp_path / "bbc" / "sport"
    bbc.mkdir(parents=True)
    for i in range(12):
        paras = [f"The visitors beat Alpha Bravo {i}-{i + 2} in front of {1000 + i} fans, said Charlie Delta."] + [
            _sentence(rng, en_words) + " " + _sentence(rng, en_words) for _ in range(6)]
        (bbc / f"{i:03}.txt").write_text(f"Headline {i}\n\n" + "\n\n".join(paras), encoding="utf-8")
    bn_words = ["".join(rng.choice("কখগঘচছজঝটঠডঢতথদধনপফবভমযরলশসহ") for _ in range(4)) for _ in range(3000)]
    bd = tmp_path / "bd.json"
    bd.write_text(json.dumps([{"headline": f"শিরোনাম {i}", "paper_name": "Prothom Alo", "category": "national",
                               "url": f"https://x/{i}", "article": " ".join(
                                   _sentence(rng, bn_words)[:-1] + f" {i} {j}।" for j in range(20))}
                              for i in range(6)]), encoding="utf-8")
    arts = realtext.read_bbc(tmp_path / "bbc") + realtext.read_bd(bd)
    assert {a.lang for a in arts} == {"en", "bn"}
    docs, truth, pairs = realtext.build(arts, seed=1, same_topic=3, neighbour=1)
    t = truth.to_pandas()
    assert set(t["kind"]) >= {"origin"}
    derived = t[t["parent_id"] > 0]
    assert (derived["cluster_id"][~derived["kind"].isin(eval_kinds.MUST_NOT_LINK_KINDS)]
            == derived["parent_id"][~derived["kind"].isin(eval_kinds.MUST_NOT_LINK_KINDS)]).all()
    p = pairs.to_pandas()
    assert set(p["kind"]) <= set(realtext.MUST_NOT_LINK_KINDS)
    assert "neighbour_id" in set(p["kind"])
    assert docs.num_rows == len(t)
