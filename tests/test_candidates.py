"""Stage 3's candidate pairs: the compiled bucket scan against the definition, spelled out in Python.

The definition: every document is one row per Manku table (key = its fingerprint's table bits) and
one per MinHash band (key = the band hash), within its language; rows sharing (lang, found_by, slot, key)
form a bucket, sorted by (fingerprint, id) and cut into chunks of max_band_bucket; every two rows of a
chunk are a candidate. Table pairs must lie within max_hamming bits and count only in the first table
they share; MinHash pairs within max_hamming bits are left to the tables, those more than
minhash_max_hamming bits apart are dropped (the SimHash gate), and the rest are kept once.
"""

import random
from collections import defaultdict
from itertools import combinations

import numpy as np
import pytest

from newsdedup.config import load_config
from newsdedup.stages.simhash.candidates import (MINHASH, TABLES, bucket_pairs, candidate_pairs, last_run_start,
                                                 table_masks)


def reference(rows, sim_conf, found_by, gate=True):
    buckets = defaultdict(list)
    for doc_id, lang, fp, bands in rows:
        lang = lang or "default"
        spec = sim_conf.language(lang)
        if TABLES in found_by:
            for slot, m in enumerate(table_masks(spec.blocks, spec.max_hamming)):
                buckets[(lang, TABLES, slot, fp & m)].append((fp, doc_id))
        if MINHASH in found_by and bands is not None:
            for slot, v in enumerate(bands):
                buckets[(lang, MINHASH, slot, v)].append((fp, doc_id))
    pairs, split = set(), set()
    size = sim_conf.max_band_bucket
    for (lang, search, slot, _), members in buckets.items():
        spec = sim_conf.language(lang)
        masks = table_masks(spec.blocks, spec.max_hamming)
        members.sort()
        if len(members) > size:
            split |= {(doc_id, search) for _, doc_id in members}
        for c in range(0, len(members), size):
            for (fa, ia), (fb, ib) in combinations(members[c:c + size], 2):
                xor = fa ^ fb
                dist = bin(xor & (2 ** 64 - 1)).count("1")
                within = dist <= spec.max_hamming
                if search == TABLES and not (within and next(i for i, m in enumerate(masks)
                                                                  if xor & m == 0) == slot):
                    continue
                if search == MINHASH and within and TABLES in found_by:
                    continue
                if search == MINHASH and gate and dist > spec.minhash_max_hamming:
                    continue
                canon = lang if lang in sim_conf.languages else "default"
                pairs.add((min(ia, ib), max(ia, ib), canon, search, dist))
    return pairs, split


