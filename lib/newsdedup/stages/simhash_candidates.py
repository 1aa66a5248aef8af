"""Stage 3's candidate pairs and their verification (the Spark half of simhash.py).

Two candidate paths share one self-join on (lang, path, slot, value[, sub]):

- path 0, generalised Manku tables (Manku, Jain, Das Sarma 2007) over simhash_w:
  64 bits cut into `blocks` blocks; a table per choice of blocks - k of them,
  keyed on those blocks' bits. Two fingerprints within k bits differ in at most
  k blocks, so they agree on some blocks - k blocks: every such pair meets in
  at least one table. A pair is kept only in the first table it matches (both
  fingerprints travel with the rows, so this and the Hamming filter happen in
  the join itself: no pair is ever de-duplicated by a shuffle).
- path 1, b x r MinHash bands over the same shingle set: pairs with Jaccard J
  meet with probability 1 - (1 - J^r)^b. Pairs path 0 already has (within k
  bits) are dropped before the remaining MinHash pairs are de-duplicated.

A bucket with more than max_band_bucket members is split into chunks of
consecutive fingerprints (so near neighbours stay together); its members are
not compared with every other member, and are returned to be counted and
flagged on their documents rows.

Every candidate is then verified on the two documents' exact shingle sets
(Jaccard, or containment of the smaller set) and must not contradict on
numbers or names: templated reports of different games share most words but
not their scores and teams.
"""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from ..config import Config, LanguageSpec, SimhashConfig

SIMHASH_PATH, MINHASH_PATH = 0, 1


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


# ---------------------------------------------------------------- per-language expressions

def per_language(sim_conf: "SimhashConfig", lang: "Column", value) -> "Column":
    """A column that is value(spec) for each configured language (default otherwise)."""
    from pyspark.sql import functions as F

    expr = value(sim_conf.languages["default"])
    for name, spec in sim_conf.languages.items():
        if name != "default":
            expr = F.when(lang == name, value(spec)).otherwise(expr)
    return expr


def _lit_masks(spec: "LanguageSpec") -> "Column":
    from pyspark.sql import functions as F

    return F.array(*[F.lit(m).cast("long") for m in table_masks(spec.blocks, spec.max_hamming)])


def _first_table(sim_conf: "SimhashConfig", lang: "Column", xor: "Column") -> "Column":
    """Index of the first table whose key bits the two fingerprints share."""
    from pyspark.sql import functions as F

    def first(spec):
        expr = F.lit(None).cast("int")
        for i, m in reversed(list(enumerate(table_masks(spec.blocks, spec.max_hamming)))):
            expr = F.when(xor.bitwiseAND(F.lit(m).cast("long")) == 0, F.lit(i)).otherwise(expr)
        return expr
    return per_language(sim_conf, lang, first)


# ---------------------------------------------------------------- candidates (Spark)

def _exploded(docs: "DataFrame", sim_conf: "SimhashConfig", paths: tuple[int, ...]) -> "DataFrame":
    """One row per (document, table) and per (document, MinHash band): id, lang, fp, path, slot, value."""
    from pyspark.sql import functions as F

    base = docs.where(F.col("simhash_w").isNotNull()).select("id", "lang", F.col("simhash_w").alias("fp"),
                                                              "mh_bands")
    tables = base.select("id", "lang", "fp", F.lit(SIMHASH_PATH).alias("path"),
                         F.posexplode(per_language(sim_conf, F.col("lang"), _lit_masks)).alias("slot", "mask"))
    tables = tables.select("id", "lang", "fp", "path", "slot", F.col("fp").bitwiseAND(F.col("mask")).alias("value"))
    bands = base.where(F.col("mh_bands").isNotNull()).select(
        "id", "lang", "fp", F.lit(MINHASH_PATH).alias("path"), F.posexplode("mh_bands").alias("slot", "value"))
    rows = tables.unionByName(bands) if SIMHASH_PATH in paths else bands
    if MINHASH_PATH not in paths:
        rows = tables
    return rows.withColumn("lang", F.coalesce("lang", F.lit("default")))


