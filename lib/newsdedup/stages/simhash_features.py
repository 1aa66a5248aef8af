"""Stage 3's pure per-document kernels beyond the seed SimHash (see simhash.py).

- `shingle_set`: the distinct 32-bit hashes of a document's shingles, sorted. It
  is the set behind everything new: the MinHash signature, the de-skewed SimHash
  and the exact Jaccard / containment check of a candidate pair.
- `set_simhash`: a SimHash in which every distinct shingle votes once (the
  limit of sublinear tf). Term counts no longer pile votes onto the few n-grams
  every Bangla text repeats, which is what skewed the seed fingerprint's bits.
- `minhash_bands`: b band hashes of a b x r MinHash signature (text-dedup /
  datatrove style LSH): two documents with Jaccard J share at least one band
  with probability 1 - (1 - J^r)^b.
- `numbers_of`, `names_of`: the numbers (ASCII or Bangla digits) and capitalised
  names of a text. Templated reports of different games share most of their
  words but not their scores and team names; the verification step uses these
  sets as evidence against a link.

All hashes are deterministic across processes (no Python hash randomisation).
The job computes the first three compiled, a batch at a time (simhash_sets.keys_batch,
bit-identical); `set_columns` states what that kernel returns for one document.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from .simhash import _mix, features, to_signed

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_BANGLA_DIGITS = str.maketrans("০১২৩৪৫৬৭৮৯", "0123456789")
# \d\d* is \d+ spelled so that re can skip straight to digits (a pattern opening with a repeat is
# tried at every position): half the time.
_NUMBER = re.compile(r"\d\d*(?:[.,:]\d+)*")
# A capitalised word: a capital, then word characters, apostrophes or hyphens with a lower-case letter.
_CAPITALISED = re.compile(r"[A-Z][\w'-]*[a-z][\w'-]*")
_SENTENCE_END = ".!?\"'"


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
    h = _mix(shingles.view(np.uint32).astype(np.uint64) * _GOLDEN)
    bits = np.unpackbits(np.ascontiguousarray(h, dtype="<u8").view(np.uint8).reshape(-1, 8),
                         axis=1, bitorder="little")
    votes = 2 * bits.sum(axis=0, dtype=np.int64) - len(h)
    return to_signed(int(np.packbits(votes > 0, bitorder="little").view("<u8")[0]))


@lru_cache(maxsize=16)
def _salts(n_perm: int, seed: int = 20070508) -> np.ndarray:
    """n_perm fixed 64-bit salts, one per hash function."""
    return np.random.Generator(np.random.PCG64(seed)).integers(0, 2 ** 64 - 1, size=n_perm, dtype=np.uint64,
                                                               endpoint=True)


def minhash_signature(shingles: np.ndarray, n_perm: int) -> np.ndarray:
    """n_perm minimum hash values (uint64) of a set of 32-bit shingles.

    Hash i is splitmix64(premixed(x) XOR salt_i): every output bit depends on every
    input bit, so no shingle is "small" under all functions at once (a linear
    a*x + c with small a and c would favour small x in every permutation).
    """
    x = _mix(shingles.view(np.uint32).astype(np.uint64) * _GOLDEN + np.uint64(1))
    return _mix(x[:, None] ^ _salts(n_perm)[None, :]).min(axis=0)


def minhash_bands(shingles: np.ndarray, n_bands: int, rows: int) -> list[int] | None:
    """One signed 64-bit hash per band of a n_bands x rows MinHash signature; None for an empty set.

    The band index is mixed into its hash, so equal values in different bands never collide.
    """
    if len(shingles) == 0:
        return None
    sig = minhash_signature(shingles, n_bands * rows).reshape(n_bands, rows)
    acc = np.arange(1, n_bands + 1, dtype=np.uint64)
    for j in range(rows):
        acc = _mix(acc * _GOLDEN + sig[:, j])
    return [to_signed(int(v)) for v in acc]


def set_columns(text: str, kind: str, n: int, n_bands: int, rows: int
                ) -> tuple[np.ndarray, int | None, list[int] | None]:
    """(shingle_set, set_simhash, minhash_bands) of one document: the per-document definition of what
    SimhashKeys.batch computes compiled for a whole batch (simhash_sets.keys_batch)."""
    shingles = shingle_set(text, kind, n)
    return shingles, set_simhash(shingles), minhash_bands(shingles, n_bands, rows)


def numbers_of(text: str) -> list[str]:
    """Distinct numbers in text, Bangla digits read as ASCII, thousands separators kept as written."""
    # \d matches Bangla digits too and the translation maps digit to digit, so translating each
    # match finds what translating the whole text first would, at a fraction of the cost.
    return sorted({m.translate(_BANGLA_DIGITS) for m in _NUMBER.findall(text)})


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
