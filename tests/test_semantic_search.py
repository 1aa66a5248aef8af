"""Stage 4's search modes (semantic.search): the index path against exact search, the window and
model-version rules under an index, the torch (GPU) code on CPU, and the configuration."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import numpy as np
import pytest

from newsdedup.config import AnnConfig, ConfigError, SemanticThresholds, load_config
from newsdedup.errors import UserError
from newsdedup.stages.semantic import ann
from newsdedup.stages.semantic import embeddings as emb
from newsdedup.stages.semantic import search

pytestmark = pytest.mark.skipif(not ann.available(), reason="FAISS not installed (extra: ann)")

H = 3600.0
WINDOW_S = 48 * H
THR = SemanticThresholds(0.9, 0.85)


def planted(n: int, dim: int, seed: int, span_h: float, pairs_every: int = 5):
    """n unit vectors (random, so mostly far apart) where every pairs_every-th row copies the one
    before at cosine ~0.97 some hours later; languages en and bn; ids 1000+row."""
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    ts = rng.uniform(0, span_h * H, n)
    for i in range(1, n, pairs_every):
        vecs[i] = vecs[i - 1] / np.linalg.norm(vecs[i - 1]) + 0.25 * rng.standard_normal(dim) / np.sqrt(dim)
        # One pair in five is 49-60h apart: close vectors the window must keep apart.
        ts[i] = ts[i - 1] + (rng.uniform(49, 60) if i % (5 * pairs_every) == 1 else rng.uniform(0, 30)) * H
    langs = np.where(rng.random(n) < 0.3, "bn", "en").astype(object)
    for i in range(3, n, 2 * pairs_every):
        # English pairs at cosine ~0.87: above the lowest threshold (0.85, en-bn), below en-en's 0.9.
        vecs[i] = vecs[i - 1] / np.linalg.norm(vecs[i - 1]) + 0.57 * rng.standard_normal(dim) / np.sqrt(dim)
        ts[i], langs[i - 1], langs[i] = ts[i - 1] + H, "en", "en"
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return np.arange(1000, 1000 + n), ts, langs, vecs


@pytest.mark.parametrize("ann_conf", [AnnConfig(index="ivf", nprobe=3), AnnConfig(index="hnsw", m=8, k=4)],
                         ids=["ivf", "hnsw"])
def test_index_finds_the_planted_pairs_exact_search_finds(ann_conf):
    ids, ts, langs, vecs = planted(600, 32, seed=1, span_h=60)
    both = np.ones(len(ids), bool)
    exact = search.block_pairs(ids, ts, langs, vecs, both, both, WINDOW_S, THR)
    got = search.candidate_pairs(ids, ts, langs, vecs, both, WINDOW_S, THR, ann_conf)
    assert len(exact) > 60                      # the planted pairs, each language pair's threshold applied
    assert {(a, b) for a, b, _ in got} == {(a, b) for a, b, _ in exact}
    assert dict(((a, b), s) for a, b, s in got) == pytest.approx(dict(((a, b), s) for a, b, s in exact), abs=1e-5)
    if ann_conf.index == "ivf":   # a real approximation: each query scans 3 of ~49 cells
        assert ann.cells(len(ids), ann_conf) > 10 * ann_conf.nprobe


def test_torch_code_path_on_cpu_returns_the_numpy_pairs():
    """The GPU path (torch products and masks) run on torch's CPU device: same pairs, same order."""
    pytest.importorskip("torch")
    ids, ts, langs, vecs = planted(300, 16, seed=2, span_h=100)
    both = np.ones(len(ids), bool)
    half = np.arange(len(ids)) % 2 == 0    # planted pairs are (even, odd) rows
    for a, b in ((both, both), (half, ~half)):
        expect = search.block_pairs(ids, ts, langs, vecs, a, b, WINDOW_S, THR, chunk=64)
        got = search.block_pairs(ids, ts, langs, vecs, a, b, WINDOW_S, THR, chunk=64, device="cpu")
        assert expect and [(x, y) for x, y, _ in got] == [(x, y) for x, y, _ in expect]
        assert [s for *_, s in got] == pytest.approx([s for *_, s in expect], abs=1e-6)


# ---------------------------------------------------------------- through Spark

T0 = 1_700_006_400        # a 48h bucket boundary
EMPTY_FACTS = {"numbers": [], "scores": [], "days": [], "names": []}
SCHEMA = ("id long, published_at timestamp, lang string, model_version string, embedding array<float>, "
          "facts struct<numbers:array<string>,scores:array<string>,days:array<string>,names:array<string>>")


