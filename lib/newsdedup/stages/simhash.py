"""Stage 3: near-duplicates by 64-bit SimHash, banding and Hamming distance.

Pure part: features, fingerprints and bands (`SimhashKeys.batch` is the
per-batch function `prepare` calls; it runs the compiled kernel in
simhash_kernel, which computes exactly what `features` and `simhash` define). Spark part: `simhash_candidates` (a self-join on
(lang, band index, band value), then exact Hamming) and `SimhashStage`, which
clusters the candidate pairs so transitive matches share one canonical.

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

from . import StageResult

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
    """Stage-3 columns for a batch of documents: simhash, n_features (bands are derived in Spark).

    `batch` is what `prepare` calls once per Arrow batch; it runs the compiled
    kernel (simhash_kernel) over all texts at once. Further per-document stage-3
    features belong here: add their fields to FIELDS and their arrays to `batch`.
    """

    FIELDS = (("simhash", "bigint"), ("n_features", "int"))

    def __init__(self, sim_conf: "SimhashConfig"):
        self.conf = sim_conf

    def batch(self, keys: Sequence[str], langs: Sequence[str | None],
              has_body: Sequence[bool]) -> dict[str, np.ndarray]:
        """keys: normalised texts (content_key); returns simhash (int64, valid where n_features suffice)
        as a masked pair: {"simhash": values, "simhash_valid": mask, "n_features": counts}."""
        from . import simhash_kernel as kern

        n = len(keys)
        kinds = np.full(n, -1, dtype=np.int8)
        ngrams = np.zeros(n, dtype=np.int64)
        minimum = np.zeros(n, dtype=np.int64)
        for i, (lang, body) in enumerate(zip(langs, has_body)):
            if body:
                spec = self.conf.language(lang)
                kinds[i] = kern.KIND_WORD if spec.features == "word" else kern.KIND_CHAR
                ngrams[i], minimum[i] = spec.ngram, spec.min_features
        folded = [k.casefold() if kinds[i] >= 0 else "" for i, k in enumerate(keys)]
        is_word, is_text = kern.char_classes()
        fps, distinct, _ = kern.fingerprint_batch(*kern.code_points(folded), kinds, ngrams, is_word, is_text,
                                                  *kern.word_cache().arrays())
        return {"simhash": fps.view(np.int64), "simhash_valid": (kinds >= 0) & (distinct >= minimum) & (distinct > 0),
                "n_features": distinct.astype(np.int32)}

    def columns(self, key: str, lang: str | None, has_body: bool) -> dict[str, Any]:
        """One document (tests, tools): simhash (None below min_features), n_features, band_0.."""
        out = self.batch([key], [lang], [has_body])
        fp = int(out["simhash"][0]) if out["simhash_valid"][0] else None
        cols: dict[str, Any] = {"simhash": fp, "n_features": int(out["n_features"][0])}
        for i, b in enumerate(bands(fp, self.conf.bands) if fp is not None else [None] * self.conf.bands):
            cols[f"band_{i}"] = b
        return cols

    def spark_columns(self, simhash: "Column") -> dict[str, "Column"]:
        """The band columns, computed in Spark from the fingerprint (same values as `bands`)."""
        from pyspark.sql import functions as F

        width = 64 // self.conf.bands
        mask = (1 << width) - 1
        return {f"band_{i}": F.shiftrightunsigned(simhash, width * i).bitwiseAND(mask).cast("int")
                for i in range(self.conf.bands)}


# ---------------------------------------------------------------- Spark step

# Candidate edges up to this many are clustered on the driver (clustering.local_labels):
# 2M pairs of longs are 32 MB, and near-duplicate edges number about one per duplicate.
LOCAL_MAX_EDGES = 2_000_000

def band_columns(sim_conf: "SimhashConfig") -> list[str]:
    return [f"band_{i}" for i in range(sim_conf.bands)]


def threshold_column(sim_conf: "SimhashConfig", lang: "Column") -> "Column":
    """The per-language max_hamming as a column expression."""
    from pyspark.sql import functions as F

    expr = F.lit(sim_conf.languages["default"].max_hamming)
    for name, spec in sim_conf.languages.items():
        if name != "default":
            expr = F.when(lang == name, F.lit(spec.max_hamming)).otherwise(expr)
    return expr


def simhash_candidates(docs: "DataFrame", sim_conf: "SimhashConfig") -> tuple["DataFrame", "DataFrame"]:
    """Candidate pairs from a self-join on (lang, band index, band value), then exact Hamming.

    Returns (edges with columns a, b, distance; skipped oversize buckets).
    """
    from pyspark.sql import functions as F

    band_cols = band_columns(sim_conf)
    fp = docs.where(F.col("simhash").isNotNull()).select("id", "lang", "simhash", *band_cols)
    exploded = fp.select(
        "id", "lang", "simhash",
        F.posexplode(F.array(*[F.col(c) for c in band_cols])).alias("band", "value"))
    sizes = exploded.groupBy("lang", "band", "value").agg(F.count("*").alias("n"))
    oversize = sizes.where(F.col("n") > sim_conf.max_band_bucket)
    buckets = exploded.join(F.broadcast(oversize.select("lang", "band", "value")),
                            ["lang", "band", "value"], "left_anti")
    a, b = buckets.alias("a"), buckets.alias("b")
    pairs = (a.join(b, (F.col("a.lang") == F.col("b.lang")) & (F.col("a.band") == F.col("b.band"))
                    & (F.col("a.value") == F.col("b.value")) & (F.col("a.id") < F.col("b.id")))
             .select(F.col("a.id").alias("a"), F.col("b.id").alias("b"), F.col("a.lang").alias("lang"),
                     F.bit_count(F.col("a.simhash").bitwiseXOR(F.col("b.simhash"))).alias("distance"))
             .dropDuplicates(["a", "b"]))
    edges = pairs.where(F.col("distance") <= threshold_column(sim_conf, F.col("lang")))
    return edges.select("a", "b", "distance"), oversize


class SimhashStage:
    name = "simhash"

    def run(self, ctx, unresolved: "DataFrame") -> StageResult:
        from pyspark.sql import functions as F

        from ..clustering import cut_lineage, links_from_edges, order_key, survivors_after

        sim_conf = ctx.conf.simhash
        edges, oversize = simhash_candidates(unresolved, sim_conf)
        edges = cut_lineage(edges.select("a", "b", (1.0 - F.col("distance") / 64.0).alias("score")))
        vertices = unresolved.select("id", order_key().alias("key"))
        links = links_from_edges(edges, vertices, self.name, sim_conf.max_iterations, LOCAL_MAX_EDGES)
        notes = []
        n_oversize = oversize.count()
        if n_oversize:
            notes.append(f"{n_oversize} simhash band bucket(s) over simhash.max_band_bucket were skipped")
        return StageResult(links, survivors_after(unresolved, links), notes,
                           {"simhash.oversize_buckets": n_oversize})
