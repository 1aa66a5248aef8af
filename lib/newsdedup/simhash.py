"""Stage 3: 64-bit SimHash over language-specific features, banding and Hamming distance.

Features are word shingles for English (word order carries the signal, words are
short and many) and character n-grams for Bangla (rich inflection and
inconsistent spacing/joiners make word tokens unstable).

Features are never materialised as strings: each word (or code point) gets a
64-bit value and an n-gram's hash is a multiply-add chain over its members,
finished with the splitmix64 mixer, all vectorised in numpy. The result is
deterministic across processes and machines (no Python hash randomisation).
Fingerprints are signed 64-bit ints so they fit Spark's LongType unchanged.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

import numpy as np

_TOKEN = re.compile(r"\w+")
_NON_TEXT = re.compile(r"[^\w\u0980-\u09ff]+")
_K = np.uint64(0x9E3779B97F4A7C15)          # odd multiplier (golden ratio) for the n-gram chain
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, elementwise on uint64 arrays (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _C1
    x = x ^ (x >> np.uint64(27))
    x = x * _C2
    return x ^ (x >> np.uint64(31))


@lru_cache(maxsize=1 << 20)
def _word_value(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


def _ngram_hashes(values: np.ndarray, n: int) -> np.ndarray:
    """Hash of every window of n consecutive values (all windows at once)."""
    if len(values) < n:
        return _mix(values.copy())
    m = len(values) - n + 1
    acc = values[:m].copy()
    for k in range(1, n):
        acc = _mix(acc * _K + values[k:k + m])
    return _mix(acc)


def features(text: str, kind: str, n: int) -> np.ndarray:
    """One uint64 hash per feature occurrence of already-normalised text.

    kind 'word': n-word shingles (the words themselves if there are fewer than n).
    kind 'char': n-character grams over letters/marks with single spaces as word boundaries.
    """
    folded = text.casefold()
    if kind == "word":
        toks = _TOKEN.findall(folded)
        values = np.fromiter((_word_value(t) for t in toks), dtype=np.uint64, count=len(toks))
    elif kind == "char":
        squeezed = _NON_TEXT.sub(" ", folded).strip()
        values = np.frombuffer(squeezed.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    else:
        raise ValueError(f"unknown feature kind {kind!r}")
    if len(values) == 0:
        return values
    return _ngram_hashes(values, n)


def simhash(hashes: np.ndarray) -> int | None:
    """Signed 64-bit SimHash; repeated features weigh by their count. None when there are none."""
    if len(hashes) == 0:
        return None
    bits = np.unpackbits(np.ascontiguousarray(hashes, dtype="<u8").view(np.uint8).reshape(-1, 8),
                         axis=1, bitorder="little")                      # (n, 64), bit i at column i
    votes = 2 * bits.sum(axis=0, dtype=np.int64) - len(hashes)
    value = int(np.packbits(votes > 0, bitorder="little").view("<u8")[0])
    return to_signed(value)


def distinct(hashes: np.ndarray) -> int:
    return int(len(np.unique(hashes)))


def to_signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def to_unsigned(value: int) -> int:
    return value & 0xFFFFFFFFFFFFFFFF


def bands(fp: int, n_bands: int = 4) -> list[int]:
    """Split a fingerprint into n_bands equal bit ranges (low bits first)."""
    width = 64 // n_bands
    mask = (1 << width) - 1
    u = to_unsigned(fp)
    return [(u >> (width * i)) & mask for i in range(n_bands)]


def hamming(a: int, b: int) -> int:
    return (to_unsigned(a) ^ to_unsigned(b)).bit_count()


def similarity(distance: int) -> float:
    """Score stored on simhash links: the share of the 64 bits that agree."""
    return 1.0 - distance / 64.0
