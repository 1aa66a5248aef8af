"""Stage 3's candidate pairs (Spark, with a compiled bucket scan); verification is verify.py.

Two candidate searches share one bucketing: every document becomes one row per
table and per MinHash band, keyed (lang, found_by, slot, value); rows that share a
key form a bucket and every two rows of a bucket are a candidate. found_by names
the search (TABLES or MINHASH); slot is the table's or the band's index.

- TABLES, generalised Manku tables (Manku, Jain, Das Sarma 2007) over simhash_w:
  64 bits cut into `blocks` blocks; a table per choice of blocks - k of them,
  keyed on those blocks' bits. Two fingerprints within k bits differ in at most
  k blocks, so they agree on some blocks - k blocks: every such pair meets in
  at least one table. A pair is kept only in the first table it matches (both
  fingerprints travel with the rows, so this and the Hamming filter happen
  where the pair is formed: no table pair is ever de-duplicated by a shuffle).
- MINHASH, b x r MinHash bands over the same shingle set: pairs with Jaccard J
  meet with probability 1 - (1 - J^r)^b. Pairs the tables already have (within k
  bits) are dropped before the remaining MinHash pairs are de-duplicated, and so
  are pairs whose simhash_w lie more than the language's minhash_max_hamming bits
  apart (the SimHash gate: one comparison where the pair is formed; band
  collisions of unrelated documents, which grow with the corpus, mostly fall there).

The buckets are formed without a self-join: the rows are shuffled once by
bucket, sorted, and a compiled scan (`bucket_pairs`) walks each partition and
pairs up each run of equal keys. A self-join sorted the same rows twice and
needed a second aggregation for the bucket sizes; the scan has them for free.

A bucket with more than max_band_bucket members is split into chunks of
consecutive fingerprints (so near neighbours stay together); its members are
not compared with every other member, and are returned to be counted and
flagged on their documents rows.

Every candidate is then verified on the two documents' exact shingle sets
(verify.py).
"""

from __future__ import annotations

from functools import lru_cache
from hashlib import blake2b
from itertools import combinations
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ...clustering import cut_lineage
from .kernels import mix_one
from .reference import mix64

if TYPE_CHECKING:
    from ...config import LanguageSpec, SimhashConfig

# found_by, the search that found a candidate: the Manku tables on simhash_w or the MinHash bands.
# Ints for the compiled scan; "tables" / "minhash" in the report counters and split flags.
TABLES, MINHASH = 0, 1


# ---------------------------------------------------------------- table arithmetic (pure)

