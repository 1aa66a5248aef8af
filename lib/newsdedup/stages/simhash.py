"""Stage 3: near-duplicates by SimHash and MinHash candidates, verified on exact shingle sets.

Pure part: the seed features, fingerprint and bands (kept bit-identical in the
documents table) and `SimhashKeys`, whose `batch` is the per-batch function
`prepare` calls: it runs the compiled kernels in simhash_kernel / simhash_sets
(exactly what `features` and `simhash` define, and the set columns simhash_w and
mh_bands that simhash_features.py defines per document); the bands are cut in Spark. Spark part: `SimhashStage`
below; candidate generation lives in simhash_candidates.py, verification in simhash_verify.py,
clustering in clustering.py. docs/stage3.md has the design and the candidate
arithmetic.

Features are word shingles for English (word order carries the signal, words are
short and many) and character n-grams for Bangla (rich inflection and
inconsistent spacing/joiners make word tokens unstable).

Features are never materialised as strings: each word (or code point) gets a
64-bit value and an n-gram's hash is a multiply-add chain over its members,
finished with the splitmix64 mixer. `features` and `simhash` below state this
in numpy, one document at a time; the job runs the same arithmetic compiled
(simhash_kernel), a batch at a time. The result is deterministic across processes and machines (no Python hash randomisation).
Fingerprints are signed 64-bit ints so they fit Spark's LongType unchanged.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .base import StageResult

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from ..config import SimhashConfig

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

    kind 'word': n-word shingles (the words themselves if there are fewer than n); a word is a
    run of \\w characters and combining marks, so Bangla vowel signs stay inside their word.
    kind 'char': n-character grams over letters/marks with single spaces as word boundaries.
    """
    from .simhash_kernel import patterns

    token, non_text = patterns()
    folded = text.casefold()
    if kind == "word":
        toks = token.findall(folded)
        values = np.fromiter((_word_value(t) for t in toks), dtype=np.uint64, count=len(toks))
    elif kind == "char":
        squeezed = non_text.sub(" ", folded).strip()
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


class SimhashKeys:
    """Stage-3 columns for a batch of documents: the seed's simhash and n_features (bands are
    derived in Spark, bit-identical to `bands`), plus simhash_w (SimHash of the distinct shingle
    set) and mh_bands (MinHash LSH band hashes) that stage 3 joins on.

    `batch` is what `prepare` calls once per Arrow batch; it runs the compiled
    kernel (simhash_sets.keys_batch) over all texts at once for every column.
    """

    FIELDS = (("simhash", "bigint"), ("n_features", "int"), ("simhash_w", "bigint"), ("mh_bands", "array<bigint>"))

    def __init__(self, sim_conf: "SimhashConfig"):
        self.conf = sim_conf

    def batch(self, keys: Sequence[str], langs: Sequence[str | None],
              has_body: Sequence[bool]) -> dict[str, Any]:
        """keys: normalised texts (content_key). Returns simhash (int64, valid where n_features suffice)
        and simhash_w (int64) as masked pairs, n_features, and mh_bands (a list of n_bands ints, or None):
        {"simhash", "simhash_valid", "n_features", "simhash_w", "simhash_w_valid", "mh_bands"}.
        Documents too short for the seed fingerprint stay out of stage 3 altogether (no set columns)."""
        from . import simhash_kernel as kern
        from .simhash_features import _salts
        from .simhash_sets import keys_batch

        n = len(keys)
        kinds = np.full(n, -1, dtype=np.int8)
        set_kinds = np.full(n, -1, dtype=np.int8)
        ngrams = np.zeros(n, dtype=np.int64)
        set_ngrams = np.zeros(n, dtype=np.int64)
        minimum = np.zeros(n, dtype=np.int64)
        for i, (lang, body) in enumerate(zip(langs, has_body)):
            if body:
                spec = self.conf.language(lang)
                kinds[i], set_kinds[i] = kern.KIND_CODES[spec.features], kern.KIND_CODES[spec.set_features]
                ngrams[i], set_ngrams[i], minimum[i] = spec.ngram, spec.set_ngram, spec.min_features
        folded = [k.casefold() if kinds[i] >= 0 else "" for i, k in enumerate(keys)]
        is_word, is_text = kern.char_classes()
        n_bands, rows = self.conf.minhash_bands, self.conf.minhash_rows
        fps, distinct, valid, w, w_valid, mh, _, _ = keys_batch(
            *kern.code_points(folded), kinds, ngrams, minimum, set_kinds, set_ngrams, _salts(n_bands * rows),
            n_bands, rows, is_word, is_text, *kern.word_cache().arrays())
        return {"simhash": fps.view(np.int64), "simhash_valid": valid, "n_features": distinct.astype(np.int32),
                "simhash_w": w.view(np.int64), "simhash_w_valid": w_valid,
                "mh_bands": [row if ok else None for row, ok in zip(mh.view(np.int64).tolist(), w_valid)]}

    def columns(self, key: str, lang: str | None, has_body: bool) -> dict[str, Any]:
        """One document (tests, tools): simhash (None below min_features), n_features, band_0..,
        simhash_w, mh_bands."""
        out = self.batch([key], [lang], [has_body])
        fp = int(out["simhash"][0]) if out["simhash_valid"][0] else None
        cols: dict[str, Any] = {"simhash": fp, "n_features": int(out["n_features"][0])}
        for i, b in enumerate(bands(fp, self.conf.bands) if fp is not None else [None] * self.conf.bands):
            cols[f"band_{i}"] = b
        cols["simhash_w"] = int(out["simhash_w"][0]) if out["simhash_w_valid"][0] else None
        cols["mh_bands"] = out["mh_bands"][0]
        return cols

    def spark_columns(self, simhash: "Column") -> dict[str, "Column"]:
        """The band columns, computed in Spark from the fingerprint (same values as `bands`)."""
        from pyspark.sql import functions as F

        width = 64 // self.conf.bands
        mask = (1 << width) - 1
        return {f"band_{i}": F.shiftrightunsigned(simhash, width * i).bitwiseAND(mask).cast("int")
                for i in range(self.conf.bands)}