def meta_rows(version: str = "m@1"):
    """Buckets 0 (6 docs), 1 (30), 2 (30), 3 (6) with planted pairs inside buckets, across every
    boundary (1h apart), one pair 48h + 1 min apart (never a pair) and one 47h apart across 1|2.
    With ann_min_bucket 20, buckets 1 and 2 get an index: indexed next to indexed and next to
    exact on both sides. Returns the rows and the id of the 48h01m pair's first document."""
    rng = np.random.default_rng(5)
    rows, dim = [], 16

    def add(i, t, v, lang="en"):
        v = np.asarray(v, np.float32)
        rows.append((i, datetime.fromtimestamp(T0 + t, timezone.utc), lang, version,
                     (v / np.linalg.norm(v)).tolist(), EMPTY_FACTS))

    def near(v):
        return v + 0.2 * rng.standard_normal(dim) / np.sqrt(dim)

    i = 0
    for bucket, n in ((0, 6), (1, 30), (2, 30), (3, 6)):
        for _ in range(n // 2):
            v = rng.standard_normal(dim)
            t = bucket * WINDOW_S + rng.uniform(0, 40 * H)
            add(i, t, v)
            add(i + 1, t + rng.uniform(0, 6 * H), near(v), lang="bn" if i % 4 == 0 else "en")
            i += 2
    late = i + 6
    for t1, t2 in [(k * WINDOW_S - 0.5 * H, k * WINDOW_S + 0.5 * H) for k in (1, 2, 3)] + [
            (WINDOW_S + 10 * H, 2 * WINDOW_S + 10 * H + 60),      # 48h01m apart: never compared
            (2 * WINDOW_S - 40 * H, 2 * WINDOW_S + 7 * H)]:      # 47h apart across 1|2
        v = rng.standard_normal(dim)
        add(i, t1, v)
        add(i + 1, t2, near(v))
        i += 2
    return rows, late


def test_index_path_keeps_the_window_rule_and_finds_what_exact_finds(spark):
    rows, late = meta_rows()
    ids = np.array([r[0] for r in rows])
    ts = np.array([r[1].timestamp() for r in rows])
    langs = np.array([r[2] for r in rows], dtype=object)
    vecs = np.array([r[4] for r in rows], dtype=np.float32)
    both = np.ones(len(rows), bool)
    # Ground truth: every pair of the whole set within the window, by the exact code in one block.
    exact = {(a, b): round(s, 5) for a, b, s in search.block_pairs(ids, ts, langs, vecs, both, both, WINDOW_S, THR)}
    assert all((late - k, late - k + 1) in exact for k in (6, 4, 2)) and (late + 2, late + 3) in exact
    assert (late, late + 1) not in exact and len(exact) == 40
    sem = load_config(overrides={"semantic": {"search": {"ann_min_bucket": 20, "ann": {"nprobe": 2}},
                                              "evidence": {"enabled": False}}}).semantic
    found = search.semantic_edges(spark.createDataFrame(rows, SCHEMA), sem, THR, gpu=False)
    assert found.indexed == 2 and found.tasks > 2
    got = {(r.a, r.b): round(r.score, 5) for r in found.edges.collect()}
    assert got == exact


def test_index_path_still_refuses_vectors_of_two_model_versions(spark):
    rows, _ = meta_rows()
    other = [r[:3] + ("m@2",) + r[4:] for r in rows[:3]]
    meta = spark.createDataFrame(rows[3:] + other, SCHEMA)
    sem = load_config(overrides={"semantic": {"search": {"mode": "ann"}}}).semantic
    with pytest.raises(emb.ModelVersionMismatch, match="different model versions"):
        search.semantic_edges(meta, sem, THR, gpu=False)


# ---------------------------------------------------------------- choosing and configuring

def test_auto_chooses_exact_on_a_gpu_and_falls_back_to_exact_without_faiss():
    conf = load_config(overrides={"semantic": {"search": {"ann_min_bucket": 100}}}).semantic.search
    counts = {0: 50, 1: 150, 2: 100}
    assert search.choose(counts, conf, gpu=False, have_index=True).indexed == {1, 2}
    on_gpu = search.choose(counts, conf, gpu=True, have_index=True)
    assert on_gpu.indexed == frozenset() and on_gpu.device == "gpu"
    missing = search.choose(counts, conf, gpu=False, have_index=False)
    assert missing.indexed == frozenset() and "FAISS is not installed" in missing.notes[0]
    with pytest.raises(UserError, match="needs FAISS"):
        search.choose(counts, dataclasses.replace(conf, mode="ann"), gpu=False, have_index=False)


@pytest.mark.parametrize("override, message", [
    ({"mode": "fast"}, "semantic.search.mode='fast': expected 'auto' or 'exact' or 'ann'"),
    ({"ann_min_bucket": 0}, "semantic.search.ann_min_bucket=0"),
    ({"device": "gpu"}, "semantic.search.device='gpu'"),
    ({"ann": {"index": "lsh"}}, "semantic.search.ann.index='lsh'"),
    ({"ann": {"nprobe": 0}}, "semantic.search.ann.nprobe=0"),
    ({"ann": {"margin": -0.1}}, "semantic.search.ann.margin=-0.1"),
    ({"ann": {"ef": 5}}, "semantic.search.ann.ef: unknown key"),
])
def test_search_config_is_validated(override, message):
    with pytest.raises(ConfigError) as err:
        load_config(overrides={"semantic": {"search": override}})
    assert message in str(err.value)
