"""Model loading, device choice, encoding and the in-bucket pair search; real all-MiniLM-L6-v2, no Spark."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from newsdedup.stages.semantic import embeddings as emb
from newsdedup.config import ConfigError, SemanticConfig, load_config
from newsdedup.config import SemanticThresholds
from newsdedup.stages.semantic.search import block_pairs, block_plan

from semantic_data import MODEL_DIR, SEM_CONF, VERSION, text

H = 3600.0


@pytest.fixture(scope="module")
def model():
    return emb.model_for(SEM_CONF)


def test_model_is_loaded_once_per_process(model):
    assert emb.model_for(SEM_CONF) is model
    assert emb.embedding_dim(model) == 384


def test_encode_returns_unit_vectors_and_refuses_empty_text(model):
    vecs = emb.encode(model, [text("metro_a"), text("flood")], batch_size=2)
    assert vecs.shape == (2, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="empty text"):
        emb.encode(model, ["fine", "  "])


def test_similarity_scale_of_the_test_model(model):
    """What the stage-4 tests rely on, measured: paraphrases score high, another game lower,
    but a rematch of the same teams a week later scores as high as a paraphrase, so only the
    48-hour window keeps it apart."""
    keys = ["metro_a", "metro_b", "derby", "derby_other_outlet", "other_game", "derby_rematch"]
    v = dict(zip(keys, emb.encode(model, [text(k) for k in keys])))
    cos = lambda a, b: float(v[a] @ v[b])  # noqa: E731
    assert cos("metro_a", "metro_b") > 0.80
    assert cos("derby", "derby_other_outlet") > 0.80
    assert cos("derby", "other_game") < 0.70
    assert cos("derby", "derby_rematch") > 0.80


def test_model_version_from_conf_or_name_and_revision():
    assert emb.model_version(SemanticConfig(model="BAAI/bge-m3", model_version="bge-m3@v2")) == "bge-m3@v2"
    assert emb.model_version(SemanticConfig(model="BAAI/bge-m3", revision="abc123")) == "BAAI/bge-m3@abc123"
    assert emb.model_version(SemanticConfig(model="BAAI/bge-m3")) == "BAAI/bge-m3@unpinned"
    assert emb.model_version(SemanticConfig(model=MODEL_DIR)) == "model@unpinned"


def test_device_choice():
    assert emb.pick_device("cpu") == "cpu"
    import torch

    if torch.cuda.is_available():
        assert emb.pick_device("auto", ("1",)) == "cuda:1"
    else:
        assert emb.pick_device("auto", ("0",)) == "cpu"
        with pytest.raises(emb.EmbeddingConfigError, match="CUDA is not available"):
            emb.pick_device("cuda")
    with pytest.raises(emb.EmbeddingConfigError, match="expected one of"):
        emb.pick_device("tpu")


def test_offline_unknown_model_name_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(emb.EmbeddingConfigError, match="neither a local directory"):
        emb.load_model("no-such-model-dir", "cpu")


def test_versions_must_match():
    assert emb.require_same_version([VERSION, VERSION]) == VERSION
    with pytest.raises(emb.ModelVersionMismatch, match="different model versions"):
        emb.require_same_version([VERSION, "BAAI/bge-m3@unpinned"])


def test_bad_thresholds_are_refused():
    with pytest.raises(ConfigError, match="thresholds.same_language"):
        load_config(overrides={"semantic": {"thresholds": {"same_language": 1.5}}})


def _unit(*rows):
    m = np.array(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_block_pairs_respects_window_and_scores_each_pair_once():
    ids = np.array([1, 2, 3, 4])
    ts = np.array([0.0, 47 * H, 49 * H, 10 * H])
    langs = np.array(["en"] * 4, dtype=object)
    vecs = _unit([1, 0], [1, 0.01], [1, 0.02], [1, 0.03])
    both = np.ones(4, bool)
    pairs = block_pairs(ids, ts, langs, vecs, both, both, 48 * H, SemanticThresholds(0.9, 0.9), chunk=1)
    got = {(a, b) for a, b, _ in pairs}
    # all pairs but (1,3), which is 49h apart; earlier document first
    assert got == {(1, 4), (1, 2), (4, 2), (4, 3), (2, 3)}
    assert len(pairs) == len(got)
    assert all(0.9 <= s <= 1.0 for _, _, s in pairs)
    # Two different blocks: only pairs across them.
    side_a, side_b = np.array([True, True, False, False]), np.array([False, False, True, True])
    assert {(a, b) for a, b, _ in block_pairs(ids, ts, langs, vecs, side_a, side_b, 48 * H, SemanticThresholds(0.9, 0.9))} == \
        {(1, 4), (4, 2), (2, 3)}


def test_block_pairs_uses_the_cross_language_threshold_or_never_crosses():
    ids, ts, both = np.array([1, 2]), np.array([0.0, H]), np.array([True, True])
    vecs = _unit([1, 0], [0.8, 0.6])  # cosine 0.8
    bn_en, en_en = np.array(["bn", "en"], dtype=object), np.array(["en", "en"], dtype=object)
    assert block_pairs(ids, ts, bn_en, vecs, both, both, 48 * H, SemanticThresholds(0.9, 0.75))
    assert not block_pairs(ids, ts, en_en, vecs, both, both, 48 * H, SemanticThresholds(0.9, 0.75))
    # A model that does not compare across languages: no bn-en pair at any score.
    assert not block_pairs(ids, ts, bn_en, _unit([1, 0], [1, 0]), both, both, 48 * H, SemanticThresholds(0.5, None))


def test_block_pairs_applies_each_language_pairs_own_threshold():
    ids, ts, both = np.array([1, 2, 3, 4]), np.array([0.0, H, 2 * H, 3 * H]), np.ones(4, bool)
    vecs = _unit([1, 0], [0.8, 0.6], [1, 0], [0.8, 0.6])  # cosine 0.8 within each language, 1.0 or 0.8 across
    langs = np.array(["en", "en", "bn", "bn"], dtype=object)
    thr = SemanticThresholds(0.9, 0.95, pairs={"bn-bn": 0.75})
    # en-en at 0.8 stays below 0.9; bn-bn at 0.8 passes its own 0.75; en-bn only where the cosine is 1.0.
    assert {(a, b) for a, b, _ in block_pairs(ids, ts, langs, vecs, both, both, 48 * H, thr)} == {(3, 4), (1, 3), (2, 4)}
    assert thr.for_pair("bn", "en") == thr.for_pair("en", "bn") == 0.95


def test_block_plan_covers_every_pair_of_blocks_exactly_once():
    """Buckets 0 (5 docs), 1 (3 docs), 3 (1 doc) in blocks of 2: every block meets every block of its
    own bucket and of the previous one, once; a block never meets a bucket two away."""
    plan = block_plan({0: 5, 1: 3, 3: 1}, block_size=2)
    tasks: dict[int, dict[str, set]] = {}
    for task, bucket, block, a, b in plan:
        t = tasks.setdefault(task, {"a": set(), "b": set()})
        if a:
            t["a"].add((bucket, block))
        if b:
            t["b"].add((bucket, block))
    met = [frozenset(t["a"] | t["b"]) for t in tasks.values()]
    assert len(met) == len(set(met))
    blocks = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (3, 0)]
    expected = {frozenset({x, y}) for x in blocks for y in blocks
                if x <= y and abs(x[0] - y[0]) <= 1}
    assert set(met) == expected
    assert all(len(t["a"]) == 1 and len(t["b"]) == 1 for t in tasks.values())


def test_fallback_to_the_packaged_model_with_its_calibrated_thresholds(tmp_path):
    default = load_config().semantic  # BAAI/bge-m3, absent here (HF_HUB_OFFLINE, empty hub cache)
    assert not emb.weights_present("BAAI/bge-m3")
    # On a CPU run (no GPU here, none asked of Spark) backend auto is onnx-int8: its own version,
    # found under the model's entry, with its own calibrated threshold and the entry's 128 tokens.
    model = emb.resolve(default)
    assert model.fallback and model.version == VERSION + "+onnx-int8" and model.spec_key == "all-MiniLM-L6-v2"
    assert model.sem.backend == "onnx-int8" and model.sem.max_seq_length == 128
    assert model.spec.languages == ["en"] and model.cross_threshold() is None
    assert model.thresholds_source == "calibrated" and model.thresholds.same_language == pytest.approx(0.85)
    assert f"model_version={VERSION}+onnx-int8" in model.describe()
    torch_run = emb.resolve(dataclasses.replace(default, backend="torch"))
    assert torch_run.version == VERSION and torch_run.thresholds.same_language == pytest.approx(0.835)
    # A GPU run stays on torch (and so on the fp32 version tag).
    assert emb.resolve(default, gpu=True).version == VERSION
    # BGE-M3 weights present (a local directory named like the model): it runs, en+bn, across languages.
    bge = tmp_path / "bge-m3"
    bge.mkdir()
    model = emb.resolve(load_config(overrides={"semantic": {"model": str(bge)}}).semantic)
    assert not model.fallback and model.version == "bge-m3@unpinned+onnx-int8" and model.spec_key == "BAAI/bge-m3"
    assert model.spec.languages == ["en", "bn"] and model.cross_threshold() == pytest.approx(0.80)
    assert model.thresholds_source == "explicit (not calibrated)" and model.sem.max_seq_length == 512
    # An explicit tag gets the suffix once, and the suffixed tag still finds its entry.
    tagged = emb.resolve(load_config(overrides={"semantic": {"model": str(bge), "model_version": "bge-m3@v2+onnx-int8"}}
                                     ).semantic)
    assert tagged.version == "bge-m3@v2+onnx-int8" and tagged.spec_key == "BAAI/bge-m3"


def test_a_model_version_without_calibrated_thresholds_is_refused_unless_given(capsys, tmp_path):
    sem = {"model": MODEL_DIR, "model_version": "all-MiniLM-L6-v2@retrained", "thresholds": None}
    with pytest.raises(emb.ThresholdsMissing, match=r"'all-MiniLM-L6-v2@retrained(\+onnx-int8)?' has no calibrated thresholds"):
        emb.resolve(load_config(overrides={"semantic": sem}).semantic)
    explicit = emb.resolve(load_config(overrides={"semantic": {**sem, "thresholds": {"same_language": 0.7}}}).semantic)
    assert explicit.thresholds.same_language == 0.7 and explicit.thresholds_source == "explicit"
    # The packaged model's weights under another tag are still all-MiniLM-L6-v2 (found by path) ...
    assert emb.resolve(load_config(overrides={"semantic": {**sem, "model_version": "e5@1"}}).semantic,
                       with_thresholds=False).spec_key == "all-MiniLM-L6-v2"
    # ... an unknown model must declare its languages first.
    (tmp_path / "e5-small").mkdir()
    with pytest.raises(ConfigError, match=r"semantic.models: no entry for model_version 'e5-small@unpinned(\+onnx-int8)?'"):
        emb.resolve(load_config(overrides={"semantic": {"model": str(tmp_path / "e5-small")}}).semantic)
    # The command line: one line, exit code 2, before any Spark work (the input does not even exist).
    bad = tmp_path / "c.yaml"
    bad.write_text(f"semantic:\n  model: {MODEL_DIR}\n  model_version: all-MiniLM-L6-v2@retrained\n")
    from newsdedup import cli

    code = cli.main(["run", "--input", str(tmp_path / "missing"), "--output", str(tmp_path / "o"), "--conf", str(bad)])
    assert code == 2 and "has no calibrated thresholds" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- encoding: batches, dtype, backends

def test_token_budget_batches_longest_first_and_cover_every_text_once():
    lengths = np.array([10, 500, 40, 500, 7, 120, 300])
    batches = emb.plan_batches(lengths, batch_size=3, batch_tokens=1000)
    assert sorted(int(i) for b in batches for i in b) == list(range(7))
    for b in batches:
        assert len(b) <= 3 and (len(b) == 1 or len(b) * lengths[b].max() <= 1000)
    assert [list(lengths[b]) for b in batches] == [[500, 500], [300, 120, 40], [10, 7]]
    assert [len(b) for b in emb.plan_batches(np.array([900, 800]), 8, 100)] == [1, 1]  # one text over budget


def test_encode_restores_the_input_order_whatever_the_batching(model):
    """Texts of very different lengths, tiny token budgets: every row is its own text's vector."""
    keys = ["flood", "metro_a", "derby_rematch", "bn_metro", "other_game", "metro_b"]
    texts = [text(k)[: 40 + 60 * i] for i, k in enumerate(keys)]
    ref = np.stack([emb.encode(model, [t])[0] for t in texts])          # one at a time: no batching at all
    for batch_size, budget in ((2, 64), (16, 100000), (3, 300)):
        vecs = emb.encode(model, texts, batch_size, budget)
        assert np.allclose(vecs, ref, atol=1e-5), (batch_size, budget)
    # and what sentence-transformers' own encode gives
    st = model.st.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert np.min(np.sum(st * ref, axis=1)) > 0.99999


