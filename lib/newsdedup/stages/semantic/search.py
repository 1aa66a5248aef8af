"""Stage 4 candidate search inside 48-hour windows: exact block by block, or an index per bucket.

Time is cut into buckets of window_hours. A pair within the window lies in one
bucket or in two adjacent ones, so bucket k is compared with itself and with
bucket k-1. A bucket is split into blocks of at most block_size documents, and
every (block, block) pair that can hold a pair is one Spark task: a task holds
at most 2 x block_size vectors whatever the bucket's size, so no bucket is ever
skipped. Scores are exact (numpy matrix products), so recall is that of
brute force. Each pair above its language pair's threshold is then checked
against the two documents' facts (evidence.py): the cosine proposes, the
evidence decides.

semantic.search decides how (docs/semantic.md "Search"): exact everywhere (numpy, or torch on
a GPU: the same masks, the products on the device), or for buckets of at least ann_min_bucket
documents an approximate index (ann.py, one Spark task per bucket) that proposes pairs which
are then scored exactly like the exact path's (`candidate_pairs`): the index can miss a pair,
never add one. A bucket's index is queried by its own documents and by those of the buckets
next to it that it is responsible for, so the window rule is the exact path's.
"""

from __future__ import annotations

import importlib.util
import math
from typing import TYPE_CHECKING, Iterator, NamedTuple

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ...errors import UserError
from . import ann
from . import embeddings as emb
from .evidence import Facts, refusal

if TYPE_CHECKING:
    from ...config import AnnConfig, SearchConfig, SemanticConfig, SemanticThresholds

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
                chunk: int = 512, device: str | None = None) -> list[tuple[int, int, float]]:
    """Pairs between side a and side b at or above their language pair's threshold, at most window_s apart.

    When every row is on both sides (a block against itself) each pair is taken
    once. A language pair without a threshold (cross_language None) is never paired.
    Returns (a, b, cosine) with a the earlier document. vecs must be unit length.
    device: None computes with numpy; a torch device ('cuda:0', or 'cpu' to run the
    GPU code on a CPU) computes the products and masks there with torch.
    """
    rows_a, rows_b = np.flatnonzero(in_a), np.flatnonzero(in_b)
    if not len(rows_a) or not len(rows_b):
        return []
    same_block = bool(np.all(in_a & in_b))
    # Integer language codes: comparing object arrays element by element is slower than the dot products.
    names, codes = np.unique(langs.astype(str), return_inverse=True)
    limits = threshold_matrix(names, thresholds)
    hits = (_torch_hits if device is not None else _numpy_hits)(
        vecs, ts, codes, limits, rows_a, rows_b, same_block, window_s, int(chunk), device)
    out: list[tuple[int, int, float]] = []
    for rs, cs, sims in hits:
        for r, c, sim in zip(rs.tolist(), cs.tolist(), sims.tolist()):
            i, j = (r, c) if (ts[r], ids[r]) <= (ts[c], ids[c]) else (c, r)
            out.append((int(ids[i]), int(ids[j]), float(min(1.0, sim))))
    return out


Hits = Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]   # (rows, cols, cosines) of one slice


def _numpy_hits(vecs, ts, codes, limits, rows_a, rows_b, same_block, window_s, chunk, _device) -> Hits:
    vb, tb, lb = vecs[rows_b], ts[rows_b], codes[rows_b]
    for start in range(0, len(rows_a), chunk):
        rows = rows_a[start:start + chunk]
        # A block against itself: columns before this slice were paired with it already.
        first = start if same_block else 0
        cols = rows_b[first:]
        sims = vecs[rows] @ vb[first:].T
        ok = sims >= limits[codes[rows, None], lb[None, first:]]
        ok &= np.abs(ts[rows, None] - tb[None, first:]) <= window_s
        if same_block:
            ok &= rows[:, None] < cols[None, :]
        hr, hc = np.nonzero(ok)
        yield rows[hr], cols[hc], sims[hr, hc]


