"""Stage 3's compiled (numba) batch kernels: every stored stage-3 column for a whole batch of texts.

The definitions are reference.py's (and tests/fingerprint_reference.py pins
both): a word is a maximal run of word characters (`reference.char_classes`),
its value the first 8 bytes (little-endian) of BLAKE2b over its UTF-8 bytes; a
character gram runs over code points; an n-gram's hash is the multiply-add
chain over its members finished with the splitmix64 mixer; a fingerprint bit
is set when more than half of the feature occurrences (or, for the set
SimHash, of the distinct shingles) have it.

Here the same arithmetic runs in numba over the UTF-32 code points of a whole
Arrow batch (texts laid end to end, with offsets), so Python is called once per
batch instead of once per word. BLAKE2b is written out below (RFC 7693) because
numba cannot call hashlib; the reference test checks it bit for bit.

- `fingerprint_batch`: the seed fingerprint and distinct feature count per text.
- `keys_batch`: what `fingerprint_batch` gives plus the set columns: the sorted
  distinct 32-bit shingle hashes (`reference.shingle_set`), their SimHash
  (`reference.set_simhash`, stored simhash_w) and the MinHash band hashes
  (`reference.minhash_bands`, stored mh_bands). keys.SimhashKeys calls it.
- `shingle_sets`: the same kernel for verification, which needs only the sets
  (of every document it is given).
- `numbers_and_names`: `reference.numbers_of` and `reference.names_of` of a whole
  batch, their regex scans compiled (`evidence_batch` finds the spans; Python
  cuts, de-duplicates and sorts them).

Where the set features are the seed's (English: word 3-shingles both) the seed's
occurrence hashes are reused as they are; otherwise (Bangla: char 4-gram seed,
word 3-shingle set) the set features are hashed once more, through the same
word cache.

Imports only reference.py of this package.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit

from .reference import BANGLA_DIGITS, GOLDEN, char_classes, evidence_classes

_IV = np.array([0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
                0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179], dtype=np.uint64)
_SIGMA = np.array([
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
], dtype=np.int64)

KIND_WORD, KIND_CHAR = 0, 1
KIND_CODES = {"word": KIND_WORD, "char": KIND_CHAR}     # a LanguageSpec's feature kinds


@njit(inline="always")
def _rotr(x, n):
    return (x >> np.uint64(n)) | (x << np.uint64(64 - n))


@njit(inline="always")
def _g(a, b, c, d, x, y):
    a = a + b + x
    d = _rotr(d ^ a, 32)
    c = c + d
    b = _rotr(b ^ c, 24)
    a = a + b + y
    d = _rotr(d ^ a, 16)
    c = c + d
    b = _rotr(b ^ c, 63)
    return a, b, c, d


@njit(cache=True)
def blake2b64(data, n):
    """First 8 bytes (as a little-endian uint64) of unkeyed BLAKE2b with digest size 8 over data[:n].

    The state lives in scalars (registers), not arrays: this runs once per word.
    """
    h0, h1, h2, h3 = _IV[0] ^ np.uint64(0x01010008), _IV[1], _IV[2], _IV[3]   # digest 8, no key, fanout/depth 1
    h4, h5, h6, h7 = _IV[4], _IV[5], _IV[6], _IV[7]
    m = np.zeros(16, dtype=np.uint64)
    pos = 0
    while True:
        take = min(128, n - pos)
        m[:] = 0
        for i in range(take):
            m[i >> 3] |= np.uint64(data[pos + i]) << np.uint64(8 * (i & 7))
        pos += take
        last = pos >= n
        v0, v1, v2, v3, v4, v5, v6, v7 = h0, h1, h2, h3, h4, h5, h6, h7
        v8, v9, v10, v11 = _IV[0], _IV[1], _IV[2], _IV[3]
        v12, v13, v14, v15 = _IV[4] ^ np.uint64(pos), _IV[5], _IV[6], _IV[7]
        if last:
            v14 = ~v14
        for r in range(12):
            s = _SIGMA[r % 10]
            v0, v4, v8, v12 = _g(v0, v4, v8, v12, m[s[0]], m[s[1]])
            v1, v5, v9, v13 = _g(v1, v5, v9, v13, m[s[2]], m[s[3]])
            v2, v6, v10, v14 = _g(v2, v6, v10, v14, m[s[4]], m[s[5]])
            v3, v7, v11, v15 = _g(v3, v7, v11, v15, m[s[6]], m[s[7]])
            v0, v5, v10, v15 = _g(v0, v5, v10, v15, m[s[8]], m[s[9]])
            v1, v6, v11, v12 = _g(v1, v6, v11, v12, m[s[10]], m[s[11]])
            v2, v7, v8, v13 = _g(v2, v7, v8, v13, m[s[12]], m[s[13]])
            v3, v4, v9, v14 = _g(v3, v4, v9, v14, m[s[14]], m[s[15]])
        h0 ^= v0 ^ v8
        h1 ^= v1 ^ v9
        h2 ^= v2 ^ v10
        h3 ^= v3 ^ v11
        h4 ^= v4 ^ v12
        h5 ^= v5 ^ v13
        h6 ^= v6 ^ v14
        h7 ^= v7 ^ v15
        if last:
            return h0


@njit(inline="always")
def _word_hash(cps, start, end):
    """FNV-1a over the code points, mixed: the word's slot in the cache (never its value)."""
    h = np.uint64(0xCBF29CE484222325)
    for i in range(start, end):
        h = (h ^ np.uint64(cps[i])) * np.uint64(0x100000001B3)
    return mix_one(h) | np.uint64(1)           # 0 marks an empty slot