def block_masks(blocks: int) -> list[int]:
    """64 bits cut into `blocks` contiguous blocks of near-equal width (wider blocks first)."""
    widths = [64 // blocks + (1 if i < 64 % blocks else 0) for i in range(blocks)]
    masks, start = [], 0
    for w in widths:
        masks.append(((1 << w) - 1) << start)
        start += w
    return masks


def table_masks(blocks: int, max_hamming: int) -> list[int]:
    """Signed 64-bit masks of the C(blocks, blocks - max_hamming) tables."""
    masks = block_masks(blocks)
    out = []
    for chosen in combinations(range(blocks), blocks - max_hamming):
        m = 0
        for i in chosen:
            m |= masks[i]
        out.append(m - (1 << 64) if m >= 1 << 63 else m)
    return out


def expected_random_candidates(n_docs: int, blocks: int, max_hamming: int) -> float:
    """Candidates per document from unrelated documents with uniform fingerprints:
    tables x n / 2^(key bits), key bits = the narrowest choice of blocks - k blocks."""
    masks = table_masks(blocks, max_hamming)
    return sum(n_docs / 2.0 ** bin(m & (2 ** 64 - 1)).count("1") for m in masks)


def minhash_candidate_probability(jaccard: float, bands: int, rows: int) -> float:
    return 1.0 - (1.0 - jaccard ** rows) ** bands


# ---------------------------------------------------------------- bucket codes (pure)

def _salt(lang: str, found_by: int, slot: int) -> int:
    """A fixed 64-bit value per (language, search, table or band): codes of different buckets differ."""
    return int.from_bytes(blake2b(f"{lang}\x1f{found_by}\x1f{slot}".encode(), digest_size=8).digest(), "little")


@lru_cache(maxsize=64)
def _layout(lang: str, blocks: int, max_hamming: int, n_bands: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(table masks, table salts, band salts) as uint64 arrays for one language."""
    masks = np.array([m & (2 ** 64 - 1) for m in table_masks(blocks, max_hamming)], np.uint64)
    tables = np.array([_salt(lang, TABLES, t) for t in range(len(masks))], np.uint64)
    bands = np.array([_salt(lang, MINHASH, b) for b in range(n_bands)], np.uint64)
    return masks, tables, bands


def bucket_codes(lang: str | None, simhash_w: int | None, mh_bands: Sequence[int] | None,
                 sim_conf: "SimhashConfig") -> list[int]:
    """The codes of the batch buckets one document falls in: one per Manku table of its
    language (the table's key bits of simhash_w) and one per MinHash band. Empty without
    simhash_w (the batch leaves such documents out of stage 3 too)."""
    if simhash_w is None:
        return []
    spec = sim_conf.language(lang)
    name = lang if lang is not None else "default"     # candidates._exploded: a null lang is "default"
    bands = list(mh_bands or ())
    masks, table_salts, band_salts = _layout(name, spec.blocks, spec.max_hamming, len(bands))
    fp = np.uint64(int(simhash_w) & (2 ** 64 - 1))
    codes = mix64((masks & fp) ^ table_salts)
    if bands:
        values = np.array([int(b) & (2 ** 64 - 1) for b in bands], np.uint64)
        codes = np.concatenate((codes, mix64(values ^ band_salts)))
    return codes.view(np.int64).tolist()


def code_rows(lang: pa.Array, simhash_w: pa.Array, mh_bands: pa.Array,
              sim_conf: "SimhashConfig") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """bucket_codes for a whole Arrow batch at once, flattened: (row, code, is_table), one entry per
    code of each row (a row's codes are exactly bucket_codes' for it, in another order).

    lang: string, simhash_w: int64, mh_bands: list<int64>, all of one batch (Arrays). The closure
    indexes its frontier's codes with it; the stored documents' pass keeps only the codes that meet
    the frontier (code_rows_passing)."""
    n = len(simhash_w)
    has_fp, fps, lengths, values = _fingerprint_arrays(simhash_w, mh_bands)
    names = np.asarray(lang.fill_null("default").to_numpy(zero_copy_only=False), object)
    value_row = np.repeat(np.arange(n), lengths)
    position = np.arange(len(values)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    rows, codes, tables = [], [], []
    for name in np.unique(names[has_fp]) if has_fp.any() else ():
        spec = sim_conf.language(name)
        in_row = has_fp & (names == name)
        mine = np.flatnonzero(in_row)
        # By row, then spread to the band values: comparing the names per value (an object array
        # of about 30 entries a row) took most of this function's time.
        in_lang = in_row[value_row]
        width = int(position[in_lang].max()) + 1 if in_lang.any() else 0
        masks, table_salts, band_salts = _layout(name, spec.blocks, spec.max_hamming, width)
        table_codes = mix64((masks[None, :] & fps[mine][:, None]) ^ table_salts[None, :])
        rows += [np.repeat(mine, len(masks)), value_row[in_lang]]
        codes += [table_codes.ravel(), mix64(values[in_lang] ^ band_salts[position[in_lang]])]
        tables += [np.ones(table_codes.size, bool), np.zeros(int(in_lang.sum()), bool)]
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool)
    return (np.concatenate(rows).astype(np.int64), np.concatenate(codes).view(np.int64),
            np.concatenate(tables))


def _fingerprint_arrays(simhash_w: pa.Array, mh_bands: pa.Array) -> tuple[np.ndarray, ...]:
    """(has a fingerprint, simhash_w as uint64, band values per row, the band values end to end as
    uint64) of a batch: what the bucket codes are computed from."""
    has_fp = ~np.asarray(simhash_w.is_null().to_numpy(zero_copy_only=False), bool)
    fps = np.asarray(simhash_w.fill_null(0).to_numpy(), np.int64).view(np.uint64)
    lengths = np.asarray(pc.list_value_length(mh_bands).fill_null(0).to_numpy(), np.int64)
    values = np.asarray(pc.list_flatten(mh_bands).to_numpy(), np.int64).view(np.uint64)
    return has_fp, fps, lengths, values


# A bitmap of a set of codes' low bits (code_bitmap), at least this many bits per code: about 1 in
# 16 codes outside the set passes it. Up to 2**27 bits (16 MB, broadcast with a closure's index).
BITS_PER_CODE, MAX_BITMAP_BITS = 16, 27


def code_bitmap(codes: np.ndarray) -> np.ndarray:
    """A packed bitmap (uint8) with the bit of each code's low bits set; code_rows_passing tests
    codes against it (a code's low bits, as many as the bitmap's length in bits is a power of two
    of, name its bit: never a false negative, a few false positives; an exact lookup follows).

    Codes are mix64 outputs, so their low bits are spread evenly. Built once per closure round, on
    the driver; a hash set rebuilt for every batch of stored keys (pyarrow's is_in builds its value
    set per call) took most of a pass's time."""
    bits = int(np.clip(np.ceil(np.log2(max(len(codes), 1) * BITS_PER_CODE)), 16, MAX_BITMAP_BITS))
    low = np.asarray(codes, np.int64).view(np.uint64) & np.uint64((1 << bits) - 1)
    bitmap = np.zeros(1 << (bits - 3), np.uint8)
    np.bitwise_or.at(bitmap, low >> np.uint64(3), np.left_shift(1, low & np.uint64(7)).astype(np.uint8))
    return bitmap


@njit(cache=True)
def _codes_passing(lang_of, fps, lengths, values, masks, n_masks, table_salts, band_salts, bitmap):
    """(row, code) of the codes code_rows gives whose bit is set in bitmap, row by row.

    lang_of: each row's index into the per-language arrays, -1 for a row without a fingerprint;
    lengths, values: the rows' band values laid end to end. bitmap: code_bitmap's."""
    n = fps.shape[0]
    low_mask = np.uint64(bitmap.shape[0] * 8 - 1)
    rows = np.empty(n * masks.shape[1] + values.shape[0], np.int64)
    codes = np.empty(rows.shape[0], np.uint64)
    k, start = 0, 0
    for i in range(n):
        lang = lang_of[i]
        if lang >= 0:
            for t in range(n_masks[lang]):
                code = mix_one((masks[lang, t] & fps[i]) ^ table_salts[lang, t])
                low = code & low_mask
                if (bitmap[low >> np.uint64(3)] >> (low & np.uint64(7))) & 1:
                    rows[k], codes[k] = i, code
                    k += 1
            for j in range(lengths[i]):
                code = mix_one(values[start + j] ^ band_salts[lang, j])
                low = code & low_mask
                if (bitmap[low >> np.uint64(3)] >> (low & np.uint64(7))) & 1:
                    rows[k], codes[k] = i, code
                    k += 1
        start += lengths[i]
    return rows[:k], codes[:k]


def code_rows_passing(bitmap: np.ndarray, lang: pa.Array, simhash_w: pa.Array, mh_bands: pa.Array,
                      sim_conf: "SimhashConfig") -> tuple[np.ndarray, np.ndarray]:
    """(row, code) of code_rows' entries whose code's bit is set in bitmap (code_bitmap), computed
    and tested one code at a time: a closure pass meets every stored document's 35 or so codes, and
    most meet nothing, so the arrays code_rows builds for them were most of its time. The arguments
    are code_rows' (Arrays of one batch)."""
    n = len(simhash_w)
    has_fp, fps, lengths, values = _fingerprint_arrays(simhash_w, mh_bands)
    encoded = pc.dictionary_encode(lang.fill_null("default"))
    names = encoded.dictionary.to_pylist()
    lang_of = np.where(has_fp, np.asarray(encoded.indices.to_numpy(zero_copy_only=False), np.int64), -1)
    width = int(lengths.max()) if n else 0
    layouts = []
    for name in names:
        spec = sim_conf.language(name)
        layouts.append(_layout(name, spec.blocks, spec.max_hamming, width))
    n_tables = max((len(m) for m, _, _ in layouts), default=0)
    masks = np.zeros((len(names), n_tables), np.uint64)
    table_salts = np.zeros((len(names), n_tables), np.uint64)
    band_salts = np.zeros((len(names), width), np.uint64)
    n_masks = np.zeros(len(names), np.int64)
    for i, (m, t, b) in enumerate(layouts):
        masks[i, :len(m)], table_salts[i, :len(t)], band_salts[i, :len(b)], n_masks[i] = m, t, b, len(m)
    rows, codes = _codes_passing(lang_of, fps, lengths, values, masks, n_masks, table_salts, band_salts,
                                 np.asarray(bitmap, np.uint8))
    return rows, codes.view(np.int64)


# ---------------------------------------------------------------- per-language expressions

def per_language(sim_conf: "SimhashConfig", lang: Column, value) -> Column:
    """A column that is value(spec) for each configured language (default otherwise)."""
    expr = value(sim_conf.languages["default"])
    for name, spec in sim_conf.languages.items():
        if name != "default":
            expr = F.when(lang == name, value(spec)).otherwise(expr)
    return expr


def _lit_masks(spec: "LanguageSpec") -> Column:
    return F.array(*[F.lit(m).cast("long") for m in table_masks(spec.blocks, spec.max_hamming)])


# ---------------------------------------------------------------- exploded rows (Spark)

def _exploded(docs: DataFrame, sim_conf: "SimhashConfig", found_by: tuple[int, ...]) -> DataFrame:
    """One row per (document, table) and per (document, MinHash band): id, lang, fp, found_by, slot, value."""
    base = docs.where(F.col("simhash_w").isNotNull()).select("id", "lang", F.col("simhash_w").alias("fp"),
                                                              "mh_bands")
    tables = base.select("id", "lang", "fp", F.lit(TABLES).alias("found_by"),
                         F.posexplode(per_language(sim_conf, F.col("lang"), _lit_masks)).alias("slot", "mask"))
    tables = tables.select("id", "lang", "fp", "found_by", "slot", F.col("fp").bitwiseAND(F.col("mask")).alias("value"))
    bands = base.where(F.col("mh_bands").isNotNull()).select(
        "id", "lang", "fp", F.lit(MINHASH).alias("found_by"), F.posexplode("mh_bands").alias("slot", "value"))
    rows = tables.unionByName(bands) if TABLES in found_by else bands
    if MINHASH not in found_by:
        rows = tables
    return rows.withColumn("lang", F.coalesce("lang", F.lit("default")))


# ---------------------------------------------------------------- pairs from sorted buckets (pure, compiled)

@njit(cache=True)
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(cache=True)
def _with_room(a, used, need):
    """a, or a copy of its first `used` values in an array at least twice as long, holding `need`."""
    if need <= a.shape[0]:
        return a
    grown = np.empty(max(2 * a.shape[0], need), a.dtype)
    grown[:used] = a[:used]
    return grown


@njit(cache=True)
def bucket_pairs(bucket, found_by, slot, lang_code, fp, ids, max_hamming, masks, n_masks, minhash_max, max_bucket,
                 with_tables):
    """Candidate pairs of rows sorted by (bucket, found_by, slot, fp, id); a bucket is a run of equal
    (bucket, found_by, slot).

    Inside a bucket every two rows of the same chunk (max_bucket consecutive rows) pair up:
    - TABLES: kept when within max_hamming bits and `slot` is the first table whose key bits they
      share (masks[lang_code, :n_masks[lang_code]]), so each such pair comes out of exactly one table;
    - MINHASH: kept when within minhash_max[lang_code] bits, unless within max_hamming bits while the
      tables run too (with_tables: the tables have it); the same pair may still come out of several bands.
    lang_code: the row's language index (language_codes) into max_hamming / masks / n_masks / minhash_max.
    Returns (a, b, lang_code, found_by, distance) of the pairs (a < b) and the ids (with their found_by) of rows in
    buckets over max_bucket.
    """
    n = bucket.shape[0]
    cap = 1024
    a_out = np.empty(cap, np.int64)
    b_out = np.empty(cap, np.int64)
    c_out = np.empty(cap, np.int32)
    p_out = np.empty(cap, np.int32)
    d_out = np.empty(cap, np.int32)
    split_id = np.empty(0, np.int64)
    split_found_by = np.empty(0, np.int32)
    n_split = 0
    k = 0
    start = 0
    while start < n:
        end = start + 1
        while (end < n and bucket[end] == bucket[start] and found_by[end] == found_by[start]
               and slot[end] == slot[start]):
            end += 1
        size = end - start
        if size > max_bucket:
            split_id = _with_room(split_id, n_split, n_split + size)
            split_found_by = _with_room(split_found_by, n_split, n_split + size)
            for r in range(start, end):
                split_id[n_split] = ids[r]
                split_found_by[n_split] = found_by[r]
                n_split += 1
        for c0 in range(start, end, max_bucket):
            c1 = min(c0 + max_bucket, end)
            for i in range(c0, c1):
                for j in range(i + 1, c1):
                    lang = lang_code[i]
                    xor = np.uint64(fp[i]) ^ np.uint64(fp[j])
                    dist = _popcount(xor)
                    within = dist <= max_hamming[lang]
                    if found_by[i] == TABLES:
                        if not within:
                            continue
                        first = -1
                        for t in range(n_masks[lang]):
                            if xor & np.uint64(masks[lang, t]) == 0:
                                first = t
                                break
                        if first != slot[i]:
                            continue
                    elif (within and with_tables) or dist > minhash_max[lang]:
                        continue
                    a_out = _with_room(a_out, k, k + 1)
                    b_out = _with_room(b_out, k, k + 1)
                    c_out = _with_room(c_out, k, k + 1)
                    p_out = _with_room(p_out, k, k + 1)
                    d_out = _with_room(d_out, k, k + 1)
                    a_out[k] = min(ids[i], ids[j])
                    b_out[k] = max(ids[i], ids[j])
                    c_out[k] = lang
                    p_out[k] = found_by[i]
                    d_out[k] = dist
                    k += 1
        start = end
    return a_out[:k], b_out[:k], c_out[:k], p_out[:k], d_out[:k], split_id[:n_split], split_found_by[:n_split]


def last_run_start(bucket: np.ndarray, found_by: np.ndarray, slot: np.ndarray) -> int:
    """Index where the last bucket of sorted, non-empty rows begins (it may go on in the next batch)."""
    same = (bucket == bucket[-1]) & (found_by == found_by[-1]) & (slot == slot[-1])
    differs = np.flatnonzero(~same)       # sorted rows: the last bucket is a suffix
    return int(differs[-1]) + 1 if len(differs) else 0


# ---------------------------------------------------------------- candidates (Spark)

def language_codes(sim_conf: "SimhashConfig") -> list[str]:
    """The configured languages in a fixed order; the kernel knows a language by its index here."""
    return ["default", *sorted(n for n in sim_conf.languages if n != "default")]


def _language_tables(sim_conf: "SimhashConfig") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """max_hamming, masks (padded), mask count, minhash_max_hamming per language code."""
    specs = [sim_conf.languages[name] for name in language_codes(sim_conf)]
    tables = [table_masks(s.blocks, s.max_hamming) for s in specs]
    masks = np.zeros((len(specs), max(len(t) for t in tables)), np.int64)
    for i, t in enumerate(tables):
        masks[i, :len(t)] = t
    return (np.array([s.max_hamming for s in specs], np.int64), masks,
            np.array([len(t) for t in tables], np.int64), np.array([s.minhash_max_hamming for s in specs], np.int64))


PAIR_SCHEMA = "a long, b long, lang_code int, found_by int, distance int, split boolean"


def _pairs_batch(cols: dict[str, np.ndarray], tables: tuple[np.ndarray, ...], max_bucket: int,
                 with_tables: bool) -> pa.RecordBatch:
    """The pairs and split ids of sorted rows holding whole buckets, as PAIR_SCHEMA.

    Module level on purpose: Spark pickles _scan's closure by value, and a compiled kernel it
    named directly would travel with it and be compiled again in every Python worker (6.5 s
    each, its on-disk cache unused); named from here it is imported, cache and all."""
    max_hamming, masks, n_masks, minhash_max = tables
    a, b, c, p, d, sid, s_found_by = bucket_pairs(cols["bucket"], cols["found_by"], cols["slot"], cols["lang_code"],
                                                  cols["fp"], cols["id"], max_hamming, masks, n_masks, minhash_max,
                                                  max_bucket, with_tables)
    return pa.RecordBatch.from_pydict({
        "a": np.concatenate((a, sid)), "b": np.concatenate((b, np.full(len(sid), -1, np.int64))),
        "lang_code": np.concatenate((c, np.zeros(len(sid), np.int32))),
        "found_by": np.concatenate((p, s_found_by)),
        "distance": np.concatenate((d, np.zeros(len(sid), np.int32))),
        "split": np.concatenate((np.zeros(len(a), np.bool_), np.ones(len(sid), np.bool_)))})


def _scan(sim_conf: "SimhashConfig", with_tables: bool):
    """mapInArrow function: the pairs of every bucket of a partition sorted by (bucket, found_by, slot, fp, id).

    Arrow batches cut a partition anywhere, so the last bucket of a batch is carried into the next."""
    tables = _language_tables(sim_conf)
    max_bucket = sim_conf.max_band_bucket
    names = ("bucket", "found_by", "slot", "lang_code", "fp", "id")

    def run(batches):
        carry: dict[str, np.ndarray] | None = None
        for batch in batches:
            cols = {name: batch.column(name).to_numpy(zero_copy_only=False) for name in names}
            if carry is not None:
                cols = {name: np.concatenate((carry[name], cols[name])) for name in names}
            if len(cols["bucket"]) == 0:
                continue
            cut = last_run_start(cols["bucket"], cols["found_by"], cols["slot"])
            carry = {name: v[cut:] for name, v in cols.items()}
            if cut:
                yield _pairs_batch({name: v[:cut] for name, v in cols.items()}, tables, max_bucket, with_tables)
        if carry is not None and len(carry["bucket"]):
            yield _pairs_batch(carry, tables, max_bucket, with_tables)
    return run


def bucket_rows(docs: DataFrame, sim_conf: "SimhashConfig",
                found_by: tuple[int, ...] = (TABLES, MINHASH)) -> DataFrame:
    """One row per (document, table) and (document, MinHash band): bucket (one long), found_by, slot,
    lang_code, fp, id. Two documents are a candidate only if they share a bucket (and, in a table,
    are within max_hamming bits): incremental.py follows the same rows from a slice into the archive."""
    langs = language_codes(sim_conf)
    lang_code = F.lit(0)
    for i, name in enumerate(langs[1:], start=1):
        lang_code = F.when(F.col("lang") == name, F.lit(i)).otherwise(lang_code)
    return _exploded(docs, sim_conf, found_by).select(
        F.xxhash64("lang", "found_by", "slot", "value").alias("bucket"),
        F.col("found_by").cast("int").alias("found_by"), F.col("slot").cast("int").alias("slot"),
        lang_code.cast("int").alias("lang_code"), "fp", "id")


def candidate_pairs(docs: DataFrame, sim_conf: "SimhashConfig",
                    found_by: tuple[int, ...] = (TABLES, MINHASH)) -> tuple[DataFrame, DataFrame]:
    """(pairs a < b with lang, found_by, distance; ids of documents in split buckets with their found_by).

    One shuffle: the exploded rows are partitioned by bucket and sorted inside each partition by
    (bucket, found_by, slot, fp, id), then one compiled pass per partition pairs up each bucket's rows
    (bucket_pairs). A bucket is (lang, found_by, slot, value), hashed to one long: a hash collision can
    only merge two buckets, adding candidates that verification then judges; it loses none.
    The scan is materialised once; pairs and split ids are both read from it.

    found_by: which searches run (the MinHash-only baseline of the benchmark runs MINHASH alone)."""
    langs = language_codes(sim_conf)
    rows = bucket_rows(docs, sim_conf, found_by)
    scanned = cut_lineage(rows.repartition("bucket").sortWithinPartitions("bucket", "found_by", "slot", "fp", "id")
                          .mapInArrow(_scan(sim_conf, TABLES in found_by), PAIR_SCHEMA))
    lang = F.element_at(F.array(*[F.lit(name) for name in langs]), F.col("lang_code") + 1)
    found = scanned.where(~F.col("split")).select("a", "b", lang.alias("lang"), "found_by", "distance")
    # The tables emit each pair once; the MinHash bands may emit it several times.
    pairs = (found.where(F.col("found_by") == TABLES)
             .unionByName(found.where(F.col("found_by") == MINHASH).dropDuplicates(["a", "b"])))
    split = scanned.where(F.col("split")).select(F.col("a").alias("id"), "found_by").distinct()
    return pairs, split
