"""NFKC that hands Python's unicodedata only the stretches of a text that can change.

unicodedata.normalize("NFKC", text) is exact but slow on Bangla: its quick
check answers "maybe" for every vowel sign that could compose, so nearly every
Bangla text is normalised in full (about 60 ns a character). Most of such a
text is already normal. Normalisation only ever changes a text between two
*boundaries* (UAX #15, section 9): a character with canonical combining class 0
that is NFKC-stable on its own and never composes with a character before it.
This module finds, in compiled code, the stretches around the characters that
may change (not NFKC-stable alone, able to compose with the character before
them, or combining marks out of canonical order), normalises just those with
unicodedata, and copies the rest. The result is unicodedata's, by construction
and by test (tests/test_properties.py compares the two on generated text).
"""

from __future__ import annotations

import unicodedata

import numpy as np
from numba import njit

from .codepoints import per_machine

_HANGUL_V = (0x1161, 0x1175)
_HANGUL_T = (0x11A8, 0x11C2)


@per_machine
def tables() -> tuple[np.ndarray, np.ndarray]:
    """(ccc, flags) per code point. flags: 1 not NFKC-stable alone; 2 composes with a predecessor;
    8 of those, a class-0 second half (composes only with the character right before it);
    4 may be that character."""
    ccc = np.zeros(0x110000, dtype=np.uint8)
    flags = np.zeros(0x110000, dtype=np.uint8)
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            flags[cp] |= 1                      # lone surrogates: let unicodedata decide
            continue
        ch = chr(cp)
        ccc[cp] = unicodedata.combining(ch)
        if unicodedata.normalize("NFKC", ch) != ch:
            flags[cp] |= 1
        dec = unicodedata.decomposition(ch)
        if dec and not dec.startswith("<"):
            parts = dec.split()
            if len(parts) == 2 and unicodedata.normalize("NFC", chr(int(parts[0], 16)) + chr(int(parts[1], 16))) == ch:
                flags[int(parts[1], 16)] |= 2   # the second half of a primary composite
    # A second half with combining class 0 (Bangla া and ৗ, other Indic vowel parts) can only
    # compose with the character right before it: such a character gets bit 4 (the first halves,
    # and anything whose decomposition ends with one), and the second half is suspicious only
    # after it. Hangul V and T jamo stay suspicious everywhere (algorithmic composition).
    firsts = set()
    for cp in range(0x110000):
        dec = unicodedata.decomposition(chr(cp)) if not 0xD800 <= cp <= 0xDFFF else ""
        if dec and not dec.startswith("<"):
            parts = [int(x, 16) for x in dec.split()]
            if len(parts) == 2 and ccc[parts[1]] == 0 and unicodedata.normalize(
                    "NFC", chr(parts[0]) + chr(parts[1])) == chr(cp):
                firsts.add(parts[0])
                flags[parts[1]] |= 8            # a class-0 second half
    for cp in range(0x110000):
        if cp in firsts:
            flags[cp] |= 4
        elif not 0xD800 <= cp <= 0xDFFF:
            d = unicodedata.normalize("NFKD", chr(cp))
            if d[-1:] and ord(d[-1]) in firsts:
                flags[cp] |= 4
    flags[_HANGUL_V[0]:_HANGUL_V[1] + 1] |= 2
    flags[_HANGUL_T[0]:_HANGUL_T[1] + 1] |= 2
    flags[_HANGUL_V[0]:_HANGUL_V[1] + 1] &= ~np.uint8(8)
    flags[_HANGUL_T[0]:_HANGUL_T[1] + 1] &= ~np.uint8(8)
    return ccc, flags


@njit(cache=True)
def dirty_spans(cps, ccc, flags):
    """[start, end) stretches of cps that NFKC may change, each from a boundary to a boundary."""
    n = cps.shape[0]
    starts = np.empty(n, dtype=np.int64)
    ends = np.empty(n, dtype=np.int64)
    k = 0
    last_boundary = 0
    prev_ccc = 0
    i = 0
    while i < n:
        c = cps[i]
        cc = ccc[c]
        f = flags[c]
        if f & 8:                                   # class-0 second half: only after a possible first
            suspicious = i > 0 and (flags[cps[i - 1]] & 4) != 0
        else:
            suspicious = (f & 3) != 0 or (cc != 0 and prev_ccc > cc)
        if not suspicious:
            if cc == 0 and f == 0:
                last_boundary = i
            prev_ccc = cc
            i += 1
            continue
        start = last_boundary
        j = i + 1
        while j < n and not (ccc[cps[j]] == 0 and (flags[cps[j]] & 3) == 0):
            j += 1
        if k > 0 and start <= ends[k - 1]:
            ends[k - 1] = j
        else:
            starts[k] = start
            ends[k] = j
            k += 1
        last_boundary = j
        prev_ccc = 0
        i = j
    return starts[:k], ends[:k]


_SPANS: dict[str, str] = {}


def nfkc(text: str) -> str:
    """unicodedata.normalize("NFKC", text), normalising only the stretches that can change."""
    if text.isascii():
        return text
    ccc, flags = tables()
    starts, ends = dirty_spans(np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32), ccc, flags)
    if len(starts) == 0:
        return text
    if len(_SPANS) > 100_000:
        _SPANS.clear()
    parts = []
    at = 0
    for a, b in zip(starts.tolist(), ends.tolist()):
        piece = text[a:b]
        done = _SPANS.get(piece)
        if done is None:
            done = _SPANS[piece] = unicodedata.normalize("NFKC", piece)
        parts.append(text[at:a])
        parts.append(done)
        at = b
    parts.append(text[at:])
    return "".join(parts)