@njit(cache=True)
def _cached(cps, start, end, cache, arena, state):
    """(value, True) when the word cps[start:end] is in the cache, else (0, False).

    A hit compares the stored code points, not only the hash: the cache can never
    change a fingerprint.
    """
    h = _word_hash(cps, start, end)
    mask = np.uint64(cache.shape[0] - 1)
    slot = h & mask
    length = end - start
    while cache[slot, 0] != 0:
        if cache[slot, 0] == h and cache[slot, 3] == length:
            at = np.int64(cache[slot, 2])
            same = True
            for k in range(length):
                if arena[at + k] != cps[start + k]:
                    same = False
                    break
            if same:
                return cache[slot, 1], True
        slot = (slot + np.uint64(1)) & mask
    return np.uint64(0), False


@njit(cache=True)
def _remember(cps, start, end, value, cache, arena, state):
    """Store a word's value; when the table is half full or the arena full, start over empty."""
    length = end - start
    if length > 64:
        return                               # long tokens are rare; not worth the arena
    if 2 * (state[1] + 1) > cache.shape[0] or state[0] + length > arena.shape[0]:
        cache[:, 0] = 0
        state[0] = 0
        state[1] = 0
    h = _word_hash(cps, start, end)
    mask = np.uint64(cache.shape[0] - 1)
    slot = h & mask
    while cache[slot, 0] != 0:
        slot = (slot + np.uint64(1)) & mask
    at = state[0]
    for k in range(length):
        arena[at + k] = cps[start + k]
    cache[slot, 0] = h
    cache[slot, 1] = value
    cache[slot, 2] = np.uint64(at)
    cache[slot, 3] = np.uint64(length)
    state[0] = at + length
    state[1] += 1


class WordCache:
    """Word values (BLAKE2b) kept from batch to batch in one Python worker: a word is hashed once.

    Open addressing over `slots` rows of (hash, value, arena offset, length); the
    code points themselves live in `arena`. About 40 MB with the defaults.
    """

    def __init__(self, slots: int = 1 << 20, arena: int = 1 << 22):
        self.table = np.zeros((slots, 4), dtype=np.uint64)
        self.arena = np.zeros(arena, dtype=np.uint32)
        self.state = np.zeros(2, dtype=np.int64)      # arena used, entries

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.table, self.arena, self.state


@lru_cache(maxsize=1)
def word_cache() -> WordCache:
    return WordCache()


