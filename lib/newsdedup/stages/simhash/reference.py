"""Stage 3's per-document reference definitions, in numpy and pure Python.

Everything stage 3 stores or compares is defined here one document at a time,
readably; kernels.py computes the same values compiled for a whole Arrow batch
and tests/fingerprint_reference.py pins both to the same bits. This module
imports nothing of Spark or numba, and of the package only stages.codepoints
(its per-code-point tables are built once per machine).

Features are word shingles for English (word order carries the signal, words are
short and many) and character n-grams for Bangla (rich inflection and
inconsistent spacing/joiners make word tokens unstable). Features are never
materialised as strings: each word (or code point) gets a 64-bit value and an
n-gram's hash is a multiply-add chain over its members, finished with the
splitmix64 mixer. The result is deterministic across processes and machines
(no Python hash randomisation). Fingerprints are signed 64-bit ints so they fit
Spark's LongType unchanged.

- `char_classes`, `patterns`: what a word character and a text character are.
- `features`: one hash per feature occurrence of a text.
- `seed_simhash`, `bands`, `hamming`: the seed fingerprint (stored `simhash`; its
  bit ranges are the stored `band_<i>`). Only `check` and the bands use it.
- `shingle_set`: the distinct 32-bit hashes of a document's shingles, sorted. It
  is the set behind everything stage 3 buckets and verifies on: the MinHash
  signature, the set SimHash and the exact Jaccard / containment check of a pair.
- `set_simhash`: a SimHash in which every distinct shingle votes once (the
  limit of sublinear tf); stored as `simhash_w`, what the Manku tables bucket on.
  Term counts no longer pile votes onto the few n-grams every Bangla text
  repeats, which is what skewed the seed fingerprint's bits.
- `minhash_bands`: b band hashes of a b x r MinHash signature (text-dedup /
  datatrove style LSH), stored as `mh_bands`: two documents with Jaccard J share
  at least one band with probability 1 - (1 - J^r)^b.
- `numbers_of`, `names_of`: the numbers (ASCII or Bangla digits) and capitalised
  names of a text. Templated reports of different games share most of their
  words but not their scores and team names; verification uses these sets as
  evidence against a link. `evidence_classes`: the character classes their
  patterns test, for the compiled scan (kernels.evidence_batch).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import lru_cache

import numpy as np

from ..codepoints import per_machine

GOLDEN = np.uint64(0x9E3779B97F4A7C15)      # odd multiplier (golden ratio): n-gram chains, set hashes
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)
BENGALI = (0x0980, 0x09FF)                  # the Bengali block: always text for character grams
MINHASH_SEED = 20070508                     # seed of the MinHash salts


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, elementwise on uint64 arrays (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _C1
    x = x ^ (x >> np.uint64(27))
    x = x * _C2
    return x ^ (x >> np.uint64(31))


# ---------------------------------------------------------------- characters

@per_machine
def char_classes() -> tuple[np.ndarray, np.ndarray]:
    """(is_word, is_text) for every code point.

    is_word: a word character, that is what `re`'s \\w matches (letters, digits,
    underscore) plus every combining mark (\\p{M}). Without the marks a Bangla
    word falls apart at its vowel signs: \\w+ reads বাংলাদেশের as ব, ল, দ, শ, র.
    is_text: what a character gram keeps (a word character or anything in the
    Bengali block); everything else is a word boundary.
    """
    every = "".join(map(chr, range(0x110000)))
    is_word = np.zeros(0x110000, dtype=np.bool_)
    is_word[[m.start() for m in re.finditer(r"\w", every)]] = True
    for cp in range(0x110000):
        if not is_word[cp] and unicodedata.category(every[cp])[0] == "M":
            is_word[cp] = True
    is_text = is_word.copy()
    is_text[BENGALI[0]:BENGALI[1] + 1] = True
    return is_word, is_text


def _ranges(mask: np.ndarray) -> str:
    """A regex character-class body for the code points where mask is True."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.view(np.int8), [0]))))
    return "".join(f"\\U{a:08x}-\\U{b - 1:08x}" for a, b in zip(edges[::2], edges[1::2]))


@lru_cache(maxsize=1)
def patterns() -> tuple[re.Pattern, re.Pattern]:
    """(word, non_text) regexes with exactly the classes of `char_classes`."""
    is_word, is_text = char_classes()
    return re.compile(f"[{_ranges(is_word)}]+"), re.compile(f"[^{_ranges(is_text)}]+")


# ---------------------------------------------------------------- features and the seed fingerprint

