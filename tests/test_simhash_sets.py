"""The compiled set columns (simhash.kernels.keys_batch, SimhashKeys.batch) equal the per-document numpy
definition (simhash.reference.set_columns) exactly, on the reference vector, the synthetic corpus and
random Unicode text; and reach the documents rows unchanged through prepare's Arrow UDF."""

import hashlib
import random

import numpy as np
import pytest

from fingerprint_reference import BN, EN, SET_KERNEL
from newsdedup.config import load_config
from newsdedup_lab.synth import generate
from newsdedup.stages.content import ContentKeys
from newsdedup.stages.simhash import kernels
from newsdedup.stages.simhash import reference as ref
from newsdedup.stages.simhash.kernels import keys_batch, shingle_sets
from newsdedup.stages.simhash.keys import SimhashKeys

CORPUS = {"EN": EN, "BN": BN}
KIND = {"word": kernels.KIND_WORD, "char": kernels.KIND_CHAR}


def compiled(texts, seed, sets, minimum=None, n_bands=25, rows=5, cache=None):
    """keys_batch over texts; seed, sets: one (kind name or None, n) per text. Per text:
    (seed valid, shingles as int32, simhash_w or None, mh_bands or None)."""
    is_word, is_text = ref.char_classes()
    cps, offsets = kernels.code_points([t.casefold() for t in texts])
    code = [KIND[k] if k else -1 for k, _ in seed]
    out = keys_batch(cps, offsets, np.array(code, np.int8), np.array([n for _, n in seed], np.int64),
                     np.array(minimum or [0] * len(texts), np.int64),
                     np.array([KIND[k] for k, _ in sets], np.int8), np.array([n for _, n in sets], np.int64),
                     ref.minhash_salts(n_bands * rows), n_bands, rows, is_word, is_text,
                     *(cache or kernels.word_cache()).arrays())
    _, _, valid, w, w_valid, mh, at, shingles = out
    return [(bool(valid[d]), shingles[at[d]:at[d + 1]].view(np.int32),
             ref.to_signed(int(w[d])) if w_valid[d] else None,
             [ref.to_signed(int(v)) for v in mh[d]] if w_valid[d] else None) for d in range(len(texts))]


def expected(text, kind, n, n_bands=25, rows=5):
    shingles, w, bands = ref.set_columns(text, kind, n, n_bands, rows)
    return shingles, w, bands


def assert_same(got, want):
    shingles, w, bands = want
    assert got[1].dtype == np.int32 and np.array_equal(got[1], shingles)
    assert (got[2], got[3]) == (w, bands)


def test_compiled_set_columns_match_the_set_reference_vector():
    """Once with the seed on the set's own features (the reused path), once on other features."""
    texts = [CORPUS[c][i] for c, i, *_ in SET_KERNEL]
    sets = [(kind, n) for _, _, kind, n, *_ in SET_KERNEL]
    other = [("char" if kind == "word" else "word", n + 1) for kind, n in sets]
    for seed in (sets, other):
        for (c, i, kind, n, n_shingles, shingle_digest, w, bands_digest), got in zip(SET_KERNEL,
                                                                                    compiled(texts, seed, sets)):
            assert got[0], (c, i, kind)
            assert len(got[1]) == n_shingles
            assert hashlib.sha256(got[1].astype("<i4").tobytes()).hexdigest()[:16] == shingle_digest
            assert got[2] == w
            assert hashlib.sha256(np.array(got[3], "<i8").tobytes()).hexdigest()[:16] == bands_digest


def test_simhash_keys_batch_equals_the_python_definition_on_the_synthetic_corpus():
    conf = load_config()
    docs, _ = generate(400, 11)
    d = docs.to_pydict()
    n = len(d["id"])
    c = ContentKeys(conf.content, conf.input.max_text_chars).batch(d["title"], d["body"], [None] * n, d["lang"],
                                                                   [[] for _ in range(n)])
    out = SimhashKeys(conf.simhash).batch(c["key"], c["lang"], c["has_body"])
    assert {"en", "bn"} <= set(c["lang"])
    checked = 0
    for i in range(n):
        if not out["simhash_valid"][i]:
            assert not out["simhash_w_valid"][i] and out["mh_bands"][i] is None
            continue
        spec = conf.simhash.language(c["lang"][i])
        _, w, bands = expected(c["key"][i], spec.set_features, spec.set_ngram,
                               conf.simhash.minhash_bands, conf.simhash.minhash_rows)
        got_w = int(out["simhash_w"][i]) if out["simhash_w_valid"][i] else None
        assert (got_w, out["mh_bands"][i]) == (w, bands), i
        checked += 1
    assert checked > 300


ALPHABET = ("abc xyz Dhaka ক খ া ে ্ ং ৳ ১ ২ বাংলাদেশের É é ß _ - . , । \u200c \u200d \u0301 \U0001F600 \u4e2d"
            .split(" ") + [" ", "  ", "\n"])


