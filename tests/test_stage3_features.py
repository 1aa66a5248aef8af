"""Stage 3's pure kernels: table arithmetic, MinHash, de-skewed SimHash, numbers and names."""

import random
import re
from itertools import combinations

import numpy as np

from newsdedup_lab.synth import generate
from newsdedup.stages.simhash import candidates
from newsdedup.stages.simhash import reference as ref
from test_simhash_sets import random_texts


def test_manku_tables_find_every_pair_within_k():
    rng = random.Random(3)
    for blocks, k in [(4, 3), (5, 3), (7, 4), (8, 5)]:
        masks = [m & (2 ** 64 - 1) for m in candidates.table_masks(blocks, k)]
        assert len(masks) == len(list(combinations(range(blocks), blocks - k)))
        for _ in range(300):
            a = rng.getrandbits(64)
            b = a
            for bit in rng.sample(range(64), rng.randint(0, k)):
                b ^= 1 << bit
            assert any((a ^ b) & m == 0 for m in masks)          # they share some table's key
    assert sum(bin(m).count("1") for m in candidates.block_masks(5)) == 64
    assert round(candidates.expected_random_candidates(10_000_000, 5, 3), 1) == 2.1


def test_minhash_bands_agree_as_the_s_curve_says():
    rng = np.random.default_rng(5)
    base = np.unique(rng.integers(-2 ** 31, 2 ** 31, 600).astype(np.int32))
    near = base.copy()
    near[:30] = rng.integers(-2 ** 31, 2 ** 31, 30)          # Jaccard ~0.9
    near = np.unique(near)
    other = np.unique(rng.integers(-2 ** 31, 2 ** 31, 600).astype(np.int32))
    small = np.arange(1, 600, dtype=np.int32)                  # small values must not win every hash
    bands = {name: ref.minhash_bands(s, 25, 5) for name, s in
             [("base", base), ("near", near), ("other", other), ("small", small)]}
    same = lambda x, y: sum(p == q for p, q in zip(bands[x], bands[y]))  # noqa: E731
    assert same("base", "near") >= 10
    assert same("base", "other") == 0 and same("base", "small") == 0
    sig_a, sig_b = ref.minhash_signature(base, 128), ref.minhash_signature(near, 128)
    inter = len(np.intersect1d(base, near))
    jac = inter / (len(base) + len(near) - inter)
    assert abs((sig_a == sig_b).mean() - jac) < 0.1
    assert ref.minhash_bands(np.empty(0, np.int32), 25, 5) is None
    assert round(candidates.minhash_candidate_probability(0.7, 25, 5), 2) == 0.99


def test_set_simhash_ignores_repetition_and_is_signed():
    text = "the river rose overnight and the council opened shelters near the port"
    once = ref.shingle_set(text, "word", 3)
    twice = ref.shingle_set(text + " " + text, "word", 3)
    assert set(once.tolist()) <= set(twice.tolist())
    fp = ref.set_simhash(once)
    assert -(1 << 63) <= fp < (1 << 63)
    assert ref.set_simhash(np.empty(0, np.int32)) is None
    assert ref.hamming(fp, ref.set_simhash(ref.shingle_set(text + " today", "word", 3))) < 20


def test_numbers_and_names():
    assert ref.numbers_of("Arsenal won 2-1; crowd 60,000 and ৩৫ জন") == ["1", "2", "35", "60,000"]
    assert ref.names_of("Yesterday Arsenal beat Everton at the Emirates. Saka scored.") == ["Arsenal", "Emirates", "Everton"]   # not Yesterday, not Saka (sentence starts)


def test_numbers_of_finds_what_translating_the_whole_text_first_finds():
    """numbers_of (\\d\\d*, each match translated) finds what the first definition (\\d+ over the translated
    text) finds."""
    bangla = str.maketrans("০১২৩৪৫৬৭৮৯", "0123456789")
    rng = random.Random(5)
    digits = list("0123456789০১২৩৪৫৬৭৮৯٠١٢३४.,:-ab ")          # Arabic-Indic and Devanagari digits too
    texts = random_texts(rng, 200) + ["".join(rng.choice(digits) for _ in range(rng.randrange(40)))
                                      for _ in range(3000)]
    texts += [b for b in generate(200, 3)[0].column("body").to_pylist() if b]
    for text in texts:
        assert ref.numbers_of(text) == sorted(set(re.findall(r"\d+(?:[.,:]\d+)*", text.translate(bangla)))), text


