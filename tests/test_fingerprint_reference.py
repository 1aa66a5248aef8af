"""Fingerprints stay bit-identical to the values computed before the compiled kernel (see fingerprint_reference)."""

import hashlib
import random

import numpy as np
import pytest

from fingerprint_reference import BN, EN, KERNEL, ROWS, SET_KERNEL, SET_ROWS, TITLES_BN, TITLES_EN
from newsdedup.config import load_config
from newsdedup.stages.content import ContentKeys
from newsdedup.stages.simhash import kernels
from newsdedup.stages.simhash import reference as ref
from newsdedup.stages.simhash.keys import SimhashKeys

CORPUS = {"EN": EN, "BN": BN}


def kernel(texts, kinds, ngrams, cache=None):
    is_word, is_text = ref.char_classes()
    cps, offsets = kernels.code_points([t.casefold() for t in texts])
    return kernels.fingerprint_batch(cps, offsets, np.array(kinds, np.int8), np.array(ngrams, np.int64),
                                  is_word, is_text, *(cache or kernels.word_cache()).arrays())


def test_compiled_kernel_matches_the_reference_vector():
    texts = [CORPUS[c][i] for c, i, *_ in KERNEL]
    kinds = [kernels.KIND_WORD if kind == "word" else kernels.KIND_CHAR for _, _, kind, *_ in KERNEL]
    fps, distinct, occurrences = kernel(texts, kinds, [row[3] for row in KERNEL])
    got = [(ref.to_signed(int(f)), int(d), int(o)) for f, d, o in zip(fps, distinct, occurrences)]
    assert got == [(s, d, o) for *_, s, d, o in KERNEL]


def test_numpy_definition_matches_the_reference_vector():
    for c, i, kind, n, expected, n_distinct, n_occ in KERNEL:
        hashes = ref.features(CORPUS[c][i], kind, n)
        assert (ref.seed_simhash(hashes), ref.distinct_count(hashes), len(hashes)) == (expected, n_distinct, n_occ)


def test_content_and_simhash_keys_match_the_reference_rows():
    conf = load_config()
    content = ContentKeys(conf.content, conf.input.max_text_chars)
    simhash = SimhashKeys(conf.simhash)
    titles, bodies = TITLES_EN + TITLES_BN, EN + BN
    flags = [[] for _ in titles]
    c = content.batch(titles, bodies, [None] * len(titles), [None] * len(titles), flags)
    s = simhash.batch(c["key"], c["lang"], c["has_body"])
    got = [(t, c["lang"][i], c["content_hash"][i], c["text_chars"][i],
            int(s["simhash"][i]) if s["simhash_valid"][i] else None, int(s["n_features"][i]))
           for i, t in enumerate(titles)]
    assert got == [tuple(r) for r in ROWS]


def digest(values, dtype):
    return hashlib.sha256(np.asarray(values, dtype).tobytes()).hexdigest()[:16]


def reference_keys():
    conf = load_config()
    content = ContentKeys(conf.content, conf.input.max_text_chars)
    titles, bodies = TITLES_EN + TITLES_BN, EN + BN
    c = content.batch(titles, bodies, [None] * len(titles), [None] * len(titles), [[] for _ in titles])
    return conf, titles, c


def test_set_columns_match_the_reference_rows():
    conf, titles, c = reference_keys()
    s = SimhashKeys(conf.simhash).batch(c["key"], c["lang"], c["has_body"])
    got = []
    for i, t in enumerate(titles):
        spec = conf.simhash.language(c["lang"][i])
        shingles = ref.shingle_set(c["key"][i], spec.set_features, spec.set_ngram)
        w = int(s["simhash_w"][i]) if s["simhash_w_valid"][i] else None
        got.append((t, len(shingles), digest(shingles, "<i4"), w, s["mh_bands"][i]))
    assert got == [tuple(r) for r in SET_ROWS]


def test_python_set_functions_match_the_set_reference_vector():
    for c, i, kind, n, n_shingles, shingle_digest, w, bands_digest in SET_KERNEL:
        shingles = ref.shingle_set(CORPUS[c][i], kind, n)
        assert (len(shingles), digest(shingles, "<i4")) == (n_shingles, shingle_digest)
        assert ref.set_simhash(shingles) == w
        assert digest(ref.minhash_bands(shingles, 25, 5), "<i8") == bands_digest


@pytest.mark.parametrize("length", [1, 7, 8, 127, 128, 129, 256, 257, 1000])
def test_blake2b_kernel_equals_hashlib(length):
    data = bytes(random.Random(length).randrange(256) for _ in range(length))
    expected = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")
    assert kernels.blake2b64(np.frombuffer(data, np.uint8), length) == expected


def test_kernel_agrees_with_numpy_on_random_texts():
    rng = random.Random(5)
    alphabet = "abc xyz ক খ া ে ্ ১ ২ É é ß _ - . \u0301 \U0001F600 \u4e2d".split(" ") + [" ", "  "]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 80))) for _ in range(300)]
    kinds = [rng.choice((kernels.KIND_WORD, kernels.KIND_CHAR)) for _ in texts]
    ngrams = [rng.choice((1, 2, 3, 4, 5)) for _ in texts]
    fps, distinct, occurrences = kernel(texts, kinds, ngrams)
    for t, kind, n, f, d, o in zip(texts, kinds, ngrams, fps, distinct, occurrences):
        hashes = ref.features(t, "word" if kind == kernels.KIND_WORD else "char", n)
        assert (int(d), int(o)) == (ref.distinct_count(hashes), len(hashes))
        if len(hashes):
            assert ref.to_signed(int(f)) == ref.seed_simhash(hashes)


def test_skipped_and_empty_texts_have_no_features():
    fps, distinct, _ = kernel(["some words here", "", "!!! ..."], [-1, kernels.KIND_WORD, kernels.KIND_WORD], [3, 3, 3])
    assert list(distinct) == [0, 0, 0]


def test_a_tiny_word_cache_that_fills_and_restarts_changes_nothing():
    texts = [CORPUS[c][i] for c, i, kind, *_ in KERNEL if kind == "word"] * 3
    expected = kernel(texts, [kernels.KIND_WORD] * len(texts), [3] * len(texts), kernels.WordCache(1 << 16, 1 << 16))
    tiny = kernels.WordCache(slots=8, arena=40)     # at most 4 words, restarts all the time
    got = kernel(texts, [kernels.KIND_WORD] * len(texts), [3] * len(texts), tiny)
    assert all((a == b).all() for a, b in zip(got, expected))
    assert tiny.state[1] <= 4
