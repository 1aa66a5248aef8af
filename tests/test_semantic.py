"""Stage 4 on real Spark + Delta with the real all-MiniLM-L6-v2 model (HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import math

import pytest
from pyspark.sql import functions as F

from newsdedup.config import SemanticThresholds
from newsdedup.stages.semantic import embeddings as emb
from newsdedup import cli
from newsdedup.io import store
from newsdedup.stages import StageContext
from newsdedup.stages.semantic import search as semantic_search
from newsdedup.stages.semantic import step as semantic
from newsdedup.report import RunReport as Report, StepReport

from semantic_data import ARTICLES, DOC_SCHEMA, SEM, SEM_CONF, T0, VERSION, doc, text

WINDOW_H = 48
# The first bucket boundary after T0, to place a pair on both sides of it.
_W = WINDOW_H * 3600
BOUNDARY_H = (math.ceil(T0.timestamp() / _W) * _W - T0.timestamp()) / 3600


def conf_with(conf, **sem):
    return conf.with_overrides({"semantic": {**SEM, **sem}})


@pytest.fixture(scope="module")
def archive(spark):
    rows = [
        doc(1, "metro_a", BOUNDARY_H - 1),
        doc(2, "metro_b", BOUNDARY_H + 46),           # 47h later, in the next time bucket
        doc(3, "derby", 0),
        doc(4, "derby_other_outlet", 3),              # same game, another outlet
        doc(5, "other_game", 24),                     # another game, next day: hard negative
        doc(6, "derby_rematch", 7 * 24),              # same teams a week later: outside the window
        doc(7, "flood", 5),
        doc(8, "flood", 5 + 48 + 1 / 60),             # the same text 48h01m later: never compared
        (9, T0, "en", "  ", "\n", "outlet"),          # nothing to embed
    ]
    return spark.createDataFrame(rows, DOC_SCHEMA)


def run_stage(spark, docs, conf, output):
    ctx = StageContext(spark, conf, "test", archive=docs, output=output)
    result = semantic.SemanticStage().run(ctx, docs.select("id", "published_at", "lang"))
    report = Report(run_id="test")
    report.add(StepReport(result.counts, result.seconds, result.notes))
    links = result.links
    return {(r.duplicate_id, r.canonical_id): r for r in links.collect()}, report


@pytest.fixture(scope="module")
def first_run(spark, conf, archive, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("semantic"))
    links, report = run_stage(spark, archive, conf_with(conf), out)
    return out, links, report


def test_stage_links_paraphrases_and_keeps_hard_negatives_apart(first_run, spark):
    out, links, report = first_run
    assert set(links) == {(2, 1), (4, 3)}
    assert all(r.stage == "semantic" and 0.8 <= r.score <= 1.0 for r in links.values())
    assert report.counts["semantic.no_text"] == 1
    assert report.counts["semantic.embedded"] == 8
    assert report.counts["semantic.language_not_covered"] == 0
    assert any(f"model_version={VERSION}" in n for n in report.notes)
    assert any("without body text" in n for n in report.notes)

    stored = store.read(spark, out, "embeddings")
    assert stored.count() == 8
    assert {r[0] for r in stored.select("model_version").distinct().collect()} == {VERSION}
    assert stored.select(F.size("embedding")).distinct().first()[0] == 384


def test_small_blocks_find_the_same_links_and_nothing_is_stored_without_output(first_run, spark, conf, archive):
    """Blocks of 2 documents: the buckets are compared block against block, none is skipped."""
    links, report = run_stage(spark, archive, conf_with(conf, block_size=2), None)
    assert set(links) == set(first_run[1])
    assert report.counts["semantic.embedded"] == 8
    assert report.counts["semantic.search_tasks"] > report.counts["semantic.embedded"] // 2


def test_rerun_reuses_stored_vectors(first_run, spark, conf, archive):
    out, links, _ = first_run
    again, report = run_stage(spark, archive, conf_with(conf), out)
    assert set(again) == set(links)
    assert report.counts["semantic.embedded"] == 0 and report.counts["semantic.reused_vectors"] == 8


def test_window_threshold_and_evidence_all_matter(first_run, spark, conf, archive):
    """Widen the window and turn the evidence off, and the rematch (1-0, a week later) joins the
    derby (2-1): the threshold alone is not enough. With the evidence on, the scores keep it apart."""
    wide, _ = run_stage(spark, archive, conf_with(conf, window_hours=24 * 8, evidence={"enabled": False}),
                        first_run[0])
    assert (6, 3) in wide and (8, 7) in wide
    assert 5 not in {d for d, _ in wide}  # another game stays apart on score alone
    guarded, report = run_stage(spark, archive, conf_with(conf, window_hours=24 * 8), first_run[0])
    assert (8, 7) in guarded and 6 not in {d for d, _ in guarded}
    assert report.counts["semantic.refused.scores_differ"] >= 1
    # Every refusal is kept with its reason and cosine, and stats counts them.
    refused = {(r.a, r.b): r for r in store.read(spark, first_run[0], "semantic_refusals").collect()}
    assert refused[(3, 6)].reason == "scores_differ" and refused[(3, 6)].lang_pair == "en-en"
    assert refused[(3, 6)].score >= 0.8 and refused[(3, 6)].run_id == "test"
    assert sum(r.reason == "scores_differ" for r in refused.values()) == report.counts["semantic.refused.scores_differ"]
    from newsdedup.ops import stats

    counted = stats.delta_refusals(spark, first_run[0], stats.Filter(stage="semantic"))
    assert sum(r["pairs"] for r in counted if r["reason"] == "scores_differ") == \
        report.counts["semantic.refused.scores_differ"]
    assert "scores_differ" in stats.format_refusals(counted)
    assert stats.delta_refusals(spark, first_run[0], stats.Filter(stage="simhash")) == []


def test_undated_documents_are_counted_and_a_changed_text_is_embedded_again(spark, conf, tmp_path):
    import numpy as np

    out = str(tmp_path / "out")
    title, body = ARTICLES["derby"]
    undated = (3, None, "en", title, body, "outlet")           # no time window: never compared
    rows = [doc(1, "metro_a", 0), doc(2, "metro_b", 4), undated]
    links, report = run_stage(spark, spark.createDataFrame(rows, DOC_SCHEMA), conf_with(conf), out)
    assert set(links) == {(2, 1)}
    assert report.counts["semantic.no_published_at"] == 1 and report.counts["semantic.no_text"] == 0
    assert report.counts["semantic.embedded"] == 2
    assert any("1 document(s) without published_at" in n for n in report.notes)
    first = {r.id: r for r in store.read(spark, out, "embeddings").collect()}
    assert set(first) == {1, 2}

    # 2's text is corrected (now the flood report): its vector is computed again, 1's is reused.
    rows = [doc(1, "metro_a", 0), doc(2, "flood", 4), undated]
    links, report = run_stage(spark, spark.createDataFrame(rows, DOC_SCHEMA), conf_with(conf), out)
    assert links == {}
    assert (report.counts["semantic.embedded"], report.counts["semantic.reused_vectors"]) == (1, 1)
    second = {r.id: r for r in store.read(spark, out, "embeddings").collect()}
    assert set(second) == {1, 2}
    assert second[1].text_hash == first[1].text_hash and second[1].embedding == first[1].embedding
    assert second[2].text_hash != first[2].text_hash
    (flood,) = emb.encode(emb.model_for(SEM_CONF), [text("flood")])
    assert float(np.dot(np.array(second[2].embedding), flood)) == pytest.approx(1.0, abs=1e-4)


def test_vectors_of_different_model_versions_are_never_compared(spark):
    meta = spark.createDataFrame(
        [(1, T0, "en", VERSION, [1.0, 0.0]), (2, T0, "en", "BAAI/bge-m3@unpinned", [1.0, 0.0])],
        "id long, published_at timestamp, lang string, model_version string, embedding array<float>")
    with pytest.raises(emb.ModelVersionMismatch, match="different model versions"):
        semantic_search.semantic_edges(meta, SEM_CONF, SemanticThresholds(0.8))


def test_backfill_embeds_only_what_lacks_a_vector_of_the_new_version(spark, conf, tmp_path, capsys):
    out = str(tmp_path)
    rows = [doc(1, "metro_a", 0), doc(2, "flood", 10), doc(3, "derby", 20), (4, T0, "en", None, " ", "x")]
    store.merge_documents(spark, spark.createDataFrame(rows, DOC_SCHEMA), store.table_path(out, "documents"))
    path = semantic.embeddings_path(out)
    old = spark.createDataFrame([(1, "old@1", "h", [0.6, 0.8], T0), (2, "old@1", "h", [1.0, 0.0], T0)],
                                semantic.EMBEDDINGS_SCHEMA)
    semantic.merge_embeddings(spark, old, path)
    c = conf_with(conf)
    # Document 2 already has a vector of the new version (from a stage-4 run, say).
    texts = semantic.with_text(store.read(spark, out, "documents").where("id = 2"), 4000)
    semantic.merge_embeddings(spark, semantic.embed(texts, c.semantic, VERSION), path)
    before = {(r.id, r.model_version): (r.embedding, r.embedded_at) for r in store.read(spark, out, "embeddings").collect()}

    first = semantic.backfill(spark, out, c.semantic, limit=1)
    assert first == {"model_version": VERSION, "embedded": 1, "remaining": 1, "no_text": 1}
    second = semantic.backfill(spark, out, c.semantic, limit=1)
    assert second["embedded"] == 1 and second["remaining"] == 0
    assert semantic.backfill(spark, out, c.semantic, limit=1)["embedded"] == 0

    after = {(r.id, r.model_version): (r.embedding, r.embedded_at) for r in store.read(spark, out, "embeddings").collect()}
    assert set(after) == set(before) | {(1, VERSION), (3, VERSION)}  # newest first: 3, then 1
    for key in before:  # other versions and existing vectors untouched
        assert after[key] == before[key]

    # The command line: a new version starts from nothing and leaves the others alone.
    assert cli.main(["embed-backfill", "--output", out, "--model", SEM["model"], "--model-version", "cli@1",
                     "--device", "cpu", "--limit", "10"]) == 0
    # The default conf on CPU runs onnx-int8: the explicit tag gets its backend suffix.
    assert "model_version=cli@1+onnx-int8 embedded=3 remaining=0 no_text=1" in capsys.readouterr().out
    versions = store.read(spark, out, "embeddings").groupBy("model_version").count().collect()
    assert {r["model_version"]: r["count"] for r in versions} == {"old@1": 2, VERSION: 3, "cli@1+onnx-int8": 3}


def _tiny_conf(conf, model_dir, tmp_path, same, across, **sem):
    """Stage 4 with the tiny BGE-M3-kind model: its semantic.models entry covers en and bn, compares across
    them, and carries the (explicit) thresholds."""
    models = {"bge-m3-tiny": {"languages": ["en", "bn"], "cross_language": True,
                              "thresholds": {"same_language": same, "cross_language": across}}}
    return conf_with(conf, model=model_dir, model_version="bge-m3-tiny@test", max_seq_length=128,
                     evidence={"enabled": False}, models=models, thresholds=None, cache_dir=str(tmp_path / "cache"),
                     **sem)


@pytest.fixture(scope="module")
def bilingual(spark):
    """metro_a (en), its Bangla version an hour later, metro_b (en, reworded) two hours later."""
    return spark.createDataFrame([doc(1, "metro_a", 0), doc(2, "bn_metro", 1, lang="bn"), doc(3, "metro_b", 2)],
                                 DOC_SCHEMA)


def test_bge_m3_kind_model_embeds_bangla_and_stores_its_version(spark, conf, tiny_bge_m3, bilingual, tmp_path):
    """The BGE-M3 path (XLM-R, CLS pooling) through Spark with the default backend: Bangla is covered, the
    vectors are stored under the run's version (on CPU the int8 one), and en-bn pairs are compared."""
    c = _tiny_conf(conf, tiny_bge_m3, tmp_path, -1.0, -1.0, backend="auto")
    resolved = emb.resolve(c.semantic)
    version = resolved.version
    import torch
    assert version == ("bge-m3-tiny@test" if torch.cuda.is_available() else "bge-m3-tiny@test+onnx-int8")
    assert resolved.spec_key == "bge-m3-tiny" and resolved.thresholds_source == "explicit (not calibrated)"
    out = str(tmp_path / "out")
    links, report = run_stage(spark, bilingual, c, out)
    assert report.counts["semantic.language_not_covered"] == 0 and report.counts["semantic.embedded"] == 3
    assert report.counts["semantic.pairs.en-bn"] == 2 and report.counts["semantic.pairs.en-en"] == 1
    stored = store.read(spark, out, "embeddings")
    assert {r[0] for r in stored.select("model_version").distinct().collect()} == {version}
    assert stored.count() == 3 and stored.select(F.size("embedding")).distinct().first()[0] == 64
    assert set(links) == {(2, 1), (3, 1)}
    # The fp32 torch backend is another version: its run re-embeds and stores beside, never mixing.
    _, again = run_stage(spark, bilingual, _tiny_conf(conf, tiny_bge_m3, tmp_path, -1.0, -1.0, backend="torch"), out)
    if version != "bge-m3-tiny@test":
        assert again.counts["semantic.embedded"] == 3 and again.counts["semantic.reused_vectors"] == 0
        versions = store.read(spark, out, "embeddings").groupBy("model_version").count().collect()
        assert {r[0]: r[1] for r in versions} == {version: 3, "bge-m3-tiny@test": 3}


