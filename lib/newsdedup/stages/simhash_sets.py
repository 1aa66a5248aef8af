"""Stage 3's compiled batch path for every key column: the seed SimHash and the set columns.

`keys_batch` gives, for all texts of an Arrow batch in one call, what
simhash_kernel.fingerprint_batch gives (seed fingerprint, distinct features)
plus what simhash_features spells out per document in numpy: the sorted
distinct 32-bit shingle hashes (`shingle_set`), their SimHash (`set_simhash`)
and the MinHash LSH band hashes (`minhash_bands`). The numpy functions stay the
readable definition (tools, tests); tests/fingerprint_reference.py pins both paths
to the same values bit for bit. `shingle_sets` runs the same kernel for the
verification step, which needs only the sets (of every document it is given).

Where the set features are the seed's (English: word 3-shingles both) the seed's
occurrence hashes are reused as they are; otherwise (Bangla: char 4-gram seed,
word 3-shingle set) the set features are hashed once more, through the same
word cache.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .simhash_kernel import (_mix, distinct_table, feature_hashes, scratch_size, seed_columns,
                             simhash_bits)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)     # simhash_features._GOLDEN


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
    """Unsigned SimHash of a set of k > 0 shingles, each voting once (simhash_features.set_simhash)."""
    for i in range(k):
        scratch[i] = _mix(np.uint64(shingles[i]) * _GOLDEN)
    return simhash_bits(scratch, k, counts)


@njit(cache=True)
def minhash_band_hashes(shingles, k, salts, n_bands, rows, scratch, out):
    """out[:n_bands] = the band hashes of the n_bands x rows MinHash signature of k > 0 shingles
    (simhash_features.minhash_bands): function p is splitmix64(premixed(x) XOR salts[p])."""
    for i in range(k):
        scratch[i] = _mix(np.uint64(shingles[i]) * _GOLDEN + np.uint64(1))
    for b in range(n_bands):
        acc = np.uint64(b + 1)
        for j in range(rows):
            salt = salts[b * rows + j]
            low = np.uint64(0xFFFFFFFFFFFFFFFF)
            for i in range(k):
                v = _mix(scratch[i] ^ salt)
                if v < low:
                    low = v
            acc = _mix(acc * _GOLDEN + low)
        out[b] = acc


@njit(cache=True)
def keys_batch(cps, offsets, kinds, ngrams, minimum, set_kinds, set_ngrams, salts, n_bands, rows,
               is_word, is_text, cache, arena, state):
    """Per text d (cps[offsets[d]:offsets[d+1]], already case-folded; kinds[d] < 0 skips it):

    fps, distinct: the seed SimHash (unsigned) and its distinct features, as fingerprint_batch;
    valid: kinds >= 0 and distinct >= max(minimum, 1), the documents stage 3 sees;
    shingle_offsets, shingles: the sorted distinct 32-bit set-feature hashes of each valid
      document (uint32; view as int32 for shingle_set's values), empty for the others;
    w, mh: the set SimHash (unsigned) and the n_bands MinHash band hashes (unsigned), meaningful
      where w_valid = valid and the set is not empty.
    """
    n_docs = offsets.shape[0] - 1
    fps = np.zeros(n_docs, dtype=np.uint64)
    distinct = np.zeros(n_docs, dtype=np.int64)
    valid = np.zeros(n_docs, dtype=np.bool_)
    w = np.zeros(n_docs, dtype=np.uint64)
    w_valid = np.zeros(n_docs, dtype=np.bool_)
    mh = np.zeros((n_docs, n_bands), dtype=np.uint64)
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
        fps[d], distinct[d] = seed_columns(hashes, m, counts, table)
        if distinct[d] == 0 or distinct[d] < minimum[d]:
            continue
        valid[d] = True
        if set_kinds[d] != kinds[d] or set_ngrams[d] != ngrams[d]:
            m = feature_hashes(cps, start, end, set_kinds[d], set_ngrams[d], is_word, is_text, values,
                               hashes, cache, arena, state)
        k = distinct_high32(hashes, m, sorted_set, sort_tmp)
        if k == 0:
            continue
        w_valid[d] = True
        w[d] = set_simhash_bits(sorted_set, k, scratch, counts)
        minhash_band_hashes(sorted_set, k, salts, n_bands, rows, scratch, mh[d])
        if used + k > shingles.shape[0]:
            grown = np.empty(max(2 * shingles.shape[0], used + k), dtype=np.uint32)
            grown[:used] = shingles[:used]
            shingles = grown
        shingles[used:used + k] = sorted_set[:k]
        used += k
    shingle_offsets[n_docs] = used
    return fps, distinct, valid, w, w_valid, mh, shingle_offsets, shingles[:used]


def shingle_sets(folded: list[str], kinds: np.ndarray, ngrams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, shingles): text d's shingle_set (sorted distinct 32-bit hashes as int32) is
    shingles[offsets[d]:offsets[d + 1]], for every text, however few features it has.

    folded: case-folded texts; kinds, ngrams: each text's set features (kinds < 0: none).
    keys_batch with the set features as the seed and no minimum: a text is then valid exactly
    when it has a feature, and no MinHash band (n_bands 0) is computed.
    """
    from .simhash_kernel import char_classes, code_points, word_cache

    is_word, is_text = char_classes()
    *_, offsets, shingles = keys_batch(*code_points(folded), kinds, ngrams, np.zeros(len(folded), np.int64),
                                       kinds, ngrams, np.empty(0, np.uint64), 0, 0, is_word, is_text,
                                       *word_cache().arrays())
    return offsets, shingles.view(np.int32)