def test_dtype_auto_is_bf16_on_cuda_fp32_on_cpu_and_bf16_vectors_stay_close():
    assert emb.resolve_dtype("auto", "cuda:0") == "bf16" and emb.resolve_dtype("auto", "cpu") == "fp32"
    assert emb.resolve_dtype("fp16", "cuda") == "fp16" and emb.resolve_dtype("auto", "cpu", "onnx-int8") == "fp32"
    with pytest.raises(emb.EmbeddingConfigError, match="needs backend torch"):
        emb.resolve_dtype("bf16", "cpu", "onnx")
    # The low-precision path (what CUDA runs), exercised on CPU: the weights really are bf16.
    low = emb.load_model(MODEL_DIR, "cpu", max_seq_length=128, dtype="bf16")
    full = emb.load_model(MODEL_DIR, "cpu", max_seq_length=128, dtype="fp32")
    assert next(low.st.parameters()).dtype.__str__() == "torch.bfloat16" and low.dtype == "bf16"
    texts = [text(k) for k in ("metro_a", "derby", "flood")]
    a, b = emb.encode(low, texts), emb.encode(full, texts)
    assert a.dtype == np.float32 and np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cos = np.sum(a * b, axis=1)
    assert cos.min() > 0.99 and not np.allclose(a, b, atol=1e-6)