def random_texts(rng, count):
    texts = ["", " ", "!!! ...", "word", "বাংলা", "৳৳৳৳ ৳৳", "a b", "the same the same the same"]
    texts.append(" ".join(rng.choice(("alpha", "beta", "gamma", "ডেল্টা", "ঋণ")) for _ in range(20000)))
    texts.append("".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(5000)))
    while len(texts) < count:
        texts.append("".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 120))))
    return texts


@pytest.mark.parametrize("n_bands,rows", [(25, 5), (3, 2), (1, 1)])
def test_keys_batch_equals_the_python_definition_on_random_unicode(n_bands, rows):
    rng = random.Random(n_bands)
    texts = random_texts(rng, 300)
    seed = [(rng.choice(("word", "char", None)), rng.choice((1, 2, 3, 4, 5))) for _ in texts]
    sets = [(rng.choice(("word", "char")), rng.choice((1, 2, 3, 4))) for _ in texts]
    minimum = [rng.choice((0, 0, 1, 8, 24)) for _ in texts]
    seed[5], sets[5], minimum[5] = ("char", 2), ("word", 3), 0       # ৳৳৳৳ ৳৳: char grams but no words
    got = compiled(texts, seed, sets, minimum, n_bands, rows)
    for t, (kind, n), (set_kind, set_n), low, g in zip(texts, seed, sets, minimum, got):
        n_seed = ref.distinct_count(ref.features(t, kind, n)) if kind else 0
        assert g[0] == (n_seed > 0 and n_seed >= low)
        if g[0]:
            assert_same(g, expected(t, set_kind, set_n, n_bands, rows))
        else:
            assert len(g[1]) == 0 and g[2] is None and g[3] is None
    assert sum(g[2] is not None for g in got) > 100
    assert any(g[0] and g[2] is None for g in got)          # a seed but no set features (৳৳৳৳)


def test_shingle_sets_are_shingle_set_for_every_text_however_few_features():
    """The verification step's sets: every text's, with no minimum number of features."""
    rng = random.Random(12)
    texts = random_texts(rng, 300)
    sets = [(rng.choice(("word", "char")), rng.choice((1, 2, 3, 4))) for _ in texts]
    kinds = np.array([kernels.KIND_CODES[k] for k, _ in sets], np.int8)
    offsets, shingles = shingle_sets([t.casefold() for t in texts], kinds, np.array([g for _, g in sets]))
    assert shingles.dtype == np.int32 and len(offsets) == len(texts) + 1
    for d, (text, (kind, g)) in enumerate(zip(texts, sets)):
        assert np.array_equal(shingles[offsets[d]:offsets[d + 1]], ref.shingle_set(text, kind, g)), d
    sizes = np.diff(offsets)
    assert (sizes == 0).any() and ((sizes > 0) & (sizes < 8)).any()     # empty sets and tiny ones


def test_a_tiny_word_cache_changes_no_set_column():
    rng = random.Random(3)
    texts = random_texts(rng, 60) + BN
    seed, sets = [("char", 4)] * len(texts), [("word", 3)] * len(texts)
    cache = kernels.WordCache(slots=8, arena=40)     # at most 4 words: fills and restarts all the time
    tiny = compiled(texts, seed, sets, cache=cache)
    seeded = [(t, g) for t, g in zip(texts, tiny) if g[0]]
    assert len(seeded) > len(texts) // 2 and sum(g[2] is not None for _, g in seeded) > len(texts) // 3
    for t, g in seeded:
        assert_same(g, expected(t, "word", 3))
    # Every column, seeded or not, equals a run with a cache large enough never to restart.
    roomy = compiled(texts, seed, sets, cache=kernels.WordCache(1 << 16, 1 << 16))
    for g, r in zip(tiny, roomy):
        assert g[0] == r[0] and np.array_equal(g[1], r[1]) and (g[2], g[3]) == (r[2], r[3])
    assert 0 < cache.state[1] <= 4


def test_the_spark_prepare_step_stores_the_compiled_set_columns_exactly(spark, conf):
    """Through prepare's Arrow UDF (masked int64, list<int64>), beside a document without set columns."""
    from newsdedup import prepare
    from newsdedup.io.input import conform, split_invalid

    from conftest import make_df

    rows = [(1, "https://a.example/1", "Flood in Sylhet", EN[1], None, "a", "en"),
            (2, "https://a.example/2", "Headline only", "", None, "a", "en"),
            (3, "https://b.example/3", "ঢাকায় জলাবদ্ধতা", BN[0], None, "b", "bn"),
            (4, "https://b.example/4", "খবর", BN[6], None, "b", "bn")]
    valid, _ = split_invalid(conform(make_df(spark, rows).coalesce(1), "UTC"))
    got = {r.id: (r.simhash_w, r.mh_bands) for r in prepare.fingerprint(valid, conf).collect()}
    content = ContentKeys(conf.content, conf.input.max_text_chars)
    keys = SimhashKeys(conf.simhash)
    want = {}
    for i, _, title, body, _, _, lang in rows:
        c = content.columns(title, body, None, lang, [])
        cols = keys.columns(c["key"], c["lang"], c["has_body"])
        want[i] = (cols["simhash_w"], cols["mh_bands"])
    assert want[1][0] is not None and want[3][0] is not None
    assert want[2] == want[4] == (None, None)
    assert got == want