# ---------------------------------------------------------------- Spark step

STAGE_COLUMNS = ("simhash_w", "mh_bands")   # what stage 3 needs on the unresolved rows besides id, lang


class SimhashStage:
    """Candidates (Manku tables on simhash_w + MinHash bands), exact verification, then
    large-star/small-star clustering; each link scores the duplicate against its canonical."""

    name = "simhash"
    columns = STAGE_COLUMNS

    def run(self, ctx, unresolved: "DataFrame") -> StageResult:
        from pyspark.sql import functions as F

        from ..clustering import cluster_sizes, cut_lineage, links_from_edges, order_key
        from .simhash_candidates import candidate_pairs
        from .simhash_verify import pair_features, similarity, verified

        sim_conf = ctx.conf.simhash
        pairs, split = candidate_pairs(unresolved, sim_conf)
        pairs, split = cut_lineage(pairs), cut_lineage(split)   # both read more than once
        ids = (pairs.select(F.col("a").alias("id")).unionByName(pairs.select(F.col("b").alias("id")))
               .distinct())
        feats = cut_lineage(pair_features(ctx.archive, ids, ctx.conf))
        edges = cut_lineage(verified(similarity(pairs, feats, "a", "b"), sim_conf)
                            .select("a", "b", F.col("jaccard").alias("score")))

        def to_canonical(members: "DataFrame") -> "DataFrame":
            scored = similarity(members, feats, "duplicate_id", "canonical_id")
            return scored.select("duplicate_id", "canonical_id", F.col("jaccard").alias("score"))

        vertices = unresolved.select("id", order_key().alias("key"))
        links = cut_lineage(links_from_edges(edges, vertices, self.name, sim_conf.max_iterations,
                                             canonical_score=to_canonical))
        counts, notes = _stage_counts(unresolved, pairs, edges, links, split, cluster_sizes(links), sim_conf)
        flags = split.select("id", F.concat(F.lit("simhash_bucket_split:"),
                                            F.when(F.col("path") == 0, "tables").otherwise("minhash")).alias("flag"))
        return StageResult(links, notes, counts, flags=flags)


SIZE_BINS = ((2, 2), (3, 5), (6, 10), (11, 100), (101, None))


def _stage_counts(unresolved, pairs, edges, links, split, sizes, sim_conf) -> tuple[dict[str, int], list[str]]:
    """Report counters: candidates per path, verified edges, split buckets, cluster sizes."""
    from pyspark.sql import functions as F

    row = pairs.agg(F.sum((F.col("path") == 0).cast("int")).alias("tables"),
                    F.sum((F.col("path") == 1).cast("int")).alias("minhash")).first()
    n_docs = unresolved.where(F.col("simhash_w").isNotNull()).count()
    counts = {"simhash.documents": n_docs, "simhash.candidates.tables": int(row.tables or 0),
              "simhash.candidates.minhash": int(row.minhash or 0), "simhash.edges": edges.count(),
              "simhash.split_documents": split.select("id").distinct().count()}
    # Every candidate pair involves two documents: per-document candidates = 2 * pairs / docs.
    counts["simhash.candidates_per_doc_x1000"] = (
        int(round(2000 * (counts["simhash.candidates.tables"] + counts["simhash.candidates.minhash"])
                  / n_docs)) if n_docs else 0)
    bins = {f"simhash.clusters.size_{lo}{'+' if hi is None else f'_{hi}'}":
            (F.col("size") >= lo if hi is None else F.col("size").between(lo, hi)) for lo, hi in SIZE_BINS}
    bins["simhash.clusters_over_max"] = F.col("size") > sim_conf.max_cluster_size
    hist = sizes.agg(*[F.sum(cond.cast("int")).alias(name) for name, cond in bins.items()]).first().asDict()
    counts.update({name: int(v or 0) for name, v in hist.items()})     # one pass for every bin
    n_big = counts["simhash.clusters_over_max"]
    big = sizes.where(F.col("size") > sim_conf.max_cluster_size).orderBy(F.col("size").desc())
    notes = []
    if counts["simhash.split_documents"]:
        notes.append(f"{counts['simhash.split_documents']} document(s) sat in stage-3 buckets over "
                     f"simhash.max_band_bucket and were compared only within their chunk "
                     f"(flagged simhash_bucket_split on their documents rows)")
    if n_big:
        top = ", ".join(f"{r.canonical_id} ({r.size})" for r in big.limit(10).collect())
        notes.append(f"{n_big} stage-3 cluster(s) over simhash.max_cluster_size={sim_conf.max_cluster_size}: {top}")
    return counts, notes
