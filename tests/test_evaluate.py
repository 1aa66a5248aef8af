"""Evaluation metrics on hand-made examples, and a small end-to-end run through real Spark."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from newsdedup_lab import evaluate as ev
from newsdedup.stages.simhash import reference as ref

# True clusters: A = {1, 2, 3}, B = {4, 5}, C = {6}: 3 + 1 = 4 true pairs.
TRUTH = {1: 10, 2: 10, 3: 10, 4: 20, 5: 20, 6: 30}


def _row(rows, stage):
    return next(r for r in rows if r["stage"] == stage)


def test_pair_metrics_attribute_pairs_to_the_stage_that_joined_them():
    links = [(2, 1, "url"),          # {1,2}: 1 pair, true
             (3, 1, "content"),      # {1,2} + {3}: 2 new pairs, both true
             (5, 4, "simhash"),      # {4,5}: 1 pair, true
             (6, 4, "simhash")]      # {4,5} + {6}: 2 new pairs, both false
    rows, uf = ev.pair_metrics(TRUTH, links)
    url, content, simhash, overall = (_row(rows, s) for s in ("url", "content", "simhash", "overall"))
    assert (url["pred_pairs"], url["true_pairs_found"], url["precision"]) == (1, 1, 1.0)
    assert (content["pred_pairs"], content["true_pairs_found"]) == (2, 2)
    assert content["recall_cumulative"] == pytest.approx(3 / 4)
    assert (simhash["pred_pairs"], simhash["true_pairs_found"]) == (3, 1)
    assert simhash["precision"] == pytest.approx(1 / 3)
    assert overall["precision"] == pytest.approx(4 / 6) and overall["recall_cumulative"] == 1.0
    assert overall["f1_cumulative"] == pytest.approx(2 * (4 / 6) / (4 / 6 + 1))
    assert uf.find(3) == uf.find(2) and uf.find(6) == uf.find(5) and uf.find(1) != uf.find(4)


def test_chained_and_redundant_links_count_each_pair_once():
    # url links 2->1, content links 1->3 (a canonical absorbed later); a repeated link adds nothing.
    rows, _ = ev.pair_metrics(TRUTH, [(2, 1, "url"), (1, 3, "content"), (2, 3, "content")])
    assert _row(rows, "content")["pred_pairs"] == 2
    assert _row(rows, "overall")["recall_cumulative"] == pytest.approx(3 / 4)


def test_no_links_means_no_precision_and_zero_recall():
    rows, _ = ev.pair_metrics(TRUTH, [])
    overall = _row(rows, "overall")
    assert math.isnan(overall["precision"]) and overall["recall_cumulative"] == 0.0


def test_kind_recall_and_false_merge_rate():
    truth = pd.DataFrame({"id": [1, 2, 3, 4, 5], "cluster_id": [1, 1, 1, 2, 3],
                          "kind": ["origin", "typo", "typo", "hard_negative", "origin"],
                          "parent_id": [0, 1, 1, 1, 0]})
    _, uf = ev.pair_metrics(dict(zip(truth["id"], truth["cluster_id"])), [(2, 1, "simhash"), (4, 1, "simhash")])
    kinds = {r["kind"]: r for r in ev.kind_recall(truth, uf)}
    assert kinds["typo"]["value"] == 0.5 and kinds["typo"]["measure"] == "recall"
    assert kinds["hard_negative"]["value"] == 1.0 and kinds["hard_negative"]["measure"] == "false_merge_rate"


def test_hamming_matches_the_scalar_implementation():
    rng = np.random.default_rng(0)
    a = rng.integers(-2**63, 2**63 - 1, size=50, dtype=np.int64)
    b = rng.integers(-2**63, 2**63 - 1, size=50, dtype=np.int64)
    assert ev.hamming(a, b).tolist() == [ref.hamming(int(x), int(y)) for x, y in zip(a, b)]


def test_distance_samples_label_pairs_and_the_sweep_counts_them():
    base = 0x0F0F_0F0F_0F0F_0F0F
    fps = pd.DataFrame({"id": [1, 2, 3, 4], "lang": ["en"] * 4,
                        "simhash": [base, base ^ 0b11, base ^ 0b1, base ^ (0xFFFF << 16)]})
    truth = pd.DataFrame({"id": [1, 2, 3, 4], "cluster_id": [1, 1, 2, 3],
                          "kind": ["origin", "typo", "hard_negative", "origin"],
                          "parent_id": [0, 1, 1, 0], "template_id": [7, 7, 7, 8]})
    s = ev.distance_samples(fps, truth)
    dup = s[s["duplicate"]]
    assert dup[["kind", "distance"]].values.tolist() == [["typo", 2]]
    hard = s[~s["duplicate"] & (s["kind"] == "hard_negative")].sort_values("distance")
    assert hard["distance"].tolist() == [1, 1]       # 3 vs 1 (its template's origin), 3 vs 2 (same template)
    other = s[s["kind"] == "band_candidate"]
    assert len(other) == 3 and (other["distance"] >= 16).all()   # 4 shares three bands with the others
    sweep = ev.threshold_sweep(s, max_distance=3).set_index("max_hamming")
    assert sweep.loc[1, "near_dup_recall"] == 0.0 and sweep.loc[2, "near_dup_recall"] == 1.0
    assert sweep.loc[0, "hard_negatives_within"] == 0 and sweep.loc[3, "hard_negatives_within"] == 2


def _bars(ax):
    """{bin centre: height} of the histogram bars of one series (its colour) on ax."""
    return {p.get_x() + p.get_width() / 2: p.get_height() for p in ax.patches if p.get_height() > 0}


def test_plot_shows_each_languages_series_and_threshold(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    from matplotlib.image import imread

    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figures.append(fig), close(fig)))   # keep a look at it
    s = pd.DataFrame({"lang": ["en", "en", "en", "bn", "bn"],
                      "kind": ["typo", "typo", "hard_negative", "typo", "band_candidate"],
                      "duplicate": [True, True, False, True, False], "distance": [1, 1, 9, 2, 14]})
    path = ev.plot_distances(s, {"en": 3, "bn": 2, "default": 3}, tmp_path / "d.png", max_distance=24)
    (fig,) = figures
    bn, en = fig.axes
    assert (bn.get_title(), en.get_title()) == ("lang = bn", "lang = en")
    labels = lambda ax: [t.get_text() for t in ax.get_legend().get_texts()]   # noqa: E731
    assert labels(en) == ["near duplicates (typo, update, headline) (n=2)", "hard negatives (same template) (n=1)",
                          "max_hamming = 3"]
    assert labels(bn) == ["near duplicates (typo, update, headline) (n=1)",
                          "other non-duplicates sharing a band (n=1)", "max_hamming = 2"]
    # The threshold line sits between max_hamming and the next distance; the counts sit on their distances.
    assert [line.get_xdata()[0] for line in en.get_lines()] == [3.5]
    assert [line.get_xdata()[0] for line in bn.get_lines()] == [2.5]
    assert _bars(en) == {1.0: 2, 9.0: 1} and _bars(bn) == {2.0: 1, 14.0: 1}
    assert en.get_yscale() == "log" and en.get_xlim() == (-0.5, 24.5)
    image = imread(path)
    assert image.shape[:2] == (462, 1430)             # two panels of 6.5 x 4.2 inches at 110 dpi
    assert image[..., :3].std() > 0.05                # not blank


def test_end_to_end_eval_on_a_small_corpus(spark, conf, tmp_path):
    result = ev.run_eval(spark, conf, tmp_path, n_docs=300, seed=5)
    url, content, simhash, overall = (result.stage(s) for s in ("url", "content", "simhash", "overall"))
    # Exact stages never join different items, and find every exact copy.
    assert url["precision"] == 1.0 and content["precision"] == 1.0
    for kind in ("url_variant", "syndicated", "nfd"):
        assert result.kind(kind) == 1.0, kind
    # SimHash finds most near duplicates and almost never merges a hard negative.
    assert simhash["precision"] >= 0.9
    near = [r for r in result.kinds if r["kind"] in ev.NEAR_KINDS]
    assert sum(r["joined_to_parent"] for r in near) / sum(r["documents"] for r in near) >= 0.5
    assert result.kind("hard_negative") <= 0.05
    # Same-event rewrites are beyond stages 1-3 (stage 4 territory).
    assert result.kind("rewrite") <= 0.2
    assert overall["precision"] >= 0.95 and 0.6 <= overall["recall_cumulative"] < 1.0
    assert (tmp_path / "eval.json").exists()
    assert (tmp_path / "simhash_distances.png").read_bytes()[:4] == b"\x89PNG"