def test_thresholds_apply_per_language_pair(spark, conf, tiny_bge_m3, bilingual, tmp_path):
    """Thresholds set between the measured cosines: a cross-language threshold below the en-bn cosines and a
    same-language one above the en-en cosine link only the Bangla copy, and the other way round only the
    English one. The counters say which language pairs were found."""
    c = _tiny_conf(conf, tiny_bge_m3, tmp_path, 0.9, 0.9, backend="torch")
    from semantic_data import text
    v = emb.encode(emb.model_for(c.semantic), [text("metro_a"), text("bn_metro"), text("metro_b")])
    en_en, cross = float(v[0] @ v[2]), sorted([float(v[0] @ v[1]), float(v[1] @ v[2])])
    gap = 0.5 * min(abs(en_en - cross[0]), abs(en_en - cross[1]), 0.02)
    assert gap > 1e-4, (en_en, cross)     # the tiny model spreads texts apart (tests/tiny_models.py)

    def run(same, across):
        return run_stage(spark, bilingual, _tiny_conf(conf, tiny_bge_m3, tmp_path, same, across, backend="torch"),
                         None)

    cross_only, report = run(same=en_en + gap, across=cross[0] - gap)
    assert set(cross_only) == {(2, 1)}            # 3-2 passes too, but 2 is a duplicate: 3 stays canonical
    assert report.counts["semantic.pairs.en-bn"] == 2 and report.counts["semantic.pairs.en-en"] == 0
    same_only, report = run(same=en_en - gap, across=cross[1] + gap)
    assert set(same_only) == {(3, 1)}
    assert report.counts["semantic.pairs.en-en"] == 1 and report.counts["semantic.pairs.en-bn"] == 0
