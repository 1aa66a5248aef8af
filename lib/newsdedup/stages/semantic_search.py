"""Stage 4 candidate search: exact cosine search inside 48-hour windows, block by block.

Time is cut into buckets of window_hours. A pair within the window lies in one
bucket or in two adjacent ones, so bucket k is compared with itself and with
bucket k-1. A bucket is split into blocks of at most block_size documents, and
every (block, block) pair that can hold a pair is one Spark task: a task holds
at most 2 x block_size vectors whatever the bucket's size, so no bucket is ever
skipped. Scores are exact (numpy matrix products), so recall is that of
brute force.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from . import embeddings as emb

if TYPE_CHECKING:
    from ..config import SemanticConfig

EDGE_SCHEMA = "a long, b long, score double, conflict boolean"
NUMBER_PATTERN = r"\d+(?:[.,]\d+)*"
_BN_DIGITS = str.maketrans("০১২৩৪৫৬৭৮৯", "0123456789")


# ---------------------------------------------------------------- the number guard

def number_tokens(text: str) -> frozenset[str]:
    """The numbers a text states (scores, tolls, rates), Bangla digits read as digits."""
    return frozenset(_normal_number(s) for s in re.findall(NUMBER_PATTERN, (text or "").translate(_BN_DIGITS)))


def _normal_number(raw: str) -> str:
    plain = raw.replace(",", "")     # 300,000 == 300000
    try:
        return f"{float(plain):g}"    # 8.0 == 8
    except ValueError:
        return plain


def numbers_conflict(a: Sequence[str] | None, b: Sequence[str] | None, min_overlap: float | None) -> bool:
    """Both texts state numbers and share less than min_overlap of the shorter list.

    Two games, two crashes, two rate decisions written on one template embed
    almost identically; their scores, tolls and rates are what differ. Measured
    against the smaller set, so an outlet that states more numbers is no conflict.
    """
    if min_overlap is None:
        return False
    sa = {_normal_number(s) for s in (a if a is not None else ())}
    sb = {_normal_number(s) for s in (b if b is not None else ())}
    if not sa or not sb:
        return False
    return len(sa & sb) / min(len(sa), len(sb)) < min_overlap


def number_column(text_col: str = "text"):
    """The raw number strings of a text column (Spark), read by numbers_conflict."""
    translated = F.translate(F.col(text_col), "০১২৩৪৫৬৭৮৯", "0123456789")
    return F.regexp_extract_all(translated, F.lit(NUMBER_PATTERN), F.lit(0))


# ---------------------------------------------------------------- one block pair

def block_pairs(ids: np.ndarray, ts: np.ndarray, langs: np.ndarray, vecs: np.ndarray, in_a: np.ndarray,
                in_b: np.ndarray, window_s: float, same_thr: float, cross_thr: float | None,
                chunk: int = 512) -> list[tuple[int, int, float]]:
    """Pairs between side a and side b at or above threshold and at most window_s apart.

    When every row is on both sides (a block against itself) each pair is taken
    once. cross_thr None: documents of two different languages are never paired.
    Returns (a, b, cosine) with a the earlier document. vecs must be unit length.
    """
    rows_a, rows_b = np.flatnonzero(in_a), np.flatnonzero(in_b)
    if not len(rows_a) or not len(rows_b):
        return []
    same_block = bool(np.all(in_a & in_b))
    cross = np.inf if cross_thr is None else cross_thr
    # Integer language codes: comparing object arrays element by element is slower than the dot products.
    codes = np.unique(langs.astype(str), return_inverse=True)[1]
    vb, tb, lb = vecs[rows_b], ts[rows_b], codes[rows_b]
    one_lang = len(np.unique(codes)) == 1
    out: list[tuple[int, int, float]] = []
    for start in range(0, len(rows_a), int(chunk)):
        rows = rows_a[start:start + int(chunk)]
        # A block against itself: columns before this slice were paired with it already.
        first = start if same_block else 0
        cols = rows_b[first:]
        sims = vecs[rows] @ vb[first:].T
        ok = sims >= same_thr if one_lang else \
            sims >= np.where(codes[rows, None] == lb[None, first:], same_thr, cross)
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


def semantic_edges(meta: DataFrame, sem: "SemanticConfig", same_thr: float,
                   cross_thr: float | None) -> tuple[DataFrame, int]:
    """Edges (a, b, score, conflict) among documents (id, published_at, lang, model_version, embedding[, numbers]).

    Refuses vectors of more than one model_version. conflict: the number guard
    says the two texts report different events. Returns (edges, number of tasks).
    """
    spark = meta.sparkSession
    versions = [r[0] for r in meta.select("model_version").distinct().limit(5).collect()]
    if not versions:
        return spark.createDataFrame([], EDGE_SCHEMA), 0
    emb.require_same_version(versions, "embeddings")
    if "numbers" not in meta.columns:
        meta = meta.withColumn("numbers", F.array().cast("array<string>"))
    window_s = int(float(sem.window_hours) * 3600)
    block_size = int(sem.block_size)
    ts = F.col("published_at").cast("long")
    dated = (meta.where(F.col("published_at").isNotNull())
             .select("id", ts.alias("ts"), F.coalesce("lang", F.lit("")).alias("lang"), "embedding", "numbers",
                     F.floor(ts / F.lit(window_s)).cast("long").alias("bucket")))
    # One row per 48h bucket of the archive: small enough for the driver.
    counts = {r["bucket"]: r["n"] for r in dated.groupBy("bucket").agg(F.count("*").alias("n")).collect()}
    plan = block_plan(counts, block_size)
    plan_df = F.broadcast(spark.createDataFrame(plan, "task long, bucket long, block long, side_a boolean, "
                                                      "side_b boolean"))
    rank = F.row_number().over(Window.partitionBy("bucket").orderBy("id")) - 1
    blocked = dated.withColumn("block", F.floor(rank / F.lit(block_size)).cast("long"))
    tasks = blocked.join(plan_df, ["bucket", "block"]).drop("bucket", "block")
    chunk, overlap = int(sem.pair_chunk), sem.number_guard

    def score(pdf: pd.DataFrame) -> pd.DataFrame:
        pairs = block_pairs(pdf["id"].to_numpy(), pdf["ts"].to_numpy(dtype=np.float64),
                            pdf["lang"].to_numpy(dtype=object), np.stack(pdf["embedding"].to_numpy()).astype(np.float32),
                            pdf["side_a"].to_numpy(dtype=bool), pdf["side_b"].to_numpy(dtype=bool),
                            window_s, same_thr, cross_thr, chunk)
        numbers = dict(zip(pdf["id"], pdf["numbers"])) if overlap is not None and pairs else {}
        return pd.DataFrame([(a, b, s, overlap is not None and numbers_conflict(numbers[a], numbers[b], overlap))
                             for a, b, s in pairs], columns=["a", "b", "score", "conflict"])

    edges = tasks.groupBy("task").applyInPandas(score, EDGE_SCHEMA)
    return edges, len({row[0] for row in plan})


# ---------------------------------------------------------------- counting

def pairs_by_language(edges: DataFrame, meta: DataFrame, languages: Sequence[str] = ()) -> dict[str, int]:
    """{'semantic.pairs.en-bn': n, ...}: edges (candidate pairs, before the number guard) per language pair.

    A pair's languages are written in the order of `languages` (the model's
    semantic.models entry), others alphabetically after them: en-en, en-bn, bn-bn.
    """
    order = {lang: i for i, lang in enumerate(languages)}
    langs = meta.select("id", F.coalesce("lang", F.lit("")).alias("lang"))
    rows = (edges.select("a", "b")
            .join(langs.withColumnRenamed("id", "a").withColumnRenamed("lang", "la"), "a")
            .join(langs.withColumnRenamed("id", "b").withColumnRenamed("lang", "lb"), "b")
            .groupBy("la", "lb").count().collect())
    counts: dict[str, int] = {}
    for r in rows:
        pair = sorted((r["la"], r["lb"]), key=lambda x: (order.get(x, len(order)), x))
        key = f"semantic.pairs.{pair[0] or 'unknown'}-{pair[1] or 'unknown'}"
        counts[key] = counts.get(key, 0) + int(r["count"])
    return counts