@lru_cache(maxsize=1 << 20)
def word_value(word: str) -> int:
    """A word's 64-bit value: the first 8 bytes (little-endian) of BLAKE2b over its UTF-8 bytes."""
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


def _ngram_hashes(values: np.ndarray, n: int) -> np.ndarray:
    """Hash of every window of n consecutive values (all windows at once)."""
    if len(values) < n:
        return mix64(values.copy())
    m = len(values) - n + 1
    acc = values[:m].copy()
    for k in range(1, n):
        acc = mix64(acc * GOLDEN + values[k:k + m])
    return mix64(acc)


def features(text: str, kind: str, n: int) -> np.ndarray:
    """One uint64 hash per feature occurrence of already-normalised text.

    kind 'word': n-word shingles (the words themselves if there are fewer than n); a word is a
    run of \\w characters and combining marks, so Bangla vowel signs stay inside their word.
    kind 'char': n-character grams over letters/marks with single spaces as word boundaries.
    """
    token, non_text = patterns()
    folded = text.casefold()
    if kind == "word":
        toks = token.findall(folded)
        values = np.fromiter((word_value(t) for t in toks), dtype=np.uint64, count=len(toks))
    elif kind == "char":
        squeezed = non_text.sub(" ", folded).strip()
        values = np.frombuffer(squeezed.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    else:
        raise ValueError(f"unknown feature kind {kind!r}")
    if len(values) == 0:
        return values
    return _ngram_hashes(values, n)


def seed_simhash(hashes: np.ndarray) -> int | None:
    """The seed fingerprint (stored `simhash`): signed 64-bit SimHash of feature occurrences;
    repeated features weigh by their count. None when there are none."""
    if len(hashes) == 0:
        return None
    bits = np.unpackbits(np.ascontiguousarray(hashes, dtype="<u8").view(np.uint8).reshape(-1, 8),
                         axis=1, bitorder="little")                      # (n, 64), bit i at column i
    votes = 2 * bits.sum(axis=0, dtype=np.int64) - len(hashes)
    value = int(np.packbits(votes > 0, bitorder="little").view("<u8")[0])
    return to_signed(value)


def distinct_count(hashes: np.ndarray) -> int:
    """Distinct features among the occurrences (stored `n_features`)."""
    return int(len(np.unique(hashes)))


def to_signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def to_unsigned(value: int) -> int:
    return value & 0xFFFFFFFFFFFFFFFF


def bands(fp: int, n_bands: int = 4) -> list[int]:
    """Split a fingerprint into n_bands equal bit ranges (low bits first): stored `band_<i>`."""
    width = 64 // n_bands
    mask = (1 << width) - 1
    u = to_unsigned(fp)
    return [(u >> (width * i)) & mask for i in range(n_bands)]


def hamming(a: int, b: int) -> int:
    return (to_unsigned(a) ^ to_unsigned(b)).bit_count()


# ---------------------------------------------------------------- shingle sets, set SimHash, MinHash

def shingle_set(text: str, kind: str, n: int) -> np.ndarray:
    """Sorted distinct 32-bit (as int32) shingle hashes of normalised text; empty when it has none."""
    hashes = features(text, kind, n)
    if len(hashes) == 0:
        return np.empty(0, np.int32)
    return np.unique((hashes >> np.uint64(32)).astype(np.uint32)).view(np.int32)


def set_simhash(shingles: np.ndarray) -> int | None:
    """Signed 64-bit SimHash of a set: each distinct shingle votes once with a mixed 64-bit hash."""
    if len(shingles) == 0:
        return None
    h = mix64(shingles.view(np.uint32).astype(np.uint64) * GOLDEN)
    bits = np.unpackbits(np.ascontiguousarray(h, dtype="<u8").view(np.uint8).reshape(-1, 8),
                         axis=1, bitorder="little")
    votes = 2 * bits.sum(axis=0, dtype=np.int64) - len(h)
    return to_signed(int(np.packbits(votes > 0, bitorder="little").view("<u8")[0]))


@lru_cache(maxsize=16)
def minhash_salts(n_perm: int, seed: int = MINHASH_SEED) -> np.ndarray:
    """n_perm fixed 64-bit salts, one per hash function."""
    return np.random.Generator(np.random.PCG64(seed)).integers(0, 2 ** 64 - 1, size=n_perm, dtype=np.uint64,
                                                               endpoint=True)


def minhash_signature(shingles: np.ndarray, n_perm: int) -> np.ndarray:
    """n_perm minimum hash values (uint64) of a set of 32-bit shingles.

    Hash i is splitmix64(premixed(x) XOR salt_i): every output bit depends on every
    input bit, so no shingle is "small" under all functions at once (a linear
    a*x + c with small a and c would favour small x in every permutation).
    """
    x = mix64(shingles.view(np.uint32).astype(np.uint64) * GOLDEN + np.uint64(1))
    return mix64(x[:, None] ^ minhash_salts(n_perm)[None, :]).min(axis=0)


def minhash_bands(shingles: np.ndarray, n_bands: int, rows: int) -> list[int] | None:
    """One signed 64-bit hash per band of a n_bands x rows MinHash signature; None for an empty set.

    The band index is mixed into its hash, so equal values in different bands never collide.
    """
    if len(shingles) == 0:
        return None
    sig = minhash_signature(shingles, n_bands * rows).reshape(n_bands, rows)
    acc = np.arange(1, n_bands + 1, dtype=np.uint64)
    for j in range(rows):
        acc = mix64(acc * GOLDEN + sig[:, j])
    return [to_signed(int(v)) for v in acc]


def set_columns(text: str, kind: str, n: int, n_bands: int, rows: int
                ) -> tuple[np.ndarray, int | None, list[int] | None]:
    """(shingle_set, set_simhash, minhash_bands) of one document: the per-document definition of what
    SimhashKeys.batch computes compiled for a whole batch (kernels.keys_batch)."""
    shingles = shingle_set(text, kind, n)
    return shingles, set_simhash(shingles), minhash_bands(shingles, n_bands, rows)


# ---------------------------------------------------------------- numbers and names (verification evidence)

BANGLA_DIGITS = str.maketrans("০১২৩৪৫৬৭৮৯", "0123456789")
# \d\d* is \d+ spelled so that re can skip straight to digits (a pattern opening with a repeat is
# tried at every position): half the time.
_NUMBER_SEPARATORS = ".,:"                  # between the digit groups of one number
_NUMBER = re.compile(r"\d\d*(?:[" + re.escape(_NUMBER_SEPARATORS) + r"]\d+)*")
# A capitalised word: a capital, then word characters, apostrophes or hyphens with a lower-case letter.
_NAME_MARKS = "'-"                          # inside a capitalised word, besides word characters
_CAPITALISED = re.compile(r"[A-Z][\w" + re.escape(_NAME_MARKS) + r"]*[a-z][\w" + re.escape(_NAME_MARKS) + r"]*")
_SENTENCE_END = ".!?\"'"


def numbers_of(text: str) -> list[str]:
    """Distinct numbers in text, Bangla digits read as ASCII, thousands separators kept as written."""
    # \d matches Bangla digits too and the translation maps digit to digit, so translating each
    # match finds what translating the whole text first would, at a fraction of the cost.
    return sorted({m.translate(BANGLA_DIGITS) for m in _NUMBER.findall(text)})


def names_of(text: str) -> list[str]:
    """Distinct capitalised words that do not open a sentence (a cheap proxy for names): preceded by
    whitespace, and that by a character other than . ! ? " ' (never the text's first word)."""
    # The capital is searched first, its context checked after: re skips straight to capitals, where a
    # pattern opening with the lookbehind (?<=[^\s.!?"'])\s+ is tried at every position (2.3x slower).
    # str.isspace is re's \s.
    names = set()
    for m in _CAPITALISED.finditer(text):
        start = i = m.start()
        while i > 0 and text[i - 1].isspace():
            i -= 1
        if 0 < i < start and text[i - 1] not in _SENTENCE_END:
            names.add(m.group())
    return sorted(names)


@per_machine
def evidence_classes() -> np.ndarray:
    """For every code point, the classes numbers_of and names_of test, as bits of a uint8: 1 what re's
    \\w matches, 2 what re's \\d matches, 4 str.isspace, 8 _SENTENCE_END, 16 _NUMBER_SEPARATORS,
    32 _NAME_MARKS. Read from re, str and the constants above themselves, so a compiled scan
    (kernels.evidence_batch) agrees with the patterns above on every code point."""
    every = "".join(map(chr, range(0x110000)))
    classes = np.zeros(0x110000, dtype=np.uint8)
    classes[[m.start() for m in re.finditer(r"\w", every)]] |= 1
    classes[[m.start() for m in re.finditer(r"\d", every)]] |= 2
    classes[[cp for cp, ch in enumerate(every) if ch.isspace()]] |= 4
    for bit, chars in ((8, _SENTENCE_END), (16, _NUMBER_SEPARATORS), (32, _NAME_MARKS)):
        classes[[ord(ch) for ch in chars]] |= bit
    return classes
