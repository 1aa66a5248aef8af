"""A closure round (incremental.round_hits) reaches exactly what the batch's candidate rule pairs.

Pure numpy and Arrow, no Spark: a frontier and a batch of stored keys with planted relations (a
fingerprint a few bits away, one MinHash band in common with a fingerprint inside or just outside
the SimHash gate, the same URL or text, another language, a document already in the closure)
against stages.simhash.live.batch_pairs, the rule the batch and the live lookup share, applied to
every pair. candidates.code_rows is checked against the
per-document bucket_codes the same way.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from newsdedup import incremental
from newsdedup.config import load_config
from newsdedup.incremental import KEY, PAIR, FrontierIndex, linked_ids, round_hits
from newsdedup.stages.simhash.candidates import bucket_codes, code_bitmap, code_rows, code_rows_passing
from newsdedup.stages.simhash.live import batch_pairs

SIM = load_config().simhash
KINDS = ("near", "far", "band", "band_gated", "url", "text", "other_lang", "none")
SCHEMA = pa.schema([("id", pa.int64()), ("url_hash", pa.string()), ("content_hash", pa.string()),
                    ("lang", pa.string()), ("simhash_w", pa.int64()), ("mh_bands", pa.list_(pa.int64()))])


def flipped(fp: int, bits: list[int]) -> int:
    x = fp & (2 ** 64 - 1)
    for b in bits:
        x ^= 1 << b
    return x - 2 ** 64 if x >= 2 ** 63 else x


def corpus(seed: int):
    """(frontier rows, stored rows): stored documents derived from frontier ones by one relation each."""
    rng = np.random.default_rng(seed)
    n_bands = SIM.minhash_bands

    def doc(i, lang="en"):
        return {"id": i, "url_hash": f"u{i}", "content_hash": f"c{i}", "lang": lang,
                "simhash_w": int(rng.integers(-2 ** 63, 2 ** 63 - 1)),
                "mh_bands": rng.integers(-2 ** 63, 2 ** 63 - 1, n_bands).tolist()}

    frontier = [doc(i, lang) for i, lang in zip(range(40), ["en", "bn", None, "xx"] * 10)]
    stored, next_id = [], 1000
    for f in frontier:
        max_h = SIM.language(f["lang"]).max_hamming
        for kind in KINDS:
            d = doc(next_id, f["lang"])
            next_id += 1
            if kind in ("near", "far"):   # within max_hamming bits, or one bit too many
                k = max_h if kind == "near" else max_h + 1
                d["simhash_w"] = flipped(f["simhash_w"], rng.choice(64, k, replace=False).tolist())
            elif kind in ("band", "band_gated", "other_lang"):
                j = int(rng.integers(n_bands))
                d["mh_bands"][j] = f["mh_bands"][j]
                # At the gate, or one bit past it (a band collision of unrelated texts).
                gate = SIM.language(f["lang"]).minhash_max_hamming + (kind == "band_gated")
                d["simhash_w"] = flipped(f["simhash_w"], rng.choice(64, gate, replace=False).tolist())
                if kind == "other_lang":
                    d["lang"] = "bn" if f["lang"] == "en" else "en"
            elif kind == "url":
                d["url_hash"] = f["url_hash"]
            elif kind == "text":
                d["content_hash"], d["simhash_w"], d["mh_bands"] = f["content_hash"], None, None
            stored.append(d)
    return frontier, stored


def may_hold(bitmap: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The bitmap's test in numpy, as code_bitmap's docstring states it: each code's bit, named by
    its low bits (the compiled pass must agree with it)."""
    low = np.asarray(codes, np.int64).view(np.uint64) & np.uint64(len(bitmap) * 8 - 1)
    return ((bitmap[low >> np.uint64(3)] >> (low & np.uint64(7)).astype(np.uint8)) & 1).astype(bool)


def table(rows) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def test_code_rows_are_the_documents_bucket_codes():
    frontier, stored = corpus(1)
    rows = frontier + stored
    batch = table(rows).combine_chunks().to_batches()[0].slice(3)   # an offset, as Spark's batches have
    row, code, _ = code_rows(batch.column("lang"), batch.column("simhash_w"), batch.column("mh_bands"), SIM)
    for i, r in enumerate(rows[3:]):
        assert sorted(code[row == i].tolist()) == sorted(
            bucket_codes(r["lang"], r["simhash_w"], r["mh_bands"], SIM)), r["id"]


