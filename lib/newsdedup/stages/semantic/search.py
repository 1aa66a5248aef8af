"""Stage 4 candidate search: exact cosine search inside 48-hour windows, block by block.

Time is cut into buckets of window_hours. A pair within the window lies in one
bucket or in two adjacent ones, so bucket k is compared with itself and with
bucket k-1. A bucket is split into blocks of at most block_size documents, and
every (block, block) pair that can hold a pair is one Spark task: a task holds
at most 2 x block_size vectors whatever the bucket's size, so no bucket is ever
skipped. Scores are exact (numpy matrix products), so recall is that of
brute force. Each pair above its language pair's threshold is then checked
against the two documents' facts (evidence.py): the cosine proposes, the
evidence decides.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from . import embeddings as emb
from .evidence import Facts, refusal

if TYPE_CHECKING:
    from ...config import SemanticConfig, SemanticThresholds

# One row per pair above its threshold within the window; reason: why the evidence
# refused it (semantic_evidence.REASONS), null for a pair that links.
EDGE_SCHEMA = "a long, b long, score double, lang_pair string, reason string"


def lang_pair(a: str, b: str) -> str:
    """'en-en', 'bn-bn', 'en-bn': English first, then alphabetical."""
    return "-".join(sorted((a or "", b or ""), key=lambda x: (x != "en", x)))


# ---------------------------------------------------------------- one block pair

def threshold_matrix(names: np.ndarray, thresholds: "SemanticThresholds") -> np.ndarray:
    """[i, j]: the cosine a pair of languages names[i], names[j] must reach (inf: never compared)."""
    n = len(names)
    out = np.full((n, n), np.inf)
    for i in range(n):
        for j in range(n):
            t = thresholds.for_pair(str(names[i]), str(names[j]))
            out[i, j] = np.inf if t is None else t
    return out


def block_pairs(ids: np.ndarray, ts: np.ndarray, langs: np.ndarray, vecs: np.ndarray, in_a: np.ndarray,
                in_b: np.ndarray, window_s: float, thresholds: "SemanticThresholds",
                chunk: int = 512) -> list[tuple[int, int, float]]:
    """Pairs between side a and side b at or above their language pair's threshold, at most window_s apart.

    When every row is on both sides (a block against itself) each pair is taken
    once. A language pair without a threshold (cross_language None) is never paired.
    Returns (a, b, cosine) with a the earlier document. vecs must be unit length.
    """
    rows_a, rows_b = np.flatnonzero(in_a), np.flatnonzero(in_b)
    if not len(rows_a) or not len(rows_b):
        return []
    same_block = bool(np.all(in_a & in_b))
    # Integer language codes: comparing object arrays element by element is slower than the dot products.
    names, codes = np.unique(langs.astype(str), return_inverse=True)
    limits = threshold_matrix(names, thresholds)
    vb, tb, lb = vecs[rows_b], ts[rows_b], codes[rows_b]
    out: list[tuple[int, int, float]] = []
    for start in range(0, len(rows_a), int(chunk)):
        rows = rows_a[start:start + int(chunk)]
        # A block against itself: columns before this slice were paired with it already.
        first = start if same_block else 0
        cols = rows_b[first:]
        sims = vecs[rows] @ vb[first:].T
        ok = sims >= limits[codes[rows, None], lb[None, first:]]
        ok &= np.abs(ts[rows, None] - tb[None, first:]) <= window_s
        if same_block:
            ok &= rows[:, None] < cols[None, :]
        for hr, hc in zip(*np.nonzero(ok)):
            r, c = rows[hr], cols[hc]
            i, j = (r, c) if (ts[r], ids[r]) <= (ts[c], ids[c]) else (c, r)
            out.append((int(ids[i]), int(ids[j]), float(min(1.0, sims[hr, hc]))))
    return out


# ---------------------------------------------------------------- the block plan

def block_plan(counts: dict[int, int], block_size: int) -> list[tuple[int, int, int, bool, bool]]:
    """(task, bucket, block, side_a, side_b) rows: which blocks meet in which task.

    counts: documents per bucket. Bucket k's blocks meet each other (i <= j) and
    every block of bucket k-1; a block against itself is one row on both sides.
    """
    nblocks = {k: max(1, math.ceil(n / block_size)) for k, n in counts.items() if n}
    rows: list[tuple[int, int, int, bool, bool]] = []
    task = 0
    for k in sorted(nblocks):
        for i in range(nblocks[k]):
            for other, blocks in ((k, range(i, nblocks[k])), (k - 1, range(nblocks.get(k - 1, 0)))):
                for j in blocks:
                    if other == k and i == j:
                        rows.append((task, k, i, True, True))
                    else:
                        rows += [(task, k, i, True, False), (task, other, j, False, True)]
                    task += 1
    return rows


def semantic_edges(meta: DataFrame, sem: "SemanticConfig",
                   thresholds: "SemanticThresholds") -> tuple[DataFrame, int]:
    """Edges (EDGE_SCHEMA) among documents (id, published_at, lang, model_version, embedding, facts).

    Refuses vectors of more than one model_version. Every pair above its threshold
    within the window is an edge; `reason` says why the evidence (facts, see
    semantic_evidence) refuses it, null when it links. Returns (edges, number of tasks).
    """
    spark = meta.sparkSession
    versions = [r[0] for r in meta.select("model_version").distinct().limit(5).collect()]
    if not versions:
        return spark.createDataFrame([], EDGE_SCHEMA), 0
    emb.require_same_version(versions, "embeddings")
    window_s = int(float(sem.window_hours) * 3600)
    block_size = int(sem.block_size)
    ts = F.col("published_at").cast("long")
    dated = (meta.where(F.col("published_at").isNotNull())
             .select("id", ts.alias("ts"), F.coalesce("lang", F.lit("")).alias("lang"), "embedding", "facts",
                     F.floor(ts / F.lit(window_s)).cast("long").alias("bucket")))
    # One row per 48h bucket of the archive: small enough for the driver.
    counts = {r["bucket"]: r["n"] for r in dated.groupBy("bucket").agg(F.count("*").alias("n")).collect()}
    plan = block_plan(counts, block_size)
    plan_df = F.broadcast(spark.createDataFrame(plan, "task long, bucket long, block long, side_a boolean, "
                                                      "side_b boolean"))
    rank = F.row_number().over(Window.partitionBy("bucket").orderBy("id")) - 1
    blocked = dated.withColumn("block", F.floor(rank / F.lit(block_size)).cast("long"))
    tasks = blocked.join(plan_df, ["bucket", "block"]).drop("bucket", "block")
    chunk, rules = int(sem.pair_chunk), sem.evidence

    def score(pdf: pd.DataFrame) -> pd.DataFrame:
        pairs = block_pairs(pdf["id"].to_numpy(), pdf["ts"].to_numpy(dtype=np.float64),
                            pdf["lang"].to_numpy(dtype=object), np.stack(pdf["embedding"].to_numpy()).astype(np.float32),
                            pdf["side_a"].to_numpy(dtype=bool), pdf["side_b"].to_numpy(dtype=bool),
                            window_s, thresholds, chunk)
        if not pairs:
            return pd.DataFrame(columns=["a", "b", "score", "lang_pair", "reason"])
        # A document is on both sides of a self-block: its first row carries the same facts.
        rows = pdf.drop_duplicates("id").set_index("id")
        facts = {i: Facts.from_row(f) for i, f in rows["facts"].items()}
        lang = rows["lang"].to_dict()
        return pd.DataFrame([(a, b, s, lang_pair(lang[a], lang[b]), refusal(facts[a], facts[b], rules, lang[a] == lang[b]))
                             for a, b, s in pairs], columns=["a", "b", "score", "lang_pair", "reason"])

    edges = tasks.groupBy("task").applyInPandas(score, EDGE_SCHEMA)
    return edges, len({row[0] for row in plan})
