import random

import pytest

from newsdedup.stages.simhash import reference as ref
from newsdedup.config import ConfigError, load_config
from newsdedup.stages.content import normalize_text

WORDS = ("government minister said budget river flood council police market price school match team "
         "player goal election vote court judge hospital doctor rail road bridge port export garment").split()


def article(seed, n=300):
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(n))


def fp(text, kind="word", n=3):
    return ref.seed_simhash(ref.features(normalize_text(text), kind, n))


def test_fingerprint_is_deterministic_and_signed_64_bit():
    a = fp(article(1))
    assert a == fp(article(1))
    assert -(1 << 63) <= a < (1 << 63)


def test_small_edits_are_close_and_unrelated_texts_far():
    import statistics

    base = article(2)
    toks = base.split()
    edits = [" ".join(toks[:i] + ["typo"] + toks[i + 1:]) for i in range(10, 290, 14)]
    near = [ref.hamming(fp(base), fp(e)) for e in edits]
    far = [ref.hamming(fp(article(s)), fp(article(s + 1))) for s in range(10, 30)]
    assert max(near) < min(far)
    assert statistics.median(near) <= 5 and statistics.median(far) >= 24


def test_bangla_char_ngrams_tolerate_a_small_edit():
    bn = ("ঢাকায় টানা বৃষ্টিতে জলাবদ্ধতা তৈরি হয়েছে এবং বহু সড়কে যান চলাচল বন্ধ রয়েছে। " * 6
          + "সিটি করপোরেশন জানিয়েছে দ্রুত পানি নিষ্কাশনের কাজ চলছে। " * 4)
    edited = bn.replace("জলাবদ্ধতা", "জলাবদ্ধতার", 1)
    assert ref.hamming(fp(bn, "char", 4), fp(edited, "char", 4)) <= 3


def test_bands_cover_all_bits_and_pigeonhole_holds():
    rng = random.Random(7)
    for _ in range(200):
        a = ref.to_signed(rng.getrandbits(64))
        flips = rng.sample(range(64), 3)
        b = ref.to_unsigned(a)
        for f in flips:
            b ^= 1 << f
        b = ref.to_signed(b)
        assert ref.hamming(a, b) == 3
        assert any(x == y for x, y in zip(ref.bands(a), ref.bands(b)))   # within 3 bits => a shared band
    u = ref.to_unsigned(a)
    assert sum(band << (16 * i) for i, band in enumerate(ref.bands(a))) == u


def test_features_by_kind():
    assert len(ref.features("a b c d", "word", 3)) == 2                 # two 3-word shingles
    assert len(ref.features("ab", "word", 3)) == 1                      # short text: the words themselves
    assert len(ref.features("abcde", "char", 4)) == 2
    # Shingles are order-sensitive; the same shingle hashes the same wherever it occurs.
    ab, ba = ref.features("x y z", "word", 3), ref.features("z y x", "word", 3)
    assert ab[0] != ba[0]
    assert ref.features("p q r s", "word", 3)[1] == ref.features("q r s", "word", 3)[0]
    assert ref.distinct_count(ref.features("a b a b a b", "word", 2)) == 2
    assert ref.seed_simhash(ref.features("", "word", 3)) is None
    with pytest.raises(ValueError):
        ref.features("x", "syllable", 2)


def test_simhash_is_a_bitwise_majority_vote():
    import numpy as np

    hashes = np.array([0b1011, 0b0011, 0b1000], dtype=np.uint64)
    assert ref.seed_simhash(hashes) == 0b1011
    assert ref.seed_simhash(np.array([1 << 63], dtype=np.uint64)) == -(1 << 63)   # top bit -> negative long


def test_config_refuses_threshold_the_bands_cannot_guarantee():
    with pytest.raises(ConfigError, match="band join misses pairs"):
        load_config(overrides={"simhash": {"languages": {"en": {"max_hamming": 5}}}})
    with pytest.raises(ConfigError):
        load_config(overrides={"simhash": {"bands": 5}})