def _split_oversize(rows: "DataFrame", max_bucket: int) -> tuple["DataFrame", "DataFrame"]:
    """Add `sub` (0, or a chunk number inside an oversized bucket); also return the split rows' ids."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = ["lang", "path", "slot", "value"]
    sizes = rows.groupBy(*key).agg(F.count("*").alias("n"))
    oversize = sizes.where(F.col("n") > max_bucket).select(*key)
    # No broadcast anywhere in stage 3: under memory pressure building one failed the job.
    big = rows.join(oversize.hint("merge"), key, "left_semi")
    small = rows.join(oversize.hint("merge"), key, "left_anti").withColumn("sub", F.lit(0).cast("long"))
    # Chunks of consecutive fingerprints: near neighbours (few differing high bits) stay together.
    w = Window.partitionBy(*key).orderBy("fp", "id")
    chunked = big.withColumn("sub", F.floor((F.row_number().over(w) - 1) / max_bucket).cast("long"))
    return small.unionByName(chunked), big.select("id", "path").distinct()


def candidate_pairs(docs: "DataFrame", sim_conf: "SimhashConfig",
                    paths: tuple[int, ...] = (SIMHASH_PATH, MINHASH_PATH)) -> tuple["DataFrame", "DataFrame"]:
    """(pairs a < b with lang, path, distance; ids of documents in split buckets with their path).

    paths: which candidate paths run (the MinHash-only baseline of the benchmark uses one)."""
    from pyspark.sql import functions as F

    rows, split = _split_oversize(_exploded(docs, sim_conf, paths), sim_conf.max_band_bucket)
    a = rows.select(*[F.col(c).alias(f"a_{c}") for c in rows.columns])
    b = rows.select(*[F.col(c).alias(f"b_{c}") for c in rows.columns])
    on = [F.col(f"a_{c}") == F.col(f"b_{c}") for c in ("lang", "path", "slot", "value", "sub")]
    joined = a.hint("merge").join(b, on + [F.col("a_id") < F.col("b_id")])
    xor = F.col("a_fp").bitwiseXOR(F.col("b_fp"))
    lang = F.col("a_lang")
    within = F.bit_count(xor) <= per_language(sim_conf, lang, lambda s: F.lit(s.max_hamming))
    pairs = joined.select(F.col("a_id").alias("a"), F.col("b_id").alias("b"), lang.alias("lang"),
                          F.col("a_path").alias("path"), F.col("a_slot").alias("slot"),
                          F.bit_count(xor).alias("distance"), within.alias("within"),
                          _first_table(sim_conf, lang, xor).alias("first"))
    tables = pairs.where((F.col("path") == SIMHASH_PATH) & F.col("within") & (F.col("first") == F.col("slot")))
    # Pairs within k bits are path 0's (when it runs); the rest are de-duplicated here.
    seen_by_tables = F.col("within") if SIMHASH_PATH in paths else F.lit(False)
    minhash = (pairs.where((F.col("path") == MINHASH_PATH) & ~seen_by_tables)
               .dropDuplicates(["a", "b"]))
    cols = ["a", "b", "lang", "path", "distance"]
    return tables.select(*cols).unionByName(minhash.select(*cols)), split


# ---------------------------------------------------------------- verification (Spark)

class PairFeatures:
    """The verification columns of an Arrow batch of documents (id, lang, title, body): id and, from
    each document's content key, sh (shingle_set of its language's set features), nums (numbers_of)
    and names (names_of), the same values the per-document functions give.

    Content keys as prepare computes them (ContentKeys.batch, no html, the stored lang as the
    hint); the shingle sets in one compiled call (simhash_sets.shingle_sets), the sh column built
    straight from its offsets and values; numbers and names per document (regex).
    """

    def __init__(self, conf: "Config"):
        from .content import ContentKeys

        self.content = ContentKeys(conf.content, conf.input.max_text_chars)
        self.sim_conf = conf.simhash

    def set_features(self, langs: list[str | None]) -> tuple["np.ndarray", "np.ndarray"]:
        """(kind codes as int8, n-gram lengths as int64) of each language's set features."""
        import numpy as np

        from .simhash_kernel import KIND_CODES

        specs = [self.sim_conf.language(lang) for lang in langs]
        return (np.array([KIND_CODES[s.set_features] for s in specs], np.int8),
                np.array([s.set_ngram for s in specs], np.int64))

    def batch(self, docs: "pa.RecordBatch") -> "pa.RecordBatch":
        import numpy as np
        import pyarrow as pa

        from .simhash_features import names_of, numbers_of
        from .simhash_sets import shingle_sets

        n = docs.num_rows
        langs = docs.column("lang").to_pylist()
        keys = self.content.batch(docs.column("title").to_pylist(), docs.column("body").to_pylist(), [None] * n,
                                  langs, [[] for _ in range(n)])["key"]
        offsets, shingles = shingle_sets([k.casefold() for k in keys], *self.set_features(langs))
        sh = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(shingles))
        strings = pa.list_(pa.string())
        return pa.RecordBatch.from_arrays(
            [docs.column("id"), sh, pa.array([numbers_of(k) for k in keys], strings),
             pa.array([names_of(k) for k in keys], strings)], names=["id", "sh", "nums", "names"])