def _torch_hits(vecs, ts, codes, limits, rows_a, rows_b, same_block, window_s, chunk, device) -> Hits:
    """_numpy_hits with torch on `device`: the same slices, masks and float32 products."""
    import torch

    dev = torch.device(device)
    v = torch.from_numpy(np.ascontiguousarray(vecs, dtype=np.float32)).to(dev)
    t = torch.from_numpy(np.ascontiguousarray(ts, dtype=np.float64)).to(dev)
    code = torch.from_numpy(codes.astype(np.int64)).to(dev)
    lim = torch.from_numpy(limits).to(dev)
    rb = torch.from_numpy(rows_b.astype(np.int64)).to(dev)
    vb, tb, lb = v[rb], t[rb], code[rb]
    with torch.no_grad():
        for start in range(0, len(rows_a), chunk):
            rows_np = rows_a[start:start + chunk]
            rows = torch.from_numpy(rows_np.astype(np.int64)).to(dev)
            first = start if same_block else 0
            sims = v[rows] @ vb[first:].T
            ok = sims >= lim[code[rows][:, None], lb[None, first:]]
            ok &= (t[rows][:, None] - tb[None, first:]).abs() <= window_s
            if same_block:
                ok &= rows[:, None] < rb[None, first:]
            hr, hc = ok.nonzero(as_tuple=True)
            yield (rows_np[hr.cpu().numpy()], rows_b[first:][hc.cpu().numpy()],
                   sims[hr, hc].cpu().numpy())


# ---------------------------------------------------------------- candidates of an index

def candidate_pairs(ids: np.ndarray, ts: np.ndarray, langs: np.ndarray, vecs: np.ndarray, base: np.ndarray,
                    window_s: float, thresholds: "SemanticThresholds", ann_conf: "AnnConfig",
                    threads: int | None = None) -> list[tuple[int, int, float]]:
    """block_pairs' pairs, found through an index over the rows where `base` is set, queried by every row.

    Pairs of two base rows are proposed from both ends (the union is kept); a pair of a
    base row and another row from the other row's end; two rows outside base are never
    paired (their own task pairs them). Each proposed pair is scored again exactly: its
    cosine, its language pair's threshold and the window decide, as in block_pairs.
    """
    rows_b = np.flatnonzero(base)
    if not len(rows_b):
        return []
    names, codes = np.unique(langs.astype(str), return_inverse=True)
    limits = threshold_matrix(names, thresholds)
    finite = limits[np.isfinite(limits)]
    if not finite.size:
        return []
    q, b = ann.candidates(vecs[rows_b], vecs, float(finite.min()) - float(ann_conf.margin), ann_conf, threads)
    b = rows_b[b]
    lo, hi = np.minimum(q, b), np.maximum(q, b)
    keep = lo != hi
    if not keep.any():
        return []
    pairs = np.unique(np.stack([lo[keep], hi[keep]], axis=1), axis=0)
    out: list[tuple[int, int, float]] = []
    for s in range(0, len(pairs), 65536):
        r, c = pairs[s:s + 65536, 0], pairs[s:s + 65536, 1]
        sims = np.einsum("ij,ij->i", vecs[r], vecs[c])
        ok = (sims >= limits[codes[r], codes[c]]) & (np.abs(ts[r] - ts[c]) <= window_s)
        for x, y, sim in zip(r[ok].tolist(), c[ok].tolist(), sims[ok].tolist()):
            i, j = (x, y) if (ts[x], ids[x]) <= (ts[y], ids[y]) else (y, x)
            out.append((int(ids[i]), int(ids[j]), float(min(1.0, sim))))
    return out


# ---------------------------------------------------------------- the block plan

def block_plan(counts: dict[int, int], block_size: int,
               indexed: frozenset[int] = frozenset()) -> list[tuple[int, int, int, bool, bool]]:
    """(task, bucket, block, side_a, side_b) rows: which blocks meet in which task.

    counts: documents per bucket. Bucket k's blocks meet each other (i <= j) and
    every block of bucket k-1; a block against itself is one row on both sides.
    Buckets in `indexed` have an index (ann_rows): none of their pairs is planned here.
    """
    nblocks = {k: max(1, math.ceil(n / block_size)) for k, n in counts.items() if n}
    rows: list[tuple[int, int, int, bool, bool]] = []
    task = 0
    for k in sorted(nblocks):
        if k in indexed:
            continue
        for i in range(nblocks[k]):
            prev = 0 if k - 1 in indexed else nblocks.get(k - 1, 0)
            for other, blocks in ((k, range(i, nblocks[k])), (k - 1, range(prev))):
                for j in blocks:
                    if other == k and i == j:
                        rows.append((task, k, i, True, True))
                    else:
                        rows += [(task, k, i, True, False), (task, other, j, False, True)]
                    task += 1
    return rows


