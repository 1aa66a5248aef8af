"""Bench stage 4's candidate search (semantic_search.semantic_edges) on large 48-hour windows.

Embedding is not part of it: vectors are random unit vectors generated on the
executors (seeded per document), with planted near-duplicates (cosine ~0.995,
30 minutes apart) every `plant_every` documents. Random 384-d unit vectors have
cosines around 0 +- 0.05, so the edges found are the planted pairs, and recall
is measured against them; with --verify N the edges of an N-per-48h corpus are
also compared with brute-force numpy over all pairs.

    python -m newsdedup_lab.bench_semantic --sizes 20000,50000 --out docs/benchmarks_semantic.md
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd

SPAN_H = 96            # two 48h windows, so that both in-bucket and cross-bucket blocks are exercised
WINDOW_S = 48 * 3600
T0 = 1_700_006_400     # a bucket boundary (multiple of 48h)
PLANT_EVERY = 50


def _vector(i: int, dim: int) -> np.ndarray:
    v = np.random.default_rng(i).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def _ts(i: int, span_s: int) -> int:
    return T0 + int(np.random.default_rng(i + 10_000_000).integers(0, span_s))


def doc_row(i: int, dim: int, span_s: int) -> tuple[int, int, np.ndarray]:
    """(id, published_at seconds, unit vector); every PLANT_EVERY-th document copies the one before."""
    if i % PLANT_EVERY == 1:
        base = _vector(i - 1, dim)
        noisy = base + 0.1 * np.random.default_rng(i).standard_normal(dim).astype(np.float32) / np.sqrt(dim)
        return i, min(_ts(i - 1, span_s) + 1800, T0 + span_s - 1), noisy / np.linalg.norm(noisy)
    return i, _ts(i, span_s), _vector(i, dim)


def planted(n: int) -> set[tuple[int, int]]:
    return {(i - 1, i) for i in range(1, n) if i % PLANT_EVERY == 1}


def corpus(spark, n: int, dim: int, span_s: int):
    """id, published_at, lang, model_version, embedding, generated on the executors."""
    def gen(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for pdf in batches:
            rows = [doc_row(int(i), dim, span_s) for i in pdf["id"]]
            yield pd.DataFrame({"id": [r[0] for r in rows], "ts": [r[1] for r in rows],
                                "embedding": [r[2] for r in rows]})

    from pyspark.sql import functions as F

    df = spark.range(n, numPartitions=4).mapInPandas(gen, "id long, ts long, embedding array<float>")
    # Random documents state no facts (the bench turns the evidence off).
    empty = F.array().cast("array<string>")
    facts = F.struct(empty.alias("numbers"), empty.alias("scores"), empty.alias("days"), empty.alias("names"))
    return df.select("id", F.col("ts").cast("timestamp").alias("published_at"), F.lit("en").alias("lang"),
                     F.lit("bench@random").alias("model_version"), "embedding", facts.alias("facts"))


def brute_force(n: int, dim: int, span_s: int, thr: float) -> set[tuple[int, int]]:
    rows = [doc_row(i, dim, span_s) for i in range(n)]
    ts = np.array([r[1] for r in rows], dtype=np.float64)
    vecs = np.stack([r[2] for r in rows])
    out = set()
    for s in range(0, n, 2048):
        sims = vecs[s:s + 2048] @ vecs.T
        close = np.abs(ts[s:s + 2048, None] - ts[None, :]) <= WINDOW_S
        for r, c in zip(*np.nonzero((sims >= thr) & close)):
            a, b = s + r, c
            if a < b:
                out.add((int(a), int(b)) if (ts[a], a) <= (ts[b], b) else (int(b), int(a)))
    return out


@dataclass
class Result:
    per_48h: int
    docs: int
    dim: int
    block_size: int
    tasks: int
    seconds: float
    pairs_per_s: float
    edges: int
    planted: int
    recall: float
    task_bound_mb: float
    workers_peak_mb: float
    exact_match: str = "-"


def bench_one(spark, sem, per_48h: int, dim: int, thr: float, verify: bool) -> Result:
    from newsdedup.config import SemanticThresholds
    from newsdedup.stages.semantic import search as semantic_search
    from .memory import MemorySampler

    docs = per_48h * SPAN_H // 48
    span_s = SPAN_H * 3600
    meta = corpus(spark, docs, dim, span_s).cache()
    meta.count()
    with MemorySampler() as mem:
        t0 = time.perf_counter()
        edges, tasks, _, _ = semantic_search.semantic_edges(meta, sem, SemanticThresholds(thr))
        got = {(int(r.a), int(r.b)) for r in edges.collect()}
        secs = time.perf_counter() - t0
    meta.unpersist()
    plant = planted(docs)
    exact = "-"
    if verify:
        exact = "identical" if got == brute_force(docs, dim, span_s, thr) else "DIFFERENT"
    # Pairs scored: two buckets of n, n*n/2 inside each and n*n across them = 2n^2 = docs * n.
    scored = docs * per_48h
    b = sem.block_size
    bound = (2 * b * dim * 4 + sem.pair_chunk * b * (4 + 1 + 1 + 8)) / 2 ** 20
    return Result(per_48h, docs, dim, b, tasks, round(secs, 1), scored / secs, len(got), len(plant),
                  len(got & plant) / len(plant) if plant else 1.0, round(bound, 1),
                  round(mem.peak["workers_mb"]), exact)


def markdown(results: list[Result], command: str, machine: str) -> str:
    lines = ["# Stage 4 search benchmark", "",
             f"Generated by `{command}` on {machine}. Random unit vectors (no embedding), "
             f"{SPAN_H} hours of documents, a planted near-duplicate every {PLANT_EVERY} documents; "
             "`seconds` is `semantic_edges` plus collecting its edges (Spark, exact cosine, block by block). "
             "`task bound` = vectors of two blocks + one similarity slice with its masks, per task; "
             "`workers peak` = RSS of all Python workers together (psutil, every 0.25 s).", "",
             "| docs per 48h | docs | dim | block | tasks | seconds | pairs scored/s | edges | planted recall "
             "| vs brute force | task bound MB | workers peak MB |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in results:
        lines.append(f"| {r.per_48h:,} | {r.docs:,} | {r.dim} | {r.block_size:,} | {r.tasks} | {r.seconds} | "
                     f"{r.pairs_per_s:,.0f} | {r.edges:,} | {r.recall:.3f} | {r.exact_match} | "
                     f"{r.task_bound_mb} | {r.workers_peak_mb:,.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from newsdedup.config import load_config
    from newsdedup.io.spark import get_spark

    p = argparse.ArgumentParser(prog="python -m newsdedup_lab.bench_semantic")
    p.add_argument("--sizes", default="20000,50000", help="documents per 48 hours")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--block-size", type=int, help="default: semantic.block_size")
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("--verify", type=int, default=2000, help="also check this size against brute force (0: skip)")
    p.add_argument("--verify-block-size", type=int, default=512, help="small blocks, so that the check crosses them")
    p.add_argument("--out", default="docs/benchmarks_semantic.md")
    p.add_argument("--conf")
    args = p.parse_args(argv)
    conf = load_config(args.conf)
    sem = conf.semantic if not args.block_size else dataclasses.replace(conf.semantic, block_size=args.block_size)
    # Random vectors state no facts: the bench measures the cosine search, so the evidence is off.
    sem = dataclasses.replace(sem, evidence=dataclasses.replace(sem.evidence, enabled=False))
    spark = get_spark(conf, "newsdedup-bench-semantic")
    command = "python -m newsdedup_lab.bench_semantic " + " ".join(sys.argv[1:] if argv is None else argv)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Spark master {spark.sparkContext.master}"
    results = []

    def save() -> None:   # rewritten after every size, so that a long run leaves a report behind
        print(markdown(results, command, machine), flush=True)
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(markdown(results, command, machine))

    if args.verify:
        small = dataclasses.replace(sem, block_size=args.verify_block_size)
        results.append(bench_one(spark, small, args.verify, args.dim, args.threshold, verify=True))
        save()
    for n in (int(x) for x in args.sizes.split(",") if x):
        results.append(bench_one(spark, sem, n, args.dim, args.threshold, verify=False))
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