def corpus(seed, n=400):
    """Random fingerprints with planted near neighbours (a few flipped bits) and shared MinHash bands;
    a crowd of documents sharing one band value makes an oversized bucket."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        lang = rng.choice(["en", "bn", "en", None, "fr"])
        if rows and rng.random() < 0.5:
            _, plang, pfp, pbands = rng.choice(rows)
            fp = pfp
            for _ in range(rng.choice([0, 1, 2, 3, 4, 6, 12])):
                fp ^= 1 << rng.randrange(64)
            bands = [b if pbands and rng.random() < 0.3 else rng.getrandbits(63) for b in pbands or [0] * 5]
            lang = plang if rng.random() < 0.9 else lang
        else:
            fp = rng.getrandbits(64)
            bands = [rng.getrandbits(63) for _ in range(5)]
        if rng.random() < 0.15:
            bands[0] = 42                          # the crowd: one band bucket over max_band_bucket
        rows.append((i + 1, lang, fp, None if rng.random() < 0.05 else bands))
    return [(i, lang, fp - (1 << 64) if fp >= 1 << 63 else fp, bands) for i, lang, fp, bands in rows]


@pytest.mark.parametrize("found_by", [(TABLES, MINHASH), (MINHASH,)])
def test_scan_finds_exactly_the_defined_pairs_and_split_rows(spark, found_by):
    # A gate of 20 bits: the planted neighbours (up to 12 flipped bits) pass it, most of the crowd's
    # unrelated fingerprints (about 32 bits apart) do not.
    gate = {lang: {"minhash_max_hamming": 20} for lang in ("en", "bn", "default")}
    sim_conf = load_config(overrides={"simhash": {"max_band_bucket": 7, "minhash_bands": 5,
                                                  "languages": gate}}).simhash
    rows = corpus(3)
    docs = spark.createDataFrame(rows, "id long, lang string, simhash_w long, mh_bands array<long>")
    # Tiny Arrow batches: buckets straddle batch boundaries, which the scan must carry across.
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "5")
    try:
        pairs, split = candidate_pairs(docs.repartition(3), sim_conf, found_by)
        got = {(r.a, r.b, r.lang, r.found_by, r.distance) for r in pairs.collect()}
        got_split = {(r.id, r.found_by) for r in split.collect()}
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    want, want_split = reference(rows, sim_conf, found_by)
    assert len(got) == pairs.count()               # no pair twice
    assert got == want
    ungated, _ = reference(rows, sim_conf, found_by, gate=False)
    assert len(ungated - want) > 20 and all(d > 20 for *_, d in ungated - want)   # the gate removed pairs
    assert got_split == want_split and len(want_split) > 7
    assert {p for *_, p, _ in want} >= set(found_by)  # every search found something


def test_bucket_pairs_keeps_a_table_pair_in_its_first_table_only():
    masks = np.array([table_masks(5, 3)], np.int64)
    # Two rows that share tables 0 and 1 (they differ only in the top block): one pair, from table 0.
    fp_a, fp_b = 0, -(1 << 63)
    got = []
    for slot in range(len(masks[0])):
        if (fp_a ^ fp_b) & int(masks[0, slot]) == 0:
            out = bucket_pairs(np.zeros(2, np.int64), np.zeros(2, np.int32), np.full(2, slot, np.int32),
                               np.zeros(2, np.int32), np.array([fp_b, fp_a], np.int64), np.array([9, 4], np.int64),
                               np.array([3], np.int64), masks, np.array([masks.shape[1]], np.int64),
                               np.array([64], np.int64), 100, True)
            got += [(int(a), int(b), int(d), slot) for a, b, d in zip(out[0], out[1], out[4])]
    assert got == [(4, 9, 1, 0)]


def test_last_run_start_is_where_the_last_bucket_begins():
    b = np.array([1, 1, 2, 2, 2])
    zero = np.zeros(5, np.int32)
    assert last_run_start(b, zero, zero) == 2
    assert last_run_start(np.array([7, 7]), zero[:2], zero[:2]) == 0
    assert last_run_start(b, zero, np.array([0, 0, 0, 1, 1], np.int32)) == 3


# Run in a fresh Python as a Spark worker runs it: the scan's function arrives pickled, is called on
# one sorted batch, and the module's own kernel (the one numba caches on disk) says whether it ran.
_WORKER = """
import pickle, sys
import numpy as np, pyarrow as pa
scan = pickle.loads(sys.stdin.buffer.read())
n = 6
batch = pa.RecordBatch.from_pydict({"bucket": np.arange(n, dtype=np.int64) // 2, "found_by": np.zeros(n, np.int32),
                                    "slot": np.zeros(n, np.int32), "lang_code": np.zeros(n, np.int32),
                                    "fp": np.zeros(n, np.int64), "id": np.arange(n, dtype=np.int64)})
pairs = pa.Table.from_batches(list(scan([batch])))
from newsdedup.stages.simhash import candidates
print(pairs.num_rows, len(candidates.bucket_pairs.signatures))
"""


def test_a_worker_runs_the_scan_with_the_module_kernel_and_its_disk_cache():
    """Spark pickles the scan's closure by value. A compiled kernel it names directly travels with it
    as a copy that every Python worker compiles again (6.5 s each, the on-disk cache unused); the
    scan must reach its kernel through the imported module."""
    import subprocess
    import sys

    from pyspark import cloudpickle

    from newsdedup.stages.simhash.candidates import _scan

    payload = cloudpickle.dumps(_scan(load_config().simhash, True))
    done = subprocess.run([sys.executable, "-c", _WORKER], input=payload, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    pairs, module_kernel_signatures = map(int, done.stdout.split())
    assert pairs == 3                       # one pair per two-row bucket: the scan ran
    assert module_kernel_signatures == 1    # ... on the module's kernel, not a pickled copy
