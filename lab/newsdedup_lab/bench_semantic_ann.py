"""Choose stage 4's approximate index: FAISS HNSW, FAISS IVF-Flat and hnswlib against exact search.

One 48-hour window of n synthetic unit vectors (dim 1024, BGE-M3's), shaped like news
embeddings rather than like noise:

- anisotropy: every vector shares a common direction, so two unrelated documents sit
  at cosine ~0.35 (not ~0 as random vectors do);
- topics: documents of one topic (of `topics`) sit at ~0.65: close, below every threshold;
- events: a share of documents are reports of one event by 2-8 outlets; each event gets
  a target cosine drawn from [0.74, 0.96], so its pairs straddle the 0.80/0.85 thresholds
  and recall is measured where it matters.

Ground truth: pairs with cosine >= threshold (the lowest threshold of any language pair in
conf: BGE-M3's cross-language 0.80) found by `search.block_pairs` itself, the stage's exact
code, for a sample of query documents against all n (every event member in the sample's
events, plus random documents); exact over all n x n is too slow for this shared 2-core
machine, so its time is the sample's time scaled by n / (2 x sample) (block_pairs scores
each pair of a bucket once, n^2 / 2 in all) and is reported as extrapolated.

Recall: the share of those exact pairs that the index's candidates contain, once rescored
exactly (cosine recomputed, threshold applied): exactly what the step keeps. Every method
queries all n documents (both ends of a pair query; their candidates are united).

    python -m newsdedup_lab.bench_semantic_ann --n 200000 --out docs/benchmarks_semantic_ann.md
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

DIM = 1024


def corpus(n: int, dim: int, seed: int = 7, topics: int = 2000, event_share: float = 0.12,
           chunk: int = 20000) -> tuple[np.ndarray, np.ndarray]:
    """(unit vectors float32 [n, dim], event id per row, -1 for none). Deterministic in seed."""
    rng = np.random.default_rng(seed)
    common = rng.standard_normal(dim).astype(np.float32)
    common /= np.linalg.norm(common)
    centres = rng.standard_normal((topics, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    # Weights (squared): 0.35 common + 0.30 topic + 0.35 own => unrelated ~0.35, same topic ~0.65.
    a, b, c = np.sqrt(0.35), np.sqrt(0.30), np.sqrt(0.35)
    topic = rng.integers(0, topics, n)
    vecs = np.empty((n, dim), np.float32)
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        own = rng.standard_normal((e - s, dim)).astype(np.float32) / np.sqrt(dim)
        vecs[s:e] = a * common + b * centres[topic[s:e]] + c * own
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    # Events: members replace the vectors of consecutive rows (the rows are random anyway).
    event = np.full(n, -1, np.int64)
    i, eid, budget = 0, 0, int(n * event_share)
    while i < budget:
        size = int(rng.integers(2, 9))
        target = float(rng.uniform(0.74, 0.96))
        # member = base + s * noise with |noise| ~ 1: cos(member, member') ~ 1 / (1 + s^2).
        s = np.sqrt(1.0 / target - 1.0)
        base = vecs[i]
        members = base + s * rng.standard_normal((size, dim)).astype(np.float32) / np.sqrt(dim)
        rows = slice(i, min(n, i + size))
        vecs[rows] = (members / np.linalg.norm(members, axis=1, keepdims=True))[: rows.stop - rows.start]
        event[rows] = eid
        i, eid = i + size, eid + 1
    order = rng.permutation(n)   # events are not in consecutive rows in a real bucket
    return np.ascontiguousarray(vecs[order]), event[order]


def sample_queries(event: np.ndarray, n_random: int, n_events: int, seed: int = 11) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ids = np.unique(event[event >= 0])
    chosen = rng.choice(ids, size=min(n_events, len(ids)), replace=False)
    rows = np.flatnonzero(np.isin(event, chosen))
    return np.unique(np.concatenate([rows, rng.choice(len(event), n_random, replace=False)]))


def exact_sample(vecs: np.ndarray, rows: np.ndarray, thr: float) -> tuple[set[tuple[int, int]], float]:
    """Pairs (i < j) with cosine >= thr that involve a row of `rows`, by search.block_pairs; seconds."""
    from newsdedup.config import SemanticThresholds
    from newsdedup.stages.semantic import search

    n = len(vecs)
    ids = np.arange(n, dtype=np.int64)
    ts = np.zeros(n)
    langs = np.full(n, "en", dtype=object)
    in_a = np.zeros(n, bool)
    in_a[rows] = True
    t0 = time.perf_counter()
    pairs = search.block_pairs(ids, ts, langs, vecs, in_a, np.ones(n, bool), 3600.0, SemanticThresholds(thr))
    secs = time.perf_counter() - t0
    return {(min(a, b), max(a, b)) for a, b, _ in pairs if a != b}, secs


def rescore(vecs: np.ndarray, pairs: np.ndarray, thr: float) -> np.ndarray:
    """Candidate pairs [m, 2] whose recomputed cosine reaches thr (what the step keeps)."""
    keep = np.empty(len(pairs), bool)
    for s in range(0, len(pairs), 65536):
        p = pairs[s:s + 65536]
        keep[s:s + 65536] = np.einsum("ij,ij->i", vecs[p[:, 0]], vecs[p[:, 1]]) >= thr
    return pairs[keep]


def unique_pairs(q: np.ndarray, b: np.ndarray) -> np.ndarray:
    lo, hi = np.minimum(q, b), np.maximum(q, b)
    keep = lo != hi
    return np.unique(np.stack([lo[keep], hi[keep]], axis=1), axis=0)


def adaptive_knn(search, n_queries: int, low: float, k0: int, n: int) -> tuple[np.ndarray, np.ndarray, int]:
    """k-NN with k0, then again with 4k for queries whose k-th neighbour still reaches `low`
    (their list may be cut short), until none does. search(rows, k) -> (sims, ids).
    Returns (query rows, base ids) of neighbours with sim >= low, and the number of re-queries."""
    rows = np.arange(n_queries)
    qs, bs, again = [], [], 0
    k = k0
    while len(rows):
        k = min(k, n)
        sims, ids = search(rows, k)
        hit = (sims >= low) & (ids >= 0)
        r, c = np.nonzero(hit)
        qs.append(rows[r])
        bs.append(ids[r, c])
        full = hit[:, -1] if k < n else np.zeros(len(rows), bool)
        # The earlier, shorter lists of these rows are kept too: duplicates go in unique_pairs.
        rows = rows[full]
        again += len(rows)
        k *= 4
    return np.concatenate(qs), np.concatenate(bs), again


@dataclass
class Row:
    method: str
    params: str
    build_s: float
    query_s: float
    rescore_s: float
    candidates: int
    kept: int
    recall: float
    missed: int
    requeries: int = 0

    @property
    def total_s(self) -> float:
        return self.build_s + self.query_s + self.rescore_s


def _finish(method, params, vecs, q, b, thr, truth, build_s, query_s, again=0) -> Row:
    t0 = time.perf_counter()
    cand = unique_pairs(q.astype(np.int64), b.astype(np.int64))
    kept = rescore(vecs, cand, thr)
    rescore_s = time.perf_counter() - t0
    found = {(int(x), int(y)) for x, y in kept}
    hits = len(truth & found)
    return Row(method, params, round(build_s, 1), round(query_s, 1), round(rescore_s, 1), len(cand), len(kept),
               hits / len(truth) if truth else 1.0, len(truth) - hits, again)


def run_faiss_hnsw(vecs, thr, low, truth, m, ef_c, efs, k0) -> list[Row]:
    import faiss

    t0 = time.perf_counter()
    index = faiss.IndexHNSWFlat(vecs.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_c
    index.add(vecs)
    build = time.perf_counter() - t0
    out = []
    for ef in efs:
        t0 = time.perf_counter()

        def search(rows, k):
            index.hnsw.efSearch = max(ef, k)
            return index.search(vecs[rows], k)

        q, b, again = adaptive_knn(search, len(vecs), low, k0, len(vecs))
        out.append(_finish("faiss HNSWFlat", f"M={m} efC={ef_c} efSearch={ef} k0={k0}", vecs, q, b, thr, truth,
                           build, time.perf_counter() - t0, again))
        print(out[-1], flush=True)
    del index
    return out


def run_hnswlib(vecs, thr, low, truth, m, ef_c, efs, k0, threads) -> list[Row]:
    import hnswlib

    t0 = time.perf_counter()
    index = hnswlib.Index(space="ip", dim=vecs.shape[1])
    index.init_index(max_elements=len(vecs), M=m, ef_construction=ef_c, random_seed=1)
    index.add_items(vecs, np.arange(len(vecs)), num_threads=threads)
    build = time.perf_counter() - t0
    out = []
    for ef in efs:
        t0 = time.perf_counter()

        def search(rows, k):
            index.set_ef(max(ef, k))
            labels, dist = index.knn_query(vecs[rows], k=k, num_threads=threads)
            return 1.0 - dist, labels.astype(np.int64)   # hnswlib's "ip" distance is 1 - <a, b>

        q, b, again = adaptive_knn(search, len(vecs), low, k0, len(vecs))
        out.append(_finish("hnswlib", f"M={m} efC={ef_c} ef={ef} k0={k0}", vecs, q, b, thr, truth,
                           build, time.perf_counter() - t0, again))
        print(out[-1], flush=True)
    del index
    return out


def run_faiss_ivf(vecs, thr, low, truth, nlist, probes, train_n) -> list[Row]:
    import faiss

    t0 = time.perf_counter()
    quant = faiss.IndexFlatIP(vecs.shape[1])
    index = faiss.IndexIVFFlat(quant, vecs.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(3)
    index.train(vecs[rng.choice(len(vecs), min(train_n, len(vecs)), replace=False)])
    index.add(vecs)
    build = time.perf_counter() - t0
    out = []
    for nprobe in probes:
        index.nprobe = nprobe
        t0 = time.perf_counter()
        qs, bs = [], []
        for s in range(0, len(vecs), 20000):
            lims, _, ids = index.range_search(vecs[s:s + 20000], low)
            qs.append(s + np.repeat(np.arange(len(lims) - 1), np.diff(lims).astype(np.int64)))
            bs.append(ids)
        out.append(_finish("faiss IVFFlat", f"nlist={nlist} nprobe={nprobe} range", vecs, np.concatenate(qs),
                           np.concatenate(bs), thr, truth, build, time.perf_counter() - t0))
        print(out[-1], flush=True)
    del index
    return out


def run_newsdedup(vecs, thr, low, truth, ann_conf, threads) -> Row:
    """The stage's own candidates (stages/semantic/ann.py), timed as one call (build + query; `build s` 0)."""
    from newsdedup.stages.semantic import ann

    t0 = time.perf_counter()
    q, b = ann.candidates(vecs, vecs, low, ann_conf, threads)
    secs = time.perf_counter() - t0
    if ann_conf.index == "ivf":
        params = f"nlist={ann.cells(len(vecs), ann_conf)} nprobe={ann_conf.nprobe}"
    else:
        params = f"M={ann_conf.m} efC={ann_conf.ef_construction} efSearch={ann_conf.ef_search} k={ann_conf.k}"
    row = _finish(f"newsdedup {ann_conf.index}", params, vecs, q, b, thr, truth, 0.0, secs)
    print(row, flush=True)
    return row