def index_roles(bucket, indexed: frozenset[int]):
    """Spark column: array of (task bucket, base) a document of `bucket` takes part in as an index row.

    An indexed bucket k is the base of its own task, queried by its documents, by those of
    bucket k+1 (always: the pairs across k|k+1 are k's to find) and by those of k-1 when
    k-1 has no index (an unindexed k-1 leaves the pairs across k-1|k to the bucket after it).
    Every pair of adjacent or equal buckets with an index on either side thus lies in one task.
    """
    keys = sorted(indexed)
    if not keys:
        return F.array().cast("array<struct<task:long,base:boolean>>")

    def has(c):
        return c.isin(keys)

    def role(task, base):
        return F.struct(task.cast("long").alias("task"), F.lit(base).alias("base"))

    entries = F.array(F.when(has(bucket), role(bucket, True)),
                      F.when(has(bucket - 1), role(bucket - 1, False)),
                      F.when(has(bucket + 1) & ~has(bucket), role(bucket + 1, False)))
    return F.filter(entries, lambda e: e.isNotNull())


# ---------------------------------------------------------------- choosing the search

class Plan(NamedTuple):
    indexed: frozenset[int]        # buckets searched through an index
    device: str | None             # exact search: None numpy, "gpu" the task's GPU, or a torch device
    notes: list[str]


def gpu_present(spark) -> bool:
    """Whether the executors have a GPU: Spark's GPU resource conf, or a local master on a GPU machine."""
    conf = spark.sparkContext.getConf()
    for key in ("spark.task.resource.gpu.amount", "spark.executor.resource.gpu.amount"):
        try:
            if float(conf.get(key, "0") or 0) > 0:
                return True
        except ValueError:
            pass
    if spark.sparkContext.master.startswith("local") and importlib.util.find_spec("torch") is not None:
        import torch

        return bool(torch.cuda.is_available())
    return False


def choose(counts: dict[int, int], search_conf: "SearchConfig", gpu: bool, have_index: bool) -> Plan:
    """Which buckets get an index and where exact search runs, from semantic.search (see SearchConfig)."""
    mode, dev = search_conf.mode, search_conf.device
    device = None if dev == "cpu" else dev if dev.startswith("cuda") else ("gpu" if gpu else None)
    if mode == "exact" or (mode == "auto" and device is not None):
        return Plan(frozenset(), device, ["semantic: exact search on the GPU (torch)"] if device else [])
    if mode == "ann":
        if not have_index:
            raise UserError("semantic.search.mode=ann needs FAISS, which is not installed "
                            "(pip install 'newsdedup[ann]'), or set semantic.search.mode: auto or exact")
        indexed = frozenset(k for k, n in counts.items() if n)
    else:
        indexed = frozenset(k for k, n in counts.items() if n >= search_conf.ann_min_bucket)
        if indexed and not have_index:
            return Plan(frozenset(), None, [
                f"semantic: {len(indexed)} window bucket(s) of at least semantic.search.ann_min_bucket="
                f"{search_conf.ann_min_bucket} documents searched exactly: FAISS is not installed "
                "(pip install 'newsdedup[ann]')"])
    notes = [f"semantic: {len(indexed)} window bucket(s) searched through a {search_conf.ann.index} index "
             f"(largest {max((counts[k] for k in indexed), default=0)} documents), the rest exactly"] if indexed else []
    return Plan(indexed, None, notes)


def exact_device(planned: str | None) -> str | None:
    """The torch device of an exact task: the GPU Spark gave it, else torch's default CUDA device."""
    if planned != "gpu":
        return planned
    from pyspark import TaskContext

    ctx = TaskContext.get()
    resources = ctx.resources() if ctx is not None else {}
    return f"cuda:{resources['gpu'].addresses[0]}" if "gpu" in resources else "cuda"


def _task_threads() -> int | None:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return max(1, int(ctx.cpus())) if ctx is not None else None


class Edges(NamedTuple):
    edges: DataFrame
    tasks: int
    indexed: int                   # buckets searched through an index
    notes: list[str]


def _edge_frame(pdf: pd.DataFrame, pairs: list[tuple[int, int, float]], rules) -> pd.DataFrame:
    """EDGE_SCHEMA rows for pairs of pdf's documents: the language pair and the evidence's verdict."""
    if not pairs:
        return pd.DataFrame(columns=["a", "b", "score", "lang_pair", "reason"])
    # A document is on both sides of a self-block: its first row carries the same facts.
    rows = pdf.drop_duplicates("id").set_index("id")
    facts = {i: Facts.from_row(f) for i, f in rows["facts"].items()}
    lang = rows["lang"].to_dict()
    return pd.DataFrame([(a, b, s, lang_pair(lang[a], lang[b]), refusal(facts[a], facts[b], rules, lang[a] == lang[b]))
                         for a, b, s in pairs], columns=["a", "b", "score", "lang_pair", "reason"])