def test_onnx_int8_backend_is_exported_once_and_close_to_fp32(tmp_path, monkeypatch):
    texts = [text(k) for k in ("metro_a", "metro_b", "derby", "other_game", "flood")]
    ref = emb.encode(emb.load_model(MODEL_DIR, "cpu", max_seq_length=128), texts)
    int8 = emb.load_model(MODEL_DIR, "cpu", max_seq_length=128, backend="onnx-int8", cache_dir=str(tmp_path),
                          cpu_threads=1)
    assert int8.session is not None and int8.onnx_path.startswith(str(tmp_path / "onnx"))
    vecs = emb.encode(int8, texts)
    cos = np.sum(vecs * ref, axis=1)
    assert cos.min() > 0.98 and not np.allclose(vecs, ref, atol=1e-4)   # close to fp32, but other vectors
    fp32 = emb.load_model(MODEL_DIR, "cpu", max_seq_length=128, backend="onnx", cache_dir=str(tmp_path))
    assert np.allclose(emb.encode(fp32, texts), ref, atol=1e-4)
    # Another process (the per-process cache emptied) reuses the export instead of exporting again.
    monkeypatch.setattr(emb, "_MODELS", {})
    monkeypatch.setattr(emb, "_export", lambda *a: pytest.fail("exported twice"))
    again = emb.load_model(MODEL_DIR, "cpu", max_seq_length=128, backend="onnx-int8", cache_dir=str(tmp_path))
    assert again.onnx_path == int8.onnx_path and np.allclose(emb.encode(again, texts), vecs, atol=1e-6)


