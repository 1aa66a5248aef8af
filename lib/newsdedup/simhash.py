"""Stage 3: 64-bit SimHash over language-specific features, banding and Hamming distance.

Features are word shingles for English (word order carries the signal, words are
short and many) and character n-grams for Bangla (rich inflection and
inconsistent spacing/joiners make word tokens unstable). Fingerprints are
returned as signed 64-bit ints so they fit Spark's LongType unchanged.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from typing import Mapping

import numpy as np

_BIT_SHIFTS = np.arange(64, dtype=np.uint64)
_TOKEN = re.compile(r"\w+")
_NON_TEXT = re.compile(r"[^\w\u0980-\u09ff]+")


def features(text: str, kind: str, n: int) -> Counter:
    """Weighted features of already-normalised text: word n-gram shingles or character n-grams."""
    folded = text.casefold()
    if kind == "word":
        toks = _TOKEN.findall(folded)
        if len(toks) < n:
            return Counter(toks)
        return Counter(" ".join(toks[i:i + n]) for i in range(len(toks) - n + 1))
    if kind == "char":
        # Keep Bengali combining signs (they are not \w) and single spaces as word boundaries.
        squeezed = _NON_TEXT.sub(" ", folded).strip()
        if len(squeezed) < n:
            return Counter([squeezed]) if squeezed else Counter()
        return Counter(squeezed[i:i + n] for i in range(len(squeezed) - n + 1))
    raise ValueError(f"unknown feature kind {kind!r}")


def _hash64(feature: str) -> int:
    return int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")


def simhash(feats: Mapping[str, int]) -> int | None:
    """Signed 64-bit SimHash of weighted features; None when there are none."""
    if not feats:
        return None
    hashes = np.fromiter((_hash64(f) for f in feats), dtype=np.uint64, count=len(feats))
    weights = np.fromiter(feats.values(), dtype=np.int64, count=len(feats))
    bits = ((hashes[:, None] >> _BIT_SHIFTS) & np.uint64(1)).astype(np.int64)   # (n, 64)
    votes = (weights[:, None] * (2 * bits - 1)).sum(axis=0)
    value = 0
    for i in np.flatnonzero(votes > 0):
        value |= 1 << int(i)
    return to_signed(value)


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
