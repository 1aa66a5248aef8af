"""The synthetic corpus: deterministic, every variant kind present, ground truth consistent."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq
import pytest

from newsdedup_lab import synth
from newsdedup.stages import content as tx
from newsdedup.config import load_config


@pytest.fixture(scope="module")
def corpus():
    docs, truth = synth.generate(1500, seed=11)
    return docs.to_pandas(), truth.to_pandas()


def _with_parent(docs: pd.DataFrame, truth: pd.DataFrame, kind: str) -> pd.DataFrame:
    t = truth[truth["kind"] == kind]
    d = docs.set_index("id")
    child = d.loc[t["id"]].reset_index().drop(columns=["lang"])
    parent = d.loc[t["parent_id"]].reset_index().add_prefix("p_")
    return pd.concat([t.reset_index(drop=True), child.drop(columns=["id"]), parent], axis=1)


def test_same_seed_same_corpus_other_seed_other_corpus():
    a, ta = synth.generate(400, seed=3)
    b, tb = synth.generate(400, seed=3)
    c, _ = synth.generate(400, seed=4)
    assert a.equals(b) and ta.equals(tb)
    assert not a.column("body").equals(c.column("body"))


def test_write_streams_the_same_corpus_as_generate(tmp_path):
    docs_path, truth_path = synth.write(700, tmp_path, seed=3)
    docs, truth = synth.generate(700, seed=3)
    assert pq.read_table(docs_path).equals(docs)
    assert pq.read_table(truth_path).equals(truth)
    assert pq.read_schema(docs_path).equals(synth.INPUT_SCHEMA)


def test_blocks_do_not_collide():
    # Two blocks: ids, cluster ids and URLs must stay unique across the block boundary.
    docs, truth = synth.generate(synth.BLOCK + 50, seed=2)
    d, t = docs.to_pandas(), truth.to_pandas()
    assert d["id"].is_unique and len(d) == synth.BLOCK + 50
    first = set(t.loc[t["id"] <= synth.BLOCK, "cluster_id"])
    second = set(t.loc[t["id"] > synth.BLOCK, "cluster_id"])
    assert not first & second
    assert d["url"].nunique() == len(d)


def test_every_kind_and_both_languages_present(corpus):
    docs, truth = corpus
    assert set(truth["kind"]) == set(synth.KINDS)
    assert set(truth["lang"]) == {"en", "bn"}
    assert docs["id"].is_unique and (docs["id"].to_numpy() == truth["id"].to_numpy()).all()
    assert docs["lang"].isna().any() and docs["lang"].notna().any()    # some rows hide their language
    words = docs["body"].str.split().str.len()
    assert words.min() >= 100 and words.median() >= 200


def test_url_variants_normalise_to_their_origin_and_sites_do_not_collapse(corpus):
    docs, truth = corpus
    conf = load_config()
    assert synth.url_key_collisions(docs, truth, conf) == {"colliding_keys": 0, "missed_url_variants": 0}
    variants = _with_parent(docs, truth, "url_variant")
    assert (variants["url"] != variants["p_url"]).all()
    assert variants["url"].str.contains("utm_|fbclid|gclid|#").mean() > 0.5
    # article ids in the query string are part of the corpus
    assert docs["url"].str.contains(r"\?news_id=\d+").any() and docs["url"].str.contains(r"\?id=\d+").any()


def test_a_wrong_allowlist_collapses_a_site(corpus):
    docs, truth = corpus
    # A wildcard that also matches article ids is harmless while the allowlists protect them ...
    greedy = load_config(overrides={"url": {"tracking_params": ["utm_*", "fbclid", "gclid", "*id"]}})
    assert synth.url_key_collisions(docs, truth, greedy)["colliding_keys"] == 0
    # ... and collapses every kalerkantho section into one key once news_id is not allowlisted.
    broken = load_config(overrides={"url": {"tracking_params": ["utm_*", "fbclid", "gclid", "*id"],
                                            "sources": {"kalerkantho": {"strip": [], "allow": []}}}})
    assert synth.url_key_collisions(docs, truth, broken)["colliding_keys"] > 0


def test_syndicated_copies_are_byte_identical_under_another_url(corpus):
    docs, truth = corpus
    s = _with_parent(docs, truth, "syndicated")
    assert len(s) > 0
    assert (s["title"] == s["p_title"]).all() and (s["body"] == s["p_body"]).all()
    assert (s["source"] != s["p_source"]).all()


def test_nfd_copies_differ_in_bytes_but_not_after_nfkc(corpus):
    docs, truth = corpus
    v = _with_parent(docs, truth, "nfd")
    assert len(v) > 0 and set(truth.loc[truth["kind"] == "nfd", "lang"]) == {"bn"}
    assert (v["body"].str.encode("utf-8") != v["p_body"].str.encode("utf-8")).all()
    for child, parent, ct, pt in zip(v["body"], v["p_body"], v["title"], v["p_title"]):
        assert tx.content_key(ct, child, ()) == tx.content_key(pt, parent, ())


def test_near_duplicates_differ_from_their_origin(corpus):
    docs, truth = corpus
    for kind in ("typo", "appended_update", "headline_change", "rewrite"):
        v = _with_parent(docs, truth, kind)
        assert len(v) > 0, kind
        key = [tx.content_key(t, b, ()) for t, b in zip(v["title"], v["body"])]
        pkey = [tx.content_key(t, b, ()) for t, b in zip(v["p_title"], v["p_body"])]
        assert all(a != b for a, b in zip(key, pkey)), kind
        assert (v["cluster_id"] == truth.set_index("id").loc[v["parent_id"], "cluster_id"].to_numpy()).all()
    updates = _with_parent(docs, truth, "appended_update")
    assert all(b.startswith(p) for b, p in zip(updates["body"], updates["p_body"]))
    headlines = _with_parent(docs, truth, "headline_change")
    assert (headlines["body"] == headlines["p_body"]).all() and (headlines["title"] != headlines["p_title"]).all()


def test_hard_negatives_share_the_template_but_are_distinct_items(corpus):
    docs, truth = corpus
    hn = truth[truth["kind"] == "hard_negative"]
    parents = truth.set_index("id").loc[hn["parent_id"]]
    assert len(hn) > 0
    assert (hn["cluster_id"].to_numpy() != parents["cluster_id"].to_numpy()).all()
    assert (hn["template_id"].to_numpy() == parents["template_id"].to_numpy()).all()
    assert truth.groupby("cluster_id")["kind"].apply(lambda k: (k == "hard_negative").sum() <= 1).all()
    d = docs.set_index("id")
    assert (d.loc[hn["id"], "body"].to_numpy() != d.loc[hn["parent_id"], "body"].to_numpy()).all()


def test_render_is_a_function_of_plan_and_entities():
    import random

    ent = synth.entities(random.Random(1), "bn")
    assert synth.render(42, ent, "bn", True) == synth.render(42, ent, "bn", True)
    other = synth.entities(random.Random(2), "bn")
    assert synth.render(42, ent, "bn", True) != synth.render(42, other, "bn", True)
    assert "\u0985" <= synth.render(42, ent, "bn", False)[1][0] <= "\u09ff"