@njit(inline="always")
def mix_one(x):
    """reference.mix64 of one uint64, compiled (inlined into the kernels that call it)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True)
def _utf8(cps, start, end, out):
    """UTF-8 bytes of cps[start:end] into out; returns the length (no surrogates reach here)."""
    k = 0
    for i in range(start, end):
        c = cps[i]
        if c < 0x80:
            out[k] = c
            k += 1
        elif c < 0x800:
            out[k] = 0xC0 | (c >> 6)
            out[k + 1] = 0x80 | (c & 0x3F)
            k += 2
        elif c < 0x10000:
            out[k] = 0xE0 | (c >> 12)
            out[k + 1] = 0x80 | ((c >> 6) & 0x3F)
            out[k + 2] = 0x80 | (c & 0x3F)
            k += 3
        else:
            out[k] = 0xF0 | (c >> 18)
            out[k + 1] = 0x80 | ((c >> 12) & 0x3F)
            out[k + 2] = 0x80 | ((c >> 6) & 0x3F)
            out[k + 3] = 0x80 | (c & 0x3F)
            k += 4
    return k


@njit(cache=True)
def _new_word_value(cps, start, end, cache, arena, state):
    """BLAKE2b value of a word not in the cache, which then remembers it."""
    buf = np.empty(4 * (end - start), dtype=np.uint8)
    value = blake2b64(buf, _utf8(cps, start, end, buf))
    _remember(cps, start, end, value, cache, arena, state)
    return value


@njit(cache=True)
def _word_values(cps, start, end, is_word, values, cache, arena, state):
    """The values of the words of cps[start:end] into values; returns how many.

    A miss (rare once the cache is warm) is handled in its own function: with
    BLAKE2b and a growing byte buffer compiled into it, this loop ran twice as slow
    (and a character loop compiled beside them six times)."""
    n = 0
    i = start
    while i < end:
        if is_word[cps[i]]:
            j = i + 1
            while j < end and is_word[cps[j]]:
                j += 1
            value, found = _cached(cps, i, j, cache, arena, state)
            if not found:
                value = _new_word_value(cps, i, j, cache, arena, state)
            values[n] = value
            n += 1
            i = j
        else:
            i += 1
    return n


@njit(cache=True)
def _char_values(cps, start, end, is_text, values):
    """The text code points of cps[start:end] into values, a single space (32) where others
    stood between them; returns how many."""
    n = 0
    gap = False
    for i in range(start, end):
        c = cps[i]
        if is_text[c]:
            if gap and n > 0:
                values[n] = 32
                n += 1
            values[n] = c
            n += 1
            gap = False
        else:
            gap = True
    return n


@njit(cache=True)
def _values(cps, start, end, kind, is_word, is_text, values, cache, arena, state):
    """The feature members of one text: word values or code points (with single-space boundaries)."""
    if kind == KIND_WORD:
        return _word_values(cps, start, end, is_word, values, cache, arena, state)
    return _char_values(cps, start, end, is_text, values)


@njit(cache=True)
def _bit_counts(hashes, m, counts):
    """counts[b] = how many of hashes[:m] have bit b set.

    Eight byte-wide lanes count bits j, j+8, .., j+56 of a hash in one addition
    each (8 operations per hash instead of 64); lanes are emptied before a byte
    could overflow.
    """
    counts[:] = 0
    lanes = np.zeros(8, dtype=np.uint64)
    ones = np.uint64(0x0101010101010101)
    i = 0
    while i < m:
        stop = min(m, i + 255)
        lanes[:] = 0
        for t in range(i, stop):
            h = hashes[t]
            for j in range(8):
                lanes[j] += (h >> np.uint64(j)) & ones
        for j in range(8):
            x = lanes[j]
            for k in range(8):
                counts[8 * k + j] += (x >> np.uint64(8 * k)) & np.uint64(0xFF)
        i = stop


@njit(cache=True)
def _count_distinct(hashes, m, table):
    """Distinct values among hashes[:m] with an open-addressing set (table: zeros, size a power of
    two >= 2m; left zeroed again). The hashes are already mixed, so their low bits index well."""
    mask = np.uint64(table.shape[0] - 1)
    n = 0
    has_zero = False
    for i in range(m):
        h = hashes[i]
        if h == 0:
            has_zero = True
            continue
        slot = h & mask
        while table[slot] != 0 and table[slot] != h:
            slot = (slot + np.uint64(1)) & mask
        if table[slot] == 0:
            table[slot] = h
            n += 1
    for i in range(m):                      # clear only what was set
        slot = hashes[i] & mask
        while table[slot] != 0:
            table[slot] = 0
            slot = (slot + np.uint64(1)) & mask
    return n + (1 if has_zero else 0)


@njit(cache=True)
def feature_hashes(cps, start, end, kind, g, is_word, is_text, values, hashes, cache, arena, state):
    """hashes[:m] = one uint64 per feature occurrence of cps[start:end] (what `features` returns);
    returns m. values, hashes: scratch of at least 2 * (end - start) + 1."""
    nv = _values(cps, start, end, kind, is_word, is_text, values, cache, arena, state)
    if nv == 0:
        return 0
    if nv < g:
        for i in range(nv):
            hashes[i] = mix_one(values[i])
        return nv
    # Window i's chain, acc = mix(acc * K + values[i + k]) for k = 1 .. g-1, advanced one member
    # for all windows at a time: the same arithmetic, in loops without a dependency from one
    # iteration to the next, which the compiler vectorises.
    m = nv - g + 1
    k_mul = np.uint64(0x9E3779B97F4A7C15)
    hashes[:m] = values[:m]
    for k in range(1, g):
        for i in range(m):
            hashes[i] = mix_one(hashes[i] * k_mul + values[i + k])
    for i in range(m):
        hashes[i] = mix_one(hashes[i])
    return m


@njit(cache=True)
def simhash_bits(hashes, m, counts):
    """Unsigned SimHash of hashes[:m] (m > 0): bit b set when more than half of them have it."""
    _bit_counts(hashes, m, counts)
    fp = np.uint64(0)
    for b in range(64):
        if 2 * counts[b] - m > 0:
            fp |= np.uint64(1) << np.uint64(b)
    return fp


@njit(cache=True)
def scratch_size(offsets):
    """Length of the per-text scratch arrays: a text of L code points has at most 2L + 1 members."""
    longest = 0
    for d in range(offsets.shape[0] - 1):
        longest = max(longest, offsets[d + 1] - offsets[d])
    return 2 * longest + 1


@njit(cache=True)
def distinct_table(size):
    """Zeroed open-addressing table for `_count_distinct` over up to size hashes."""
    slots = 1
    while slots < 2 * size:
        slots *= 2
    return np.zeros(slots, dtype=np.uint64)


@njit(cache=True)
def seed_columns(hashes, m, counts, table):
    """(unsigned SimHash, distinct features) of the occurrences hashes[:m]; (0, 0) when m is 0."""
    if m == 0:
        return np.uint64(0), 0
    return simhash_bits(hashes, m, counts), _count_distinct(hashes, m, table)


@njit(cache=True)
def fingerprint_batch(cps, offsets, kinds, ngrams, is_word, is_text, cache, arena, state):
    """Per text i (cps[offsets[i]:offsets[i+1]], already case-folded): unsigned SimHash, distinct
    features and feature occurrences. kinds[i] < 0 skips the text (0 features).
    cache, arena, state: a WordCache's arrays (word values survive from batch to batch)."""
    n_docs = offsets.shape[0] - 1
    fps = np.zeros(n_docs, dtype=np.uint64)
    distinct = np.zeros(n_docs, dtype=np.int64)
    occurrences = np.zeros(n_docs, dtype=np.int64)
    size = scratch_size(offsets)
    values = np.empty(size, dtype=np.uint64)
    hashes = np.empty(size, dtype=np.uint64)
    counts = np.zeros(64, dtype=np.int64)
    table = distinct_table(size)
    for d in range(n_docs):
        if kinds[d] < 0:
            continue
        m = feature_hashes(cps, offsets[d], offsets[d + 1], kinds[d], ngrams[d], is_word, is_text,
                           values, hashes, cache, arena, state)
        fps[d], distinct[d] = seed_columns(hashes, m, counts, table)
        occurrences[d] = m
    return fps, distinct, occurrences


