"""Throughput and memory of the cascade on synthetic corpora, against three baselines.

For each size: documents per second per stage (prepare, url, content, simhash)
from the job's own stage timings, peak memory of the driver, the JVM and the
Python workers (sampled with psutil), and how the cost grows from one size to
the next. Baselines on the same corpus:

  (a) all-pairs SimHash: a Spark cross join with exact Hamming on a sample,
      extrapolated to n with the measured per-pair rate (O(n^2));
  (b) Spark MLlib MinHashLSH.approxSimilarityJoin over word 3-gram shingles,
      measured (cancelled after a time limit);
  (c) embed everything and cluster: per-document cost of the small
      sentence-transformers model and of pairwise cosine, measured on samples
      and extrapolated (n and n^2).
"""

from __future__ import annotations

import math
import os
import platform
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from newsdedup.stages import STAGE_NAMES as _CASCADE
from .baselines import (EmbedCost, TextCost, allpairs_simhash, documents_text_cost, embed_cost,
                        extrapolate_quadratic, fingerprint_floor_job, minhash_join, pairs, plain_sha256_job)
from .memory import MemorySampler, cpu_seconds, jvm_heap_peak_mb, reset_jvm_heap_peak, spill_between, spilled_mb

if TYPE_CHECKING:
    from newsdedup.config import Config

# Timed steps of a stage 1-3 run (stage 4 is costed separately, as baseline (c)).
STAGE_NAMES = ("prepare", *_CASCADE[:3])


# --------------------------------------------------------------------------- pure helpers

