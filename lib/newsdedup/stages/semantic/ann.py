"""Approximate candidates for stage 4's large windows: a FAISS index per 48-hour bucket.

Exact search scores every pair of a bucket: n^2 / 2 cosines, 2 x 10^10 for a bucket of
200,000. An index proposes, for each query vector, the base vectors whose inner product it
puts at or above `low`; search.py then recomputes every proposed pair's cosine and applies
the thresholds, the window and the evidence exactly as for exact search. An index can
therefore only miss pairs, never add one (docs/benchmarks_semantic_ann.md measures how many
it misses).

Two FAISS indexes (semantic.search.ann.index):

- ivf: FAISS k-means cuts the bucket into cells (nlist); a query is compared exactly with
  every vector of its `nprobe` nearest cells, cell by cell as one matrix product (every
  vector of those cells at or above `low`, however many: no k to run out of).
- hnsw: IndexHNSWFlat, inner product, k-NN with k; a query whose k-th neighbour still
  reaches `low` may have more, so it is asked again with 4k, until none is cut short.

No Spark here: search.py calls `candidates` inside one task per bucket. FAISS is an optional
dependency (extra `ann`); `available()` says whether it is installed.
"""

from __future__ import annotations

import importlib.util
import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ...config import AnnConfig

QUERY_BATCH = 16384   # queries per FAISS call: bounds the result lists held at once


def available() -> bool:
    return importlib.util.find_spec("faiss") is not None


def cells(n: int, ann: "AnnConfig") -> int:
    """IVF cells for a bucket of n vectors: ann.nlist, else ~2 x sqrt(n); never more than n."""
    want = ann.nlist if ann.nlist else int(round(2 * math.sqrt(n)))
    return max(1, min(n, want))


def _threads(faiss, threads: int | None) -> None:
    # A Spark task has spark.task.cpus cores: more OpenMP threads than that fight the other tasks.
    if threads:
        faiss.omp_set_num_threads(int(threads))


def candidates(base: np.ndarray, queries: np.ndarray, low: float, ann: "AnnConfig",
               threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(query row, base row) arrays: pairs the index puts at inner product >= low.

    base and queries are float32 unit vectors; a pair may come back more than once.
    """
    import faiss

    _threads(faiss, threads)
    base = np.ascontiguousarray(base, dtype=np.float32)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    n, dim = base.shape
    if not n or not len(queries):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if ann.index == "ivf":
        return _cells(faiss, base, queries, low, cells(n, ann), int(ann.nprobe))
    index = faiss.IndexHNSWFlat(dim, int(ann.m), faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = int(ann.ef_construction)
    index.add(base)
    return _knn(index, queries, low, int(ann.k), int(ann.ef_search), n)


def _cells(faiss, base: np.ndarray, queries: np.ndarray, low: float, nlist: int,
           nprobe: int) -> tuple[np.ndarray, np.ndarray]:
    """IVF with the list scan done cell by cell as one matrix product.

    FAISS's IndexIVFFlat scans a list vector by vector for each query: at 1024 dimensions
    that reads 4 KB per vector and query, and measured slower than exact search at 20,000
    vectors (docs/benchmarks_semantic_ann.md). Here FAISS's k-means cuts the bucket into
    cells and its flat index gives each query its nprobe nearest cells; then every cell is
    compared with all the queries that probe it in one BLAS product, which reuses each
    vector across thousands of queries.
    """
    n, dim = base.shape
    nprobe = min(nprobe, nlist)
    # k-means on up to 64 vectors per cell, 10 rounds: enough for cells, a fraction of the
    # full-size training cost (which at 200,000 x 1024 rivals the search itself).
    km = faiss.Kmeans(dim, nlist, niter=10, max_points_per_centroid=64, min_points_per_centroid=1,
                      spherical=True, seed=1234, verbose=False)
    km.train(base)
    centroids = faiss.IndexFlatIP(dim)
    centroids.add(km.centroids)
    _, home = centroids.search(base, 1)
    _, probes = centroids.search(queries, nprobe)
    home, probes = home[:, 0], probes.ravel()
    by_cell = np.argsort(home, kind="stable")
    cell_edges = np.searchsorted(home[by_cell], np.arange(nlist + 1))
    by_probe = np.argsort(probes, kind="stable")
    probe_edges = np.searchsorted(probes[by_probe], np.arange(nlist + 1))
    qs, bs = [], []
    for c in range(nlist):
        members = by_cell[cell_edges[c]:cell_edges[c + 1]]
        askers = by_probe[probe_edges[c]:probe_edges[c + 1]] // nprobe
        if not len(members) or not len(askers):
            continue
        for s in range(0, len(askers), QUERY_BATCH):
            part = askers[s:s + QUERY_BATCH]
            r, k = np.nonzero(queries[part] @ base[members].T >= low)
            qs.append(part[r])
            bs.append(members[k])
    if not qs:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(qs).astype(np.int64), np.concatenate(bs).astype(np.int64)


def _knn(index, queries: np.ndarray, low: float, k0: int, ef: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    qs, bs = [], []
    rows, k = np.arange(len(queries), dtype=np.int64), k0
    while len(rows):
        k = min(k, n)
        index.hnsw.efSearch = max(ef, k)
        again = []
        for s in range(0, len(rows), QUERY_BATCH):
            part = rows[s:s + QUERY_BATCH]
            sims, ids = index.search(queries[part], k)
            hit = (sims >= low) & (ids >= 0)
            r, c = np.nonzero(hit)
            qs.append(part[r])
            bs.append(ids[r, c].astype(np.int64))
            if k < n:
                # The k-th neighbour still passes: the list may be cut short, ask again with more.
                again.append(part[hit[:, -1]])
        rows = np.concatenate(again) if again else np.empty(0, np.int64)
        k *= 4
    return np.concatenate(qs), np.concatenate(bs)