def markdown(rows: list[Row], exact_s: float, sample: int, n: int, truth: int, thr: float, command: str,
             machine: str, load: str) -> str:
    full = exact_s * n / (2 * sample)
    lines = [
        "# Stage 4 approximate search: which index", "",
        f"Generated by `{command}` on {machine}; `uptime` before / after: {load}.", "",
        f"One 48-hour window of {n:,} synthetic unit vectors of dim {DIM} (news-like structure: see the "
        f"module docstring of `lab/newsdedup_lab/bench_semantic_ann.py`). Threshold {thr} (the lowest of "
        "any language pair in conf). Ground truth: `search.block_pairs` (the stage's exact code) for "
        f"{sample:,} query documents against all {n:,}: {truth:,} pairs at or above the threshold, in "
        f"{exact_s:.1f} s. **Exact over the whole window was not run** (too slow for this shared machine): "
        f"its time is extrapolated as {exact_s:.1f} s x n / (2 x sample) = **{full:,.0f} s**.", "",
        "Every method queries all documents of the window; candidates are rescored exactly (recomputed "
        "cosine >= threshold), so `recall` is the share of the sample's exact pairs the step would keep. "
        "HNSW methods use k-NN with k0 and repeat with 4k for the queries whose k-th neighbour still "
        "passes (`re-queries`); IVF uses FAISS's range search. `vs exact` = total / extrapolated exact.", "",
        "| method | params | build s | query s | rescore s | total s | vs exact | candidates | kept | "
        "recall | missed | re-queries |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.method} | {r.params} | {r.build_s} | {r.query_s} | {r.rescore_s} | {r.total_s:.1f} | "
                     f"{r.total_s / full:.3f} | {r.candidates:,} | {r.kept:,} | {r.recall:.4f} | {r.missed} | "
                     f"{r.requeries:,} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m newsdedup_lab.bench_semantic_ann")
    p.add_argument("--n", type=int, default=200_000)
    p.add_argument("--threshold", type=float, default=0.80)
    p.add_argument("--sample-random", type=int, default=2000)
    p.add_argument("--sample-events", type=int, default=400)
    p.add_argument("--methods", default="faiss-hnsw,hnswlib,faiss-ivf")
    p.add_argument("--m", type=int, default=32)
    p.add_argument("--ef-construction", type=int, default=80)
    p.add_argument("--ef-search", default="64,128")
    p.add_argument("--k0", type=int, default=16)
    p.add_argument("--nlist", type=int, default=1024)
    p.add_argument("--nprobe", default="8,32")
    p.add_argument("--nlist-newsdedup", type=int, help="newsdedup-ivf cells (default: ~2 sqrt(n))")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--out")
    args = p.parse_args(argv)
    command = "python -m newsdedup_lab.bench_semantic_ann " + " ".join(sys.argv[1:] if argv is None else argv)
    load = [subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()]

    t0 = time.perf_counter()
    vecs, event = corpus(args.n, DIM)
    print(f"corpus {args.n} x {DIM} in {time.perf_counter() - t0:.1f} s", flush=True)
    rows = sample_queries(event, args.sample_random, args.sample_events)
    truth, exact_s = exact_sample(vecs, rows, args.threshold)
    print(f"exact: {len(rows)} queries, {len(truth)} pairs, {exact_s:.1f} s", flush=True)
    # Candidates must include every exact pair: queried a little below the threshold, rescored at it.
    low = args.threshold - 0.01
    efs = [int(x) for x in args.ef_search.split(",")]
    results: list[Row] = []
    for method in args.methods.split(","):
        if method == "faiss-hnsw":
            results += run_faiss_hnsw(vecs, args.threshold, low, truth, args.m, args.ef_construction, efs, args.k0)
        elif method == "hnswlib":
            results += run_hnswlib(vecs, args.threshold, low, truth, args.m, args.ef_construction, efs, args.k0,
                                   args.threads)
        elif method.startswith("newsdedup-"):
            # newsdedup-ivf:16 (nprobe) or newsdedup-hnsw:64 (ef_search), the rest from conf defaults
            from newsdedup.config import AnnConfig

            kind, _, value = method.removeprefix("newsdedup-").partition(":")
            conf = AnnConfig(index=kind, nlist=args.nlist_newsdedup)
            if value:
                conf = dataclasses.replace(conf, **({"nprobe": int(value)} if kind == "ivf"
                                                    else {"ef_search": int(value)}))
            results.append(run_newsdedup(vecs, args.threshold, low, truth, conf, args.threads))
        elif method == "faiss-ivf":
            results += run_faiss_ivf(vecs, args.threshold, low, truth, args.nlist,
                                     [int(x) for x in args.nprobe.split(",")], 50_000)
        gc.collect()
    load.append(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    machine = f"{platform.machine()}, {os.cpu_count()} cores (shared)"
    text = markdown(results, exact_s, len(rows), args.n, len(truth), args.threshold, command, machine,
                    " / ".join(load))
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