def test_names_of_finds_what_the_lookbehind_pattern_finds():
    """names_of checks a capitalised word's context after finding it: the same names as the first
    definition, a lookbehind pattern, on text made of what decides a name (Unicode spaces too)."""
    first = re.compile(r"(?<=[^\s.!?\n\"'])\s+([A-Z][\w'-]*[a-z][\w'-]*)")
    rng = random.Random(6)
    pieces = [*"aZbQ .!?\"'\n\t-_,", "\u00a0", "\u2003", "\x1c", "\x85", "Ab", "Éb", " Mc", "xY", "ক", "Ünter"]
    texts = random_texts(rng, 200) + ["".join(rng.choice(pieces) for _ in range(rng.randrange(60)))
                                      for _ in range(5000)]
    texts += [b for b in generate(200, 3)[0].column("body").to_pylist() if b]
    for text in texts:
        assert ref.names_of(text) == sorted(set(first.findall(text))), text
    assert sum(bool(ref.names_of(t)) for t in texts) > 1000


def test_compiled_numbers_and_names_are_the_per_document_ones():
    """kernels.numbers_and_names (one compiled scan per batch, what prepare and pair features call)
    gives numbers_of and names_of of every text: digits of any script, separators, capitals inside
    words, Unicode spaces and word characters, code points above the BMP, empty texts."""
    from newsdedup.stages.simhash.kernels import numbers_and_names

    rng = random.Random(8)
    pieces = [*"0123456789০১২৩৪৫৬৭৮৯٣४.,:;-_'\"!? \n\taZbQxY", "\u00a0", "\u2003", "\x1c", "\x85", "Ab", "Éb",
              " Mc", "ক", "া", "্", "Ünter", "\U0001d7d8", "\U0001f600", "𝐀b", "ǅa", "A1b", "I'm", "Jean-Luc"]
    texts = random_texts(rng, 300) + ["".join(rng.choice(pieces) for _ in range(rng.randrange(80)))
                                      for _ in range(5000)]
    texts += [b for b in generate(300, 4)[0].column("body").to_pylist() if b]
    texts += ["", "A", "Ab", " Ab", "x Ab", ". Ab", "x \u00a0Ab-cD", "1.2.3", "1..2", "1,", ":1", "১২.৩,৪", "x 'Ab"]
    nums, names = numbers_and_names(texts)
    assert len(nums) == len(names) == len(texts)
    for text, got_nums, got_names in zip(texts, nums, names):
        assert (got_nums, got_names) == (ref.numbers_of(text), ref.names_of(text)), text
    assert sum(bool(n) for n in nums) > 1000 and sum(bool(n) for n in names) > 1000
    assert numbers_and_names([]) == ([], [])


def test_prepared_shingle_sets_are_the_ones_verification_computes(conf):
    """The live lookup verifies on the shingle sets Preparer.rows hands over (set_shingles, from
    prepare's own kernel pass) instead of computing them again: they must be PairFeatures' sets,
    value for value, for every document stage 3 sees, and absent for the others."""
    import pyarrow as pa

    from newsdedup.prepare import Preparer
    from newsdedup.stages.simhash.verify import PairFeatures

    docs, _ = generate(300, 11)
    rows = [{"id": i, "title": t, "body": b, "lang": lang, "url": None, "html": None, "source": None,
             "published_at": None} for i, (t, b, lang) in enumerate(zip(docs.column("title").to_pylist(),
                                                                         docs.column("body").to_pylist(),
                                                                         docs.column("lang").to_pylist()))]
    odd = random_texts(random.Random(4), 60)       # empty, one word, Bangla signs only, long repeats
    rows += [{"id": 10_000 + i, "title": None, "body": t, "lang": None, "url": None, "html": None,
              "source": None, "published_at": None} for i, t in enumerate(odd)]
    keyed = Preparer(conf).rows(rows)
    staged = [r for r in keyed if r["simhash_w"] is not None]
    assert len(staged) > 300 and len(staged) < len(keyed)
    assert all(r["set_shingles"] is None for r in keyed if r["simhash_w"] is None)
    expected = PairFeatures(conf).of_keys(pa.array([r["id"] for r in staged], pa.int64()),
                                          [r["content_key"] for r in staged], [r["lang"] for r in staged])
    for r, want in zip(staged, expected.column("shingles").to_pylist()):
        assert r["set_shingles"].dtype == np.int32
        assert r["set_shingles"].tolist() == want, r["id"]
