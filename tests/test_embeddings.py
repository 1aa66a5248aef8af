"""Model loading, device choice, encoding and the in-bucket pair search; real all-MiniLM-L6-v2, no Spark."""

from __future__ import annotations

import numpy as np
import pytest

from newsdedup.stages import embeddings as emb
from newsdedup.config import ConfigError, SemanticConfig, load_config
from newsdedup.stages.semantic import window_pairs

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


def test_window_pairs_respects_window_and_scores_each_pair_once():
    ids = np.array([1, 2, 3, 4])
    ts = np.array([0.0, 47 * H, 49 * H, 10 * H])
    langs = np.array(["en"] * 4, dtype=object)
    home = np.array([True, True, True, False])  # 4 is a guest from the previous bucket
    vecs = _unit([1, 0], [1, 0.01], [1, 0.02], [1, 0.03])
    pairs = window_pairs(ids, ts, langs, home, vecs, 48 * H, 0.9, 0.9, chunk=1)
    got = {(a, b) for a, b, _ in pairs}
    # all pairs but (1,3), which is 49h apart
    assert got == {(1, 4), (1, 2), (4, 2), (4, 3), (2, 3)}  # earlier document first
    assert len(pairs) == len(got)
    assert all(0.9 <= s <= 1.0 for _, _, s in pairs)


def test_window_pairs_uses_the_cross_language_threshold():
    ids, ts, home = np.array([1, 2]), np.array([0.0, H]), np.array([True, True])
    vecs = _unit([1, 0], [0.8, 0.6])  # cosine 0.8
    assert window_pairs(ids, ts, np.array(["bn", "en"], dtype=object), home, vecs, 48 * H, 0.9, 0.75)
    assert not window_pairs(ids, ts, np.array(["en", "en"], dtype=object), home, vecs, 48 * H, 0.9, 0.75)
