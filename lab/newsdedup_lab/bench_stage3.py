"""Stage 3 alone at scale, beside a plain banded MinHash LSH in Spark on the same features.

`newsdedup bench --stage3-only` on this 2-core machine: the full cascade at 1M
documents does not fit the time a run can take here, so the per-document
features (prepare's Python pass: seed SimHash, simhash_w, MinHash bands) are
computed once per corpus and written to Parquet (`prepared.parquet` beside the
corpus); every later run times only stage 3 on them.

Per size it reports stage-3 seconds, candidate pairs per document (Manku tables
and MinHash bands), verified edges, links, pairwise precision / recall / F1
against the synthetic truth, and the growth exponent of stage-3 seconds between
sizes. The baseline, on the same prepared rows: the same b x r MinHash bands,
candidates verified by exact Jaccard >= 0.7 only (text-dedup / datatrove style,
no tables, no number/name evidence), clustered with the same components code.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:
    from newsdedup.config import Config


@dataclass
class Stage3Size:
    n: int
    prepare_seconds: float | None
    stage3_seconds: float
    counts: dict[str, int]
    quality: dict[str, float]
    baseline_seconds: float
    baseline_quality: dict[str, float]
    notes: list[str] = field(default_factory=list)


def prepared(spark, conf: "Config", n: int, seed: int, root: Path) -> tuple[Path, float | None]:
    """(path of the prepared features of the n-document corpus, seconds spent writing them now or None)."""
    from newsdedup import prepare
    from newsdedup.io.input import conform, read_input, split_invalid
    from .bench import corpus

    out = root / f"corpus_{n}_s{seed}" / "prepared.parquet"
    if (out / "_SUCCESS").exists():
        return out, None
    raw = read_input(spark, str(corpus(n, seed, root)))
    valid, _ = split_invalid(conform(raw, conf.input.naive_timezone))
    t0 = time.perf_counter()
    prepare.fingerprint(valid, conf).where("prepare_error IS NULL").write.mode("overwrite").parquet(str(out))
    return out, time.perf_counter() - t0


def quality(spark, links, truth_path: Path) -> dict[str, float]:
    import pandas as pd

    from .evaluate import pair_metrics

    truth = pd.read_parquet(truth_path, columns=["id", "cluster_id"])
    rows = links.select("duplicate_id", "canonical_id", "stage").toPandas()
    stages, _ = pair_metrics(dict(zip(truth["id"].astype(int), truth["cluster_id"].astype(int))),
                             rows.itertuples(index=False, name=None))
    overall = stages[-1]
    return {"precision": overall["precision"], "recall": overall["recall_cumulative"],
            "f1": overall["f1_cumulative"], "links": float(overall["links"])}


def minhash_baseline(ctx, docs, jaccard: float = 0.7):
    """Plain banded MinHash LSH: candidates from shared bands only (no SimHash gate: a plain LSH has
    none), exact Jaccard >= jaccard."""
    from dataclasses import replace

    from pyspark.sql import functions as F

    from newsdedup.clustering import cut_lineage, links_from_edges, order_key
    from newsdedup.stages.simhash.candidates import MINHASH, candidate_pairs
    from newsdedup.stages.simhash.verify import pair_features, similarity

    sim_conf = ctx.conf.simhash
    ungated = replace(sim_conf, languages={name: replace(spec, minhash_max_hamming=64)
                                           for name, spec in sim_conf.languages.items()})
    pairs, _ = candidate_pairs(docs, ungated, found_by=(MINHASH,))
    pairs = cut_lineage(pairs)
    ids = pairs.select(F.col("a").alias("id")).unionByName(pairs.select(F.col("b").alias("id"))).distinct()
    feats = cut_lineage(pair_features(ctx.archive, ids, ctx.conf))
    edges = cut_lineage(similarity(pairs, feats, "a", "b").where(F.col("jaccard") >= jaccard)
                        .select("a", "b", F.col("jaccard").alias("score")))
    vertices = docs.select("id", order_key().alias("key"))
    return links_from_edges(edges, vertices, "minhash", ctx.conf.simhash.max_iterations)


def bench_stage3_size(spark, conf: "Config", n: int, seed: int, root: Path) -> Stage3Size:
    from newsdedup.stages import StageContext
    from newsdedup.stages.simhash import SimhashStage

    path, prep_s = prepared(spark, conf, n, seed, root)
    docs = spark.read.parquet(str(path))
    ctx = StageContext(spark=spark, conf=conf, run_id=f"bench3-{n}", archive=docs)
    t0 = time.perf_counter()
    result = SimhashStage().run(ctx, docs)
    links = result.links.cache()
    links.count()
    stage3_s = time.perf_counter() - t0
    truth = root / f"corpus_{n}_s{seed}" / "truth.parquet"
    q = quality(spark, links, truth)
    t0 = time.perf_counter()
    base = minhash_baseline(ctx, docs).cache()
    base.count()
    base_s = time.perf_counter() - t0
    return Stage3Size(n, prep_s, stage3_s, dict(result.counts), q, base_s, quality(spark, base, truth),
                      list(result.notes))


def growth(prev: Stage3Size | None, cur: Stage3Size) -> float:
    if prev is None or prev.stage3_seconds <= 0:
        return float("nan")
    return math.log(cur.stage3_seconds / prev.stage3_seconds) / math.log(cur.n / prev.n)


def run(spark, conf: "Config", sizes: Sequence[int], seed: int, root: str | Path,
        on_progress: Callable[[list[Stage3Size]], None] | None = None,
        log: Callable[[str], None] = print) -> list[Stage3Size]:
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    out: list[Stage3Size] = []
    for n in sizes:
        log(f"[bench stage3] n={n}")
        out.append(bench_stage3_size(spark, conf, n, seed, root))
        log(f"[bench stage3] n={n}: {out[-1]}")
        if on_progress:
            on_progress(out)
    return out


def _f(v: Any, d: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:,.{d}f}" if isinstance(v, float) else f"{v:,}"


def markdown(results: Sequence[Stage3Size], command: str, machine: str) -> str:
    head = ["docs", "features s (once)", "stage 3 s", "growth", "cand/doc tables", "cand/doc minhash",
            "edges", "split docs", "P", "R", "F1", "MinHash LSH s", "LSH P", "LSH R", "LSH F1"]
    rows, prev = [], None
    for r in results:
        c = r.counts
        docs = max(1, c.get("simhash.documents", r.n))
        rows.append([f"{r.n:,}", _f(r.prepare_seconds, 0), _f(r.stage3_seconds, 1), _f(growth(prev, r), 2),
                     _f(2 * c.get("simhash.candidates.tables", 0) / docs, 3),
                     _f(2 * c.get("simhash.candidates.minhash", 0) / docs, 3), _f(c.get("simhash.edges")),
                     _f(c.get("simhash.split_documents")), _f(r.quality["precision"]), _f(r.quality["recall"]),
                     _f(r.quality["f1"]), _f(r.baseline_seconds, 1), _f(r.baseline_quality["precision"]),
                     _f(r.baseline_quality["recall"]), _f(r.baseline_quality["f1"])])
        prev = r
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" for _ in head) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    notes = [f"- n={r.n:,}: {note}" for r in results for note in r.notes]
    return "\n".join([
        "# Stage 3 benchmark (generated by `newsdedup bench --stage3-only`)", "",
        f"Machine: {machine}. Reproduce with:", "", "```", command, "```", "",
        "Stage 3 alone on precomputed features (see lab/newsdedup_lab/bench_stage3.py); P/R/F1 are pairwise against the "
        "synthetic truth over stage-3 links only (stages 1-2 did not run, so exact copies count here too). "
        "cand/doc = 2 x candidate pairs / documents with a fingerprint. Baseline: the same MinHash bands, "
        "exact Jaccard >= 0.7, same clustering.", "",
        *lines, "", *notes, ""])