def test_backend_auto_and_versions():
    cpu = SemanticConfig(model=MODEL_DIR, device="cpu")
    assert emb.backend_for(cpu) == "onnx-int8" and emb.backend_for(dataclasses.replace(cpu, device="cuda")) == "torch"
    assert emb.backend_for(dataclasses.replace(cpu, device="auto"), gpu=True) == "torch"
    assert emb.backend_for(dataclasses.replace(cpu, backend="onnx")) == "onnx"
    assert emb.with_backend("m@1", "onnx-int8") == "m@1+onnx-int8" == emb.with_backend("m@1+onnx-int8", "onnx-int8")
    assert emb.with_backend("m@1", "torch") == "m@1"
    sem = load_config().semantic
    assert sem.model_spec("bge-m3@v2+onnx-int8")[0] == "BAAI/bge-m3" == sem.model_spec("bge-m3+onnx-int8")[0]
    assert sem.model_spec("all-MiniLM-L6-v2@gt-0.1.0+onnx")[0] == "all-MiniLM-L6-v2"
    with pytest.raises(ConfigError, match="semantic.backend"):
        load_config(overrides={"semantic": {"backend": "tensorrt"}})


def test_an_int8_vector_does_not_depend_on_the_other_texts_of_its_batch(tmp_path):
    """Dynamic int8 quantisation scales activations per batch: batched, one text's vector moved with its
    batch-mates. The int8 backend embeds one text per pass, so the vector is a function of the text."""
    sem = load_config(overrides={"semantic": {"model": MODEL_DIR, "model_version": VERSION, "backend": "onnx-int8",
                                              "device": "cpu", "cache_dir": str(tmp_path)}}).semantic
    model = emb.model_for(emb.resolve(sem).sem)
    alone = emb.encode(model, [text("derby")], batch_size=32)
    others = [text(k) for k in ("metro_a", "flood", "derby_rematch", "other_game")]
    batched = emb.encode(model, others + [text("derby")], batch_size=32)
    assert np.array_equal(alone[0], batched[-1])
