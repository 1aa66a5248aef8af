import random

import pytest

from newsdedup import simhash as sh
from newsdedup.config import ConfigError, load_config
from newsdedup.text import normalize_text

WORDS = ("government minister said budget river flood council police market price school match team "
         "player goal election vote court judge hospital doctor rail road bridge port export garment").split()


def article(seed, n=300):
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(n))


def fp(text, kind="word", n=3):
    return sh.simhash(sh.features(normalize_text(text), kind, n))


def test_fingerprint_is_deterministic_and_signed_64_bit():
    a = fp(article(1))
    assert a == fp(article(1))
    assert -(1 << 63) <= a < (1 << 63)


def test_small_edit_is_close_unrelated_text_is_far():
    base = article(2)
    edited = base.replace(base.split()[100], "typo", 1)
    assert sh.hamming(fp(base), fp(edited)) <= 3
    assert sh.hamming(fp(base), fp(article(3))) > 16


def test_bangla_char_ngrams_tolerate_a_small_edit():
    bn = ("ঢাকায় টানা বৃষ্টিতে জলাবদ্ধতা তৈরি হয়েছে এবং বহু সড়কে যান চলাচল বন্ধ রয়েছে। " * 6
          + "সিটি করপোরেশন জানিয়েছে দ্রুত পানি নিষ্কাশনের কাজ চলছে। " * 4)
    edited = bn.replace("জলাবদ্ধতা", "জলাবদ্ধতার", 1)
    assert sh.hamming(fp(bn, "char", 4), fp(edited, "char", 4)) <= 3


def test_bands_cover_all_bits_and_pigeonhole_holds():
    rng = random.Random(7)
    for _ in range(200):
        a = sh.to_signed(rng.getrandbits(64))
        flips = rng.sample(range(64), 3)
        b = sh.to_unsigned(a)
        for f in flips:
            b ^= 1 << f
        b = sh.to_signed(b)
        assert sh.hamming(a, b) == 3
        assert any(x == y for x, y in zip(sh.bands(a), sh.bands(b)))   # within 3 bits => a shared band
    u = sh.to_unsigned(a)
    assert sum(band << (16 * i) for i, band in enumerate(sh.bands(a))) == u


def test_features_by_kind():
    assert sorted(sh.features("a b c d", "word", 3)) == ["a b c", "b c d"]
    assert sh.features("ab", "word", 3) == {"ab": 1}
    assert sorted(sh.features("abcde", "char", 4)) == ["abcd", "bcde"]
    assert sh.simhash({}) is None
    with pytest.raises(ValueError):
        sh.features("x", "syllable", 2)


def test_config_refuses_threshold_the_bands_cannot_guarantee():
    with pytest.raises(ConfigError, match="band join misses pairs"):
        load_config(overrides={"simhash": {"languages": {"en": {"max_hamming": 5}}}})
    with pytest.raises(ConfigError):
        load_config(overrides={"simhash": {"bands": 5}})