def docs_per_second(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def growth(prev: tuple[int, float], cur: tuple[int, float]) -> float:
    """Cost exponent between two sizes: 1.0 is linear, 2.0 quadratic."""
    (n0, t0), (n1, t1) = prev, cur
    if t0 <= 0 or t1 <= 0 or n1 == n0:
        return float("nan")
    return math.log(t1 / t0) / math.log(n1 / n0)


def parse_sizes(text: str) -> list[int]:
    sizes = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        if not part:
            continue
        mult = 1
        if part[-1] in "km":
            mult = 1000 if part[-1] == "k" else 1_000_000
            part = part[:-1]
        sizes.append(int(float(part) * mult))
    if not sizes or min(sizes) < 1:
        raise ValueError("--sizes needs positive integers, e.g. 10000,100000")
    return sorted(sizes)


def with_time_limit(spark, seconds: float, fn: Callable[[], Any]) -> tuple[Any, float, bool]:
    """Run fn's Spark jobs in a job group cancelled after `seconds`; (result, elapsed, finished)."""
    sc = spark.sparkContext
    group = f"bench-{time.time_ns()}"
    sc.setJobGroup(group, "benchmark baseline", interruptOnCancel=True)
    timer = threading.Timer(seconds, lambda: sc.cancelJobGroup(group))
    timer.start()
    t0 = time.perf_counter()
    try:
        return fn(), time.perf_counter() - t0, True
    except Exception as exc:  # cancelled (or failed): report the time it ran
        if "cancel" not in str(exc).lower():
            raise
        return None, time.perf_counter() - t0, False
    finally:
        timer.cancel()
        sc.setLocalProperty("spark.jobGroup.id", None)


# --------------------------------------------------------------------------- the run

@dataclass
class SizeResult:
    n: int
    seconds: dict[str, float]
    counts: dict[str, int]
    memory: dict[str, float]
    minhash_seconds: float | None = None
    minhash_finished: bool = False
    minhash_pairs: int | None = None
    notes: list[str] = field(default_factory=list)
    e2e_seconds: float = float("nan")        # job.run, stages 1-3: read, keys, stages, Delta write
    plain_seconds: float = float("nan")      # baseline (d), same snapshot, same session
    plain_memory: dict[str, float] = field(default_factory=dict)
    floor_seconds: float = float("nan")      # baseline (e), same snapshot, same session
    text_cost: TextCost | None = None

    @property
    def ratio(self) -> float:
        return self.e2e_seconds / self.plain_seconds if self.plain_seconds > 0 else float("nan")

    @property
    def floor_ratio(self) -> float:
        return self.floor_seconds / self.plain_seconds if self.plain_seconds > 0 else float("nan")

    @property
    def cascade_seconds(self) -> float:
        return sum(self.seconds.get(s, 0.0) for s in STAGE_NAMES)


def corpus(n: int, seed: int, root: Path) -> Path:
    """The synthetic corpus of n documents, generated once and reused."""
    from . import synth

    d = root / f"corpus_{n}_s{seed}"
    if not (d / "docs.parquet").exists() or not (d / "_complete").exists():
        synth.write(n, d, seed=seed, workers=max(1, (os.cpu_count() or 1)))
        (d / "_complete").write_text("ok")
    return d / "docs.parquet"


def _measured(spark, fn: Callable[[], Any]) -> tuple[Any, float, dict[str, float]]:
    """fn's result, wall seconds and peak memory (RSS of driver, JVM, Python workers; JVM heap)."""
    reset_jvm_heap_peak(spark)
    spilled = spilled_mb(spark)
    cpu0 = cpu_seconds()
    with MemorySampler() as mem:
        t0 = time.perf_counter()
        out = fn()
        secs = time.perf_counter() - t0
    memory = dict(mem.peak)
    memory["cpu_s"] = cpu_seconds() - cpu0
    memory["jvm_heap_mb"] = jvm_heap_peak_mb(spark) or float("nan")
    memory.update(spill_between(spilled, spilled_mb(spark)))
    return out, secs, memory


def end_to_end(spark, conf: "Config", path: Path, work: Path, run_id: str):
    """Stages 1-3 as the job runs them (read, keys, stages, Delta write; no Postgres); the Report."""
    from newsdedup import job

    conf = conf.with_overrides({"semantic": {"enabled": False}})
    return job.run(spark, str(path), str(work / "out"), conf, load_pg=False, run_id=run_id)


def bench_size(spark, conf: "Config", n: int, seed: int, root: Path,
               minhash_limit_s: float, text_cost: bool = True, job_only: bool = False) -> tuple[SizeResult, Any]:
    """Baseline (d) and the stage 1-3 job on the same snapshot, one after the other, then the rest.
    job_only: the job alone (a size where (d) and (e) would add an hour, e.g. 10M on 2 cores)."""

    from pyspark.sql import functions as F

    from newsdedup.io import store
    from newsdedup.io.input import read_input

    path = corpus(n, seed, root)
    work = root / f"runs_{n}"
    shutil.rmtree(work, ignore_errors=True)
    plain_s, plain_mem, floor_s = float("nan"), {}, float("nan")
    if not job_only:
        _, plain_s, plain_mem = _measured(spark, lambda: plain_sha256_job(spark, str(path), str(work / "plain")))
    report, e2e_s, memory = _measured(spark, lambda: end_to_end(spark, conf, path, work, f"bench-{n}"))
    if not job_only:
        # After the job, so that the job's Python workers start as they would without (e).
        _, floor_s = fingerprint_floor_job(spark, str(path), conf)
    res = SizeResult(n=n, seconds=dict(report.seconds), counts=dict(report.counts), memory=memory,
                     e2e_seconds=e2e_s, plain_seconds=plain_s, plain_memory=plain_mem, floor_seconds=floor_s)
    documents = store.table_path(work / "out", "documents")
    if text_cost:
        res.text_cost = documents_text_cost(spark, documents, work / "text_cost")
    fps = (spark.read.format("delta").load(documents).select("id", "lang", "simhash")
           .where(F.col("simhash").isNotNull()))
    if minhash_limit_s > 0:
        raw = read_input(spark, str(path))
        pairs_found, secs, done = with_time_limit(spark, minhash_limit_s, lambda: minhash_join(spark, raw))
        res.minhash_seconds, res.minhash_finished, res.minhash_pairs = secs, done, pairs_found
    return res, fps


@dataclass
class Bench:
    sizes: list[SizeResult]
    allpairs_n: int
    allpairs_seconds: float
    embed: EmbedCost | None
    command: str
    machine: str
    notes: list[str] = field(default_factory=list)


def baselines(spark, conf: "Config", fps, texts: Sequence[str], allpairs_n: int,
              seed: int) -> tuple[int, float, EmbedCost | None]:
    """Measure the size-independent rates: all-pairs Hamming per pair, embedding per document."""
    from pyspark.sql import functions as F

    m, ap_secs = 0, float("nan")
    if allpairs_n > 0:
        sample = fps.orderBy(F.rand(seed)).limit(allpairs_n).cache()
        m = sample.count()
        _, ap_secs = allpairs_simhash(spark, sample, conf)
        sample.unpersist()
    return m, ap_secs, (embed_cost(texts) if texts else None)


def run_bench(spark, conf: "Config", sizes: Sequence[int], *, seed: int = 7,
              root: str | Path = "out/bench", allpairs_n: int = 4000, embed_sample: int = 256,
              minhash_limit_s: float = 900.0, command: str = "", warmup: int = 300,
              text_cost: bool = True, job_only: bool = False, log: Callable[[str], None] = print,
              on_progress: Callable[[Bench], None] | None = None) -> Bench:
    """Bench every size in order; baselines are measured once, on the first size's corpus.
    on_progress gets the partial result after each size (so a long run leaves a report behind)."""
    from newsdedup.io.input import read_input

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Spark master {spark.sparkContext.master}"
    bench = Bench([], 0, float("nan"), None, command, machine)
    if warmup:
        # Start the JVM's JIT and the Python workers on a throwaway corpus, so that the first
        # measured size does not carry the start-up cost alone.
        small = corpus(warmup, seed + 1, root)
        shutil.rmtree(root / "warmup", ignore_errors=True)   # a run id may finish only once per output
        plain_sha256_job(spark, str(small), str(root / "warmup" / "plain"))
        fingerprint_floor_job(spark, str(small), conf)
        end_to_end(spark, conf, small, root / "warmup", "warmup")
        bench.notes.append(f"a {warmup}-document warm-up run preceded the measurements")
    for n in sizes:
        log(f"[bench] n={n}: generating / running cascade")
        res, fps = bench_size(spark, conf, n, seed, root, minhash_limit_s, text_cost, job_only)
        log(f"[bench] n={n}: plain {res.plain_seconds:.1f}s, fingerprint floor {res.floor_seconds:.1f}s, "
            f"stages 1-3 {res.e2e_seconds:.1f}s (ratio {res.ratio:.2f}); {res.seconds} memory={res.memory} "
            f"plain memory={res.plain_memory} text={res.text_cost} minhash={res.minhash_seconds} "
            f"finished={res.minhash_finished}")
        bench.sizes.append(res)
        if not bench.allpairs_n:
            raw = read_input(spark, str(corpus(n, seed, root)))
            texts = [f"{r['title']}\n{r['body']}" for r in raw.select("title", "body").limit(embed_sample).collect()]
            bench.allpairs_n, bench.allpairs_seconds, bench.embed = baselines(
                spark, conf, fps, texts if embed_sample > 0 else [], allpairs_n, seed)
            log(f"[bench] all-pairs simhash on {bench.allpairs_n}: {bench.allpairs_seconds:.2f}s; embed: {bench.embed}")
        if on_progress:
            on_progress(bench)
    return bench


# --------------------------------------------------------------------------- report

def _num(v: float | None, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if v >= 1e6:
        return f"{v:.3g}"
    return f"{v:,.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def throughput_table(b: Bench) -> str:
    rows = []
    prev = None
    for r in b.sizes:
        cells = [f"{r.n:,}"] + [_num(docs_per_second(r.n, r.seconds.get(s, 0.0)), 0) for s in STAGE_NAMES]
        cells += [_num(r.cascade_seconds), _num(docs_per_second(r.n, r.cascade_seconds), 0),
                  _num(growth(prev, (r.n, r.cascade_seconds)), 2) if prev else "-"]
        rows.append(cells)
        prev = (r.n, r.cascade_seconds)
    return _table(["docs", "prepare docs/s", "url docs/s", "content docs/s", "simhash docs/s",
                   "cascade s", "cascade docs/s", "growth exponent"], rows)


def executor_mb(memory: dict[str, float]) -> float:
    """Local mode: the executor is the JVM plus its Python workers."""
    return memory.get("jvm_mb", float("nan")) + memory.get("workers_mb", float("nan"))


def memory_table(b: Bench) -> str:
    rows = [[f"{r.n:,}", _num(r.memory["driver_mb"], 0), _num(r.memory["jvm_mb"], 0),
             _num(r.memory.get("jvm_heap_mb"), 0), _num(r.memory["workers_mb"], 0), _num(executor_mb(r.memory), 0),
             _num(r.memory["total_mb"], 0)]
            for r in b.sizes]
    return _table(["docs", "driver RSS MB", "JVM RSS MB", "JVM heap used MB", "Python workers RSS MB",
                   "executor (JVM + workers) MB", "total RSS MB"], rows)


def candidates_per_document(counts: dict[str, int]) -> float:
    """Stage 3's candidate pairs per document it fingerprinted, from the run's own counter."""
    per_thousand = counts.get("simhash.candidates_per_doc_x1000")
    return per_thousand / 1000 if per_thousand is not None else float("nan")


def e2e_table(b: Bench) -> str:
    rows = [[f"{r.n:,}", _num(r.plain_seconds), _num(r.e2e_seconds), _num(r.ratio, 2),
             _num(r.floor_seconds), _num(r.floor_ratio, 2),
             _num(docs_per_second(r.n, r.e2e_seconds), 0), _num(executor_mb(r.plain_memory), 0),
             _num(executor_mb(r.memory), 0), _num(r.memory.get("spill_memory_mb"), 0),
             _num(r.memory.get("spill_disk_mb"), 0), _num(r.memory.get("shuffle_write_mb"), 0),
             _num(candidates_per_document(r.counts), 3), _num(r.memory.get("cpu_s"), 0)]
            for r in b.sizes]
    return _table(["docs", "(d) plain job s", "stages 1-3 job s", "ratio (stages 1-3 / (d))",
                   "(e) fingerprint floor s", "(e) / (d)", "job docs/s",
                   "(d) peak executor MB", "job peak executor MB", "job spill (memory) MB",
                   "job spill (disk) MB", "job shuffle written MB", "stage 3 candidate pairs per doc",
                   "job CPU s (JVM + workers)"], rows)


def text_cost_table(b: Bench) -> str:
    rows = []
    for r in b.sizes:
        t = r.text_cost
        if t is None:
            continue
        mb = 1024 * 1024
        rows.append([f"{r.n:,}", _num(t.with_text_bytes / mb), _num(t.without_text_bytes / mb),
                     _num(t.with_text_seconds), _num(t.without_text_seconds),
                     _num(t.with_text_seconds - t.without_text_seconds)])
    return _table(["docs", "documents with title/body MB", "without MB", "write s with", "write s without",
                   "text costs s"], rows)


def baseline_table(b: Bench) -> str:
    rows = []
    for r in b.sizes:
        stage3 = r.seconds.get("simhash", float("nan"))
        ap = extrapolate_quadratic(b.allpairs_seconds, b.allpairs_n, r.n)
        if r.minhash_seconds is None:
            mh = "not run"
            mh_ratio = "n/a"
        else:
            mh = _num(r.minhash_seconds) + ("" if r.minhash_finished else " (cancelled, lower bound)")
            mh_ratio = ("" if r.minhash_finished else ">") + _num(r.minhash_seconds / r.cascade_seconds, 2)
        if b.embed:
            emb = b.embed.embed(r.n) + b.embed.cluster(r.n)
            emb_cells = [_num(b.embed.embed(r.n)), _num(b.embed.cluster(r.n)), _num(emb / r.cascade_seconds, 1)]
        else:
            emb_cells = ["n/a"] * 3
        rows.append([f"{r.n:,}", _num(stage3), _num(r.cascade_seconds), _num(ap), _num(ap / stage3, 1), mh,
                     mh_ratio, *emb_cells])
    return _table(["docs", "stage 3 s", "cascade s", "(a) all-pairs SimHash s*", "(a) / stage 3",
                   "(b) MinHashLSH s", "(b) / cascade", "(c) embed s*", "(c) cosine all-pairs s*",
                   "(c) / cascade"], rows)


def markdown(b: Bench) -> str:
    emb = b.embed
    parts = [
        "# Benchmarks",
        "",
        "Generated by `newsdedup bench`; do not edit by hand. Reproduce with:",
        "",
        "```",
        b.command,
        "```",
        "",
        f"Machine: {b.machine}. Corpus: `newsdedup.synth` (seeded), the same corpus for the cascade and "
        "the baselines. Stage seconds are the job's own timings (`job.run` with stages 1-3, Delta written, "
        "no Postgres; prepare = read + keys); docs/s = documents in the corpus / stage seconds.",
        "",
        "## Stages 1-3 end to end against a plain Spark job",
        "",
        e2e_table(b),
        "",
        "(d) reads the snapshot, sha256-hashes the raw URL and title+body, groups both (canonical = earliest, "
        "then lowest id) and writes (id, hashes, canonicals) to Delta; the job reads the same snapshot, "
        "computes every key, runs stages 1-3 and writes documents, duplicate_links, quarantine and runs. "
        "(e) reads the same snapshot and runs only stage 3's compiled fingerprint pass (seed SimHash, "
        "shingle set, its SimHash, MinHash bands; `SimhashKeys.batch`) on the raw title + body, noop sink: "
        "a floor under any job that computes these fingerprints, whatever else it does. "
        "All three run in the same session, one after the other, per size. Peak executor memory: RSS of the "
        "JVM plus the Python workers (local mode: one executor), sampled every 0.25 s.",
        "",
        "## Storing title and body in the documents table",
        "",
        text_cost_table(b),
        "",
        "The documents table of the run, rewritten once as it is and once without title/body.",
        "",
        "## Cascade throughput",
        "",
        throughput_table(b),
        "",
        "Growth exponent: log(t2/t1) / log(n2/n1) of the cascade seconds between consecutive sizes "
        "(1 = linear, 2 = quadratic).",
        "",
        "## Peak memory (sampled every 0.25 s with psutil during the cascade)",
        "",
        memory_table(b),
        "",
        "## Baselines on the same corpus",
        "",
        baseline_table(b),
        "",
        f"\\* extrapolated, not run at that size: (a) exact Hamming over a Spark cross join measured on "
        f"{b.allpairs_n:,} documents ({pairs(b.allpairs_n):,} pairs in {b.allpairs_seconds:.2f} s), scaled "
        "by the number of pairs n(n-1)/2.",
    ]
    if emb:
        parts.append(
            f"(c) all-MiniLM-L6-v2 on CPU embedded {emb.sample} documents in {emb.embed_seconds:.2f} s "
            f"({emb.sample / emb.embed_seconds:.1f} docs/s), scaled linearly; all-pairs cosine (dense matrix "
            f"products + threshold) on {emb.cosine_n:,} vectors took {emb.cosine_seconds:.2f} s, scaled by n^2. "
            "Clustering on top of the similarity graph is not counted, so (c) is a lower bound.")
    parts.append("(b) is measured at every size (word 3-gram shingles, 2^18 hashed features, 4 hash tables, "
                 "Jaccard distance < 0.5); a run over the time limit is cancelled and its elapsed time is a lower "
                 "bound.")
    parts += [f"Note: {n}" for n in b.notes]
    parts.append("Stage 4 is not part of this bench; its search is benched by `python -m newsdedup_lab.bench_semantic` "
                 "(docs/benchmarks_semantic.md).")
    for r in b.sizes:
        parts += [f"Note (n={r.n:,}): {n}" for n in r.notes]
    return "\n".join(parts) + "\n"