def semantic_edges(meta: DataFrame, sem: "SemanticConfig", thresholds: "SemanticThresholds",
                   gpu: bool | None = None) -> Edges:
    """Edges (EDGE_SCHEMA) among documents (id, published_at, lang, model_version, embedding, facts).

    Refuses vectors of more than one model_version. Every pair above its threshold
    within the window is an edge (with an index: every pair it proposes and that passes);
    `reason` says why the evidence (facts, see semantic_evidence) refuses it, null when it
    links. gpu: whether the executors have a GPU (None: gpu_present).
    """
    spark = meta.sparkSession
    versions = [r[0] for r in meta.select("model_version").distinct().limit(5).collect()]
    if not versions:
        return Edges(spark.createDataFrame([], EDGE_SCHEMA), 0, 0, [])
    emb.require_same_version(versions, "embeddings")
    window_s = int(float(sem.window_hours) * 3600)
    block_size = int(sem.block_size)
    ts = F.col("published_at").cast("long")
    dated = (meta.where(F.col("published_at").isNotNull())
             .select("id", ts.alias("ts"), F.coalesce("lang", F.lit("")).alias("lang"), "embedding", "facts",
                     F.floor(ts / F.lit(window_s)).cast("long").alias("bucket")))
    # One row per 48h bucket of the archive: small enough for the driver.
    counts = {r["bucket"]: r["n"] for r in dated.groupBy("bucket").agg(F.count("*").alias("n")).collect()}
    search_conf = sem.search
    if gpu is None:
        gpu = search_conf.device == "auto" and search_conf.mode != "ann" and gpu_present(spark)
    plan = choose(counts, search_conf, gpu, ann.available())
    chunk, rules, planned, ann_conf = int(sem.pair_chunk), sem.evidence, plan.device, search_conf.ann

    def vectors(pdf: pd.DataFrame) -> np.ndarray:
        return np.stack(pdf["embedding"].to_numpy()).astype(np.float32)

    def score(pdf: pd.DataFrame) -> pd.DataFrame:
        pairs = block_pairs(pdf["id"].to_numpy(), pdf["ts"].to_numpy(dtype=np.float64),
                            pdf["lang"].to_numpy(dtype=object), vectors(pdf),
                            pdf["side_a"].to_numpy(dtype=bool), pdf["side_b"].to_numpy(dtype=bool),
                            window_s, thresholds, chunk, exact_device(planned))
        return _edge_frame(pdf, pairs, rules)

    def score_indexed(pdf: pd.DataFrame) -> pd.DataFrame:
        pairs = candidate_pairs(pdf["id"].to_numpy(), pdf["ts"].to_numpy(dtype=np.float64),
                                pdf["lang"].to_numpy(dtype=object), vectors(pdf), pdf["base"].to_numpy(dtype=bool),
                                window_s, thresholds, ann_conf, _task_threads())
        return _edge_frame(pdf, pairs, rules)

    rows = block_plan(counts, block_size, plan.indexed)
    edges = spark.createDataFrame([], EDGE_SCHEMA)
    if rows:
        plan_df = F.broadcast(spark.createDataFrame(rows, "task long, bucket long, block long, side_a boolean, "
                                                          "side_b boolean"))
        rank = F.row_number().over(Window.partitionBy("bucket").orderBy("id")) - 1
        blocked = dated.withColumn("block", F.floor(rank / F.lit(block_size)).cast("long"))
        tasks = blocked.join(plan_df, ["bucket", "block"]).drop("bucket", "block")
        edges = tasks.groupBy("task").applyInPandas(score, EDGE_SCHEMA)
    if plan.indexed:
        roles = (dated.select("*", F.explode(index_roles(F.col("bucket"), plan.indexed)).alias("role"))
                 .select("id", "ts", "lang", "embedding", "facts", F.col("role.task").alias("task"),
                         F.col("role.base").alias("base")))
        edges = edges.unionByName(roles.groupBy("task").applyInPandas(score_indexed, EDGE_SCHEMA))
    return Edges(edges, len({row[0] for row in rows}) + len(plan.indexed), len(plan.indexed), plan.notes)