def test_the_codes_passing_a_bitmap_are_code_rows_codes_that_may_hold_passes():
    """code_rows_passing (the closure pass's compiled path) against code_rows and the bitmap's test: the same
    (row, code) entries, for a bitmap of some of the codes, of none and of all."""
    frontier, stored = corpus(2)
    batch = table(frontier + stored).combine_chunks().to_batches()[0].slice(5)
    row, code, _ = code_rows(batch.column("lang"), batch.column("simhash_w"), batch.column("mh_bands"), SIM)
    for bitmap in (code_bitmap(code[::7]), np.zeros(1 << 13, np.uint8), np.full(1 << 13, 255, np.uint8)):
        hit = may_hold(bitmap, code)
        got_row, got_code = code_rows_passing(bitmap, batch.column("lang"), batch.column("simhash_w"),
                                              batch.column("mh_bands"), SIM)
        assert sorted(zip(got_row.tolist(), got_code.tolist())) == sorted(zip(row[hit].tolist(), code[hit].tolist()))
    assert 0 < hit.sum() == len(code) and len(code) > 1000   # the last bitmap passes every code


@pytest.mark.parametrize("seed", [1, 2])
def test_a_round_pairs_what_the_batch_pairs_and_joins_the_keys(seed):
    frontier, stored = corpus(seed)
    already = np.array(sorted(d["id"] for d in stored[::9]), np.int64)   # in the closure already
    index = FrontierIndex.of(table(frontier), already, SIM)
    batch = table(stored + frontier).combine_chunks().to_batches()[0]
    hits = round_hits(index, batch, SIM).to_pylist()

    pairs = {(h["a"], h["b"]) for h in hits if h["kind"] == PAIR}
    expected = {(f["id"], d["id"]) for f in frontier for d in stored + frontier
                if d["id"] != f["id"] and d["id"] not in set(already.tolist()) and d["simhash_w"] is not None
                and batch_pairs(f["lang"], f["simhash_w"], f["mh_bands"], d["lang"], d["simhash_w"],
                                d["mh_bands"], SIM)}
    assert pairs == expected
    kinds = {d["id"]: k for d, k in zip(stored, list(KINDS) * 40)}
    assert {kinds[b] for _, b in pairs if b in kinds} == {"near", "band"}

    keyed = {h["b"] for h in hits if h["kind"] == KEY}
    expected_keys = {d["id"] for d in stored + frontier for f in frontier
                     if d["url_hash"] == f["url_hash"] or d["content_hash"] == f["content_hash"]}
    assert keyed == expected_keys
    assert {kinds[b] for b in keyed if b in kinds} == {"url", "text"}


@pytest.mark.parametrize("n", [0, 1, 5_000, 300_000])
def test_the_code_bitmap_passes_every_frontier_code_and_few_others(n):
    rng = np.random.default_rng(n)
    edges = np.array([0, -1, 1, 2 ** 63 - 1, -2 ** 63], np.int64)
    codes = np.concatenate((rng.integers(-2 ** 63, 2 ** 63 - 1, n, dtype=np.int64), edges))
    bitmap = code_bitmap(codes)
    assert may_hold(bitmap, codes).all()            # a frontier code is never missed
    others = rng.integers(-2 ** 63, 2 ** 63 - 1, 200_000, dtype=np.int64)
    others = others[~np.isin(others, codes)]
    assert may_hold(bitmap, others).mean() < 0.08   # about 1 in 16 passes, to an exact lookup


def test_linked_ids_are_the_links_touching_the_frontier_and_their_clusters():
    duplicate = np.array([2, 3, 5, 7, 9], np.int64)
    canonical = np.array([1, 1, 4, 6, 8], np.int64)
    # 3 touches the cluster of 1 (so 2 comes too); 4 is a canonical (so 5 comes); 6, 7, 8, 9 do not.
    assert linked_ids(duplicate, canonical, np.array([3, 4], np.int64)).tolist() == [1, 2, 3, 4, 5]
    assert linked_ids(duplicate, canonical, np.array([100], np.int64)).tolist() == []


def test_day_ranges_hold_every_date_in_whole_days_and_at_most_the_ranges_allowed():
    DAY = incremental.DAY_US
    rng = np.random.default_rng(3)
    for n, most in ((0, 4), (1, 1), (50, 4), (1000, 32), (200, 1000)):
        micros = rng.integers(-5 * DAY, 400 * DAY, n)
        ranges = incremental.day_ranges(micros, most)
        assert len(ranges) <= most and (len(ranges) == 0) == (n == 0)
        inside = ((micros[:, None] >= ranges[:, 0]) & (micros[:, None] < ranges[:, 1])).any(axis=1)
        assert inside.all(), "a date outside every range"
        assert (ranges % DAY == 0).all() and (ranges[1:, 0] > ranges[:-1, 1]).all()   # whole days, apart, in order
    # Ranges enough for every run of days: exactly the days that hold a date.
    assert ((ranges[:, 1] - ranges[:, 0]) // DAY).sum() == len(np.unique(micros // DAY))
    # Fewer allowed: the narrowest gaps are closed first (days 0, 3, 10, 11, 30 in two ranges).
    assert (incremental.day_ranges(np.array([0, 3, 10, 11, 30]) * DAY, 2) // DAY).tolist() == [[0, 12], [30, 31]]