def pair_features(ctx_docs: "DataFrame", ids: "DataFrame", conf: "Config") -> "DataFrame":
    """id, sh (sorted distinct shingle hashes), nums, names for the documents in ids, from their text
    (PairFeatures, an Arrow batch at a time)."""
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("sh", T.ArrayType(T.IntegerType())),
                           T.StructField("nums", T.ArrayType(T.StringType())),
                           T.StructField("names", T.ArrayType(T.StringType()))])

    def run(batches: Iterator["pa.RecordBatch"]) -> Iterator["pa.RecordBatch"]:
        features = PairFeatures(conf)
        for docs in batches:
            yield features.batch(docs)

    return (ctx_docs.join(ids, "id", "left_semi").select("id", "lang", "title", "body")
            .mapInArrow(run, schema))


def _overlap(x: "Column", y: "Column") -> "Column":
    """|x & y| / min(|x|, |y|); null when either set is empty (no evidence either way)."""
    from pyspark.sql import functions as F

    small = F.least(F.size(x), F.size(y))
    return F.when(small > 0, F.size(F.array_intersect(x, y)) / small)


def similarity(pairs: "DataFrame", feats: "DataFrame", left: str, right: str) -> "DataFrame":
    """pairs with jaccard, containment, numbers and names overlap of the documents left and right."""
    from pyspark.sql import functions as F

    fl = feats.select(*[F.col(c).alias(f"l_{c}") for c in feats.columns])
    fr = feats.select(*[F.col(c).alias(f"r_{c}") for c in feats.columns])
    # Shuffle joins: the shingle arrays must never be broadcast (a 2g driver ran out building that).
    j = (pairs.join(fl.hint("merge"), F.col(left) == F.col("l_id"))
         .join(fr.hint("merge"), F.col(right) == F.col("r_id")))
    inter = F.size(F.array_intersect("l_sh", "r_sh"))
    union = F.size("l_sh") + F.size("r_sh") - inter
    return j.select(*pairs.columns,
                    F.when(union > 0, inter / union).otherwise(0.0).alias("jaccard"),
                    F.coalesce(_overlap(F.col("l_sh"), F.col("r_sh")), F.lit(0.0)).alias("containment"),
                    _overlap(F.col("l_nums"), F.col("r_nums")).alias("numbers"),
                    _overlap(F.col("l_names"), F.col("r_names")).alias("names"))


def verified(scored: "DataFrame", sim_conf: "SimhashConfig") -> "DataFrame":
    """The scored pairs that are duplicates under their language's thresholds."""
    from pyspark.sql import functions as F

    lang = F.col("lang")

    def at(name):
        return per_language(sim_conf, lang, lambda s: F.lit(getattr(s, name)))

    similar = (F.col("jaccard") >= at("jaccard")) | (F.col("containment") >= at("containment"))
    consistent = (F.coalesce(F.col("numbers") >= at("numbers_overlap"), F.lit(True))
                  & F.coalesce(F.col("names") >= at("names_overlap"), F.lit(True)))
    return scored.where(similar & consistent)