def code_points(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """UTF-32 code points of texts laid end to end, and the offsets of each (len + 1)."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    cps = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32)
    return cps, offsets


# ---------------------------------------------------------------- the set columns

@njit(cache=True)
def radix_sort32(a, m, tmp):
    """a[:m] sorted ascending: an LSD radix sort, one byte per pass through tmp (at least m long).

    Four linear passes instead of a comparison sort's m log m steps; after an even
    number of passes the values are back in a."""
    counts = np.empty(256, dtype=np.int64)
    src, dst = a, tmp
    for shift in range(0, 32, 8):
        counts[:] = 0
        for i in range(m):
            counts[(src[i] >> shift) & 0xFF] += 1
        total = 0
        for b in range(256):
            c = counts[b]
            counts[b] = total
            total += c
        for i in range(m):
            v = src[i]
            b = (v >> shift) & 0xFF
            dst[counts[b]] = v
            counts[b] += 1
        src, dst = dst, src


@njit(cache=True)
def distinct_high32(hashes, m, out, tmp):
    """out[:k] = the sorted distinct high 32 bits of hashes[:m] (as uint32); returns k.
    tmp: uint32 scratch of at least m."""
    if m == 0:
        return 0
    for i in range(m):
        out[i] = np.uint32(hashes[i] >> np.uint64(32))
    radix_sort32(out, m, tmp)
    k = 1
    for i in range(1, m):
        if out[i] != out[k - 1]:
            out[k] = out[i]
            k += 1
    return k


@njit(cache=True)
def set_simhash_bits(shingles, k, scratch, counts):
    """Unsigned SimHash of a set of k > 0 shingles, each voting once (reference.set_simhash)."""
    for i in range(k):
        scratch[i] = mix_one(np.uint64(shingles[i]) * GOLDEN)
    return simhash_bits(scratch, k, counts)


@njit(cache=True)
def minhash_band_hashes(shingles, k, salts, n_bands, rows, scratch, out):
    """out[:n_bands] = the band hashes of the n_bands x rows MinHash signature of k > 0 shingles
    (reference.minhash_bands): function p is splitmix64(premixed(x) XOR salts[p])."""
    for i in range(k):
        scratch[i] = mix_one(np.uint64(shingles[i]) * GOLDEN + np.uint64(1))
    for b in range(n_bands):
        acc = np.uint64(b + 1)
        for j in range(rows):
            salt = salts[b * rows + j]
            low = np.uint64(0xFFFFFFFFFFFFFFFF)
            for i in range(k):
                v = mix_one(scratch[i] ^ salt)
                if v < low:
                    low = v
            acc = mix_one(acc * GOLDEN + low)
        out[b] = acc


@njit(cache=True)
def keys_batch(cps, offsets, kinds, ngrams, minimum, set_kinds, set_ngrams, salts, n_bands, rows,
               is_word, is_text, cache, arena, state):
    """Per text d (cps[offsets[d]:offsets[d+1]], already case-folded; kinds[d] < 0 skips it):

    seed, n_features: the seed SimHash (unsigned) and its distinct features, as fingerprint_batch;
    seed_valid: kinds >= 0 and n_features >= max(minimum, 1), the documents stage 3 sees;
    shingle_offsets, shingles: the sorted distinct 32-bit set-feature hashes of each seed_valid
      document (uint32; view as int32 for shingle_set's values), empty for the others;
    simhash_w, mh_bands: the set SimHash (unsigned) and the n_bands MinHash band hashes (unsigned),
      meaningful where simhash_w_valid = seed_valid and the set is not empty.
    """
    n_docs = offsets.shape[0] - 1
    seed = np.zeros(n_docs, dtype=np.uint64)
    n_features = np.zeros(n_docs, dtype=np.int64)
    seed_valid = np.zeros(n_docs, dtype=np.bool_)
    simhash_w = np.zeros(n_docs, dtype=np.uint64)
    simhash_w_valid = np.zeros(n_docs, dtype=np.bool_)
    mh_bands = np.zeros((n_docs, n_bands), dtype=np.uint64)
    shingle_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    shingles = np.empty(max(16, cps.shape[0] // 4), dtype=np.uint32)
    size = scratch_size(offsets)
    values = np.empty(size, dtype=np.uint64)
    hashes = np.empty(size, dtype=np.uint64)
    scratch = np.empty(size, dtype=np.uint64)
    sorted_set = np.empty(size, dtype=np.uint32)
    sort_tmp = np.empty(size, dtype=np.uint32)
    counts = np.zeros(64, dtype=np.int64)
    table = distinct_table(size)
    used = 0
    for d in range(n_docs):
        shingle_offsets[d] = used
        if kinds[d] < 0:
            continue
        start, end = offsets[d], offsets[d + 1]
        m = feature_hashes(cps, start, end, kinds[d], ngrams[d], is_word, is_text, values, hashes,
                           cache, arena, state)
        seed[d], n_features[d] = seed_columns(hashes, m, counts, table)
        if n_features[d] == 0 or n_features[d] < minimum[d]:
            continue
        seed_valid[d] = True
        if set_kinds[d] != kinds[d] or set_ngrams[d] != ngrams[d]:
            m = feature_hashes(cps, start, end, set_kinds[d], set_ngrams[d], is_word, is_text, values,
                               hashes, cache, arena, state)
        k = distinct_high32(hashes, m, sorted_set, sort_tmp)
        if k == 0:
            continue
        simhash_w_valid[d] = True
        simhash_w[d] = set_simhash_bits(sorted_set, k, scratch, counts)
        minhash_band_hashes(sorted_set, k, salts, n_bands, rows, scratch, mh_bands[d])
        if used + k > shingles.shape[0]:
            grown = np.empty(max(2 * shingles.shape[0], used + k), dtype=np.uint32)
            grown[:used] = shingles[:used]
            shingles = grown
        shingles[used:used + k] = sorted_set[:k]
        used += k
    shingle_offsets[n_docs] = used
    return seed, n_features, seed_valid, simhash_w, simhash_w_valid, mh_bands, shingle_offsets, shingles[:used]


def shingle_sets(folded: list[str], kinds: np.ndarray, ngrams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, shingles): text d's shingle_set (sorted distinct 32-bit hashes as int32) is
    shingles[offsets[d]:offsets[d + 1]], for every text, however few features it has.

    folded: case-folded texts; kinds, ngrams: each text's set features (kinds < 0: none).
    keys_batch with the set features as the seed and no minimum: a text is then valid exactly
    when it has a feature, and no MinHash band (n_bands 0) is computed.
    """
    is_word, is_text = char_classes()
    *_, offsets, shingles = keys_batch(*code_points(folded), kinds, ngrams, np.zeros(len(folded), np.int64),
                                       kinds, ngrams, np.empty(0, np.uint64), 0, 0, is_word, is_text,
                                       *word_cache().arrays())
    return offsets, shingles.view(np.int32)


# ---------------------------------------------------------------- numbers and names (verification evidence)

@njit(inline="always")
def _put(spans, n, a, b, fill):
    """Row n of spans set to (a, b) when filling (the counting pass only counts); the next row."""
    if fill:
        spans[n, 0] = a
        spans[n, 1] = b
    return n + 1


@njit(cache=True)
def _evidence_spans(cps, start, end, classes, fill, num_spans, n_num, name_spans, n_name):
    """The numbers and names of one text (cps[start:end]) as (start, end) spans relative to start,
    written from row n_num / n_name on when fill; returns the two counts after it. classes:
    reference.evidence_classes (the bits name the characters each pattern tests).

    numbers: re.findall(r"\\d\\d*(?:[.,:]\\d+)*"), a leftmost-longest scan: a run of digits, then
    as many separator-and-digits groups as follow. names: what names_of keeps of
    re.finditer(r"[A-Z][\\w'-]*[a-z][\\w'-]*"): after a capital the pattern takes the whole run of
    [\\w'-] characters when that run holds an a-z (the first star backs off to the run's last a-z,
    the second takes the rest), and fails otherwise, as it then fails at every later capital of
    the same run (a suffix of it); names_of then wants whitespace before it, and before that a
    character other than . ! ? \" '."""
    i = start
    while i < end:
        if classes[cps[i]] & 2:
            j = i + 1
            while j < end and classes[cps[j]] & 2:
                j += 1
            while j + 1 < end and classes[cps[j]] & 16 and classes[cps[j + 1]] & 2:
                j += 2
                while j < end and classes[cps[j]] & 2:
                    j += 1
            n_num = _put(num_spans, n_num, i - start, j - start, fill)
            i = j
        else:
            i += 1
    i = start
    while i < end:
        c = cps[i]
        if 65 <= c <= 90:
            j = i + 1
            lower = False
            while j < end and classes[cps[j]] & 33:      # a word character or a name mark
                if 97 <= cps[j] <= 122:
                    lower = True
                j += 1
            if lower:
                k = i
                while k > start and classes[cps[k - 1]] & 4:
                    k -= 1
                if start < k < i and not classes[cps[k - 1]] & 8:     # not after a sentence's end
                    n_name = _put(name_spans, n_name, i - start, j - start, fill)
            i = j
        else:
            i += 1
    return n_num, n_name


@njit(cache=True)
def evidence_batch(cps, offsets, classes):
    """Every text's number and name spans: text d's are rows num_offsets[d]:num_offsets[d + 1] of
    num_spans (and the same for names), each (start, end) in code points from the text's start.
    Two passes, one counting, one filling, so nothing is allocated per text."""
    n = len(offsets) - 1
    num_offsets = np.zeros(n + 1, dtype=np.int64)
    name_offsets = np.zeros(n + 1, dtype=np.int64)
    empty = np.zeros((0, 2), dtype=np.int64)
    for d in range(n):
        a, b = _evidence_spans(cps, offsets[d], offsets[d + 1], classes, False, empty, 0, empty, 0)
        num_offsets[d + 1] = num_offsets[d] + a
        name_offsets[d + 1] = name_offsets[d] + b
    num_spans = np.empty((num_offsets[n], 2), dtype=np.int64)
    name_spans = np.empty((name_offsets[n], 2), dtype=np.int64)
    for d in range(n):
        _evidence_spans(cps, offsets[d], offsets[d + 1], classes, True, num_spans, num_offsets[d],
                        name_spans, name_offsets[d])
    return num_offsets, num_spans, name_offsets, name_spans


def numbers_and_names(keys: list[str]) -> tuple[list[list[str]], list[list[str]]]:
    """([numbers_of(k) for k in keys], [names_of(k) for k in keys]), one compiled scan for the batch."""
    num_offsets, num_spans, name_offsets, name_spans = evidence_batch(*code_points(keys), evidence_classes())
    # Plain lists, one per span column: tolist() of the (n, 2) arrays (a list per span) cost more
    # than the scan itself.
    num_offsets, name_offsets = num_offsets.tolist(), name_offsets.tolist()
    num_a, num_b = num_spans[:, 0].tolist(), num_spans[:, 1].tolist()
    name_a, name_b = name_spans[:, 0].tolist(), name_spans[:, 1].tolist()
    digits = BANGLA_DIGITS
    nums, names = [], []
    for d, key in enumerate(keys):
        x, y = num_offsets[d], num_offsets[d + 1]
        nums.append(sorted({key[a:b].translate(digits) for a, b in zip(num_a[x:y], num_b[x:y])}))
        x, y = name_offsets[d], name_offsets[d + 1]
        names.append(sorted({key[a:b] for a, b in zip(name_a[x:y], name_b[x:y])}))
    return nums, names
