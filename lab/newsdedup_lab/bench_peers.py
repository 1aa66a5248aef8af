"""Stages 1-3 beside two MinHash deduplicators, same corpus, same machine, one process.

Peers:

  datatrove  HuggingFace datatrove's MinHash pipeline (MinhashDedupSignature, -Buckets,
             -Cluster, -Filter) on its LocalPipelineExecutor, default MinhashConfig, one
             pipeline per language because its word tokenizer is chosen per step
             (English: spaCy, Bangla: IndicNLP).
  spark_lsh  A Spark MinHash LSH written after text-dedup's minhash_spark.py (shingles of
             \\W-split lower-cased words, 32-bit sha1 per shingle, universal hashing mod
             2^32-5, bands from datasketch's optimal_param, group by band, edges to the
             smallest id, connected components by alternating large-star / small-star).

MLlib's MinHashLSH (baselines.minhash_join) is not run here: `newsdedup bench` measured it
at ~4x the whole cascade at 10k documents and unfinished after 600 s at 100k
(docs/benchmarks.md), so it is not the fastest peer.

Every system is timed wall-clock from reading its input to writing its deduplicated output;
the link set each produces is scored by the functions `newsdedup eval` uses
(evaluate.pair_metrics / per_language, eval_kinds.must_not_link_pairs).

Run:  python -m newsdedup_lab.bench_peers --sizes 200k --realtext /work/eq/clir_rt \
          --work /tmp/peers --out docs/benchmarks-peers.md
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import platform
import re
import shutil
import struct
import sys
import time
from dataclasses import dataclass, field
from itertools import tee
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from newsdedup.config import Config

SYSTEMS = ("newsdedup", "datatrove", "spark_lsh")


# --------------------------------------------------------------------------- shared helpers

def load() -> str:
    """The 1/5/15-minute load averages, as `uptime` prints them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def links_frame(dup: Sequence[int], canon: Sequence[int], stage: str) -> pd.DataFrame:
    return pd.DataFrame({"duplicate_id": np.asarray(dup, dtype=np.int64),
                         "canonical_id": np.asarray(canon, dtype=np.int64), "stage": stage})


def cluster_links(ids: Sequence[int], cluster: Sequence[Any], keep: Sequence[int] | None = None,
                  stage: str = "peer") -> pd.DataFrame:
    """Links from every member of a cluster to its kept document (the lowest id when keep is None)."""
    df = pd.DataFrame({"id": np.asarray(ids, dtype=np.int64), "c": list(cluster)})
    if keep is None:
        df["k"] = df.groupby("c")["id"].transform("min")
    else:
        df["k"] = df["c"].map(dict(zip(list(cluster), keep)))
    df = df[df["id"] != df["k"]]
    return links_frame(df["id"], df["k"], stage)


def score(links: pd.DataFrame, truth: pd.DataFrame, mnl: pd.DataFrame | None = None) -> dict[str, Any]:
    """Pairwise P/R/F1 overall and per language, exactly as `newsdedup eval` scores a link set
    (clusters closed under the links against the true clusters), plus must-not-link pairs merged."""
    from .eval_kinds import UnionFind, must_not_link_pairs
    from .evaluate import pair_metrics, per_language

    truth_map = dict(zip(truth["id"].astype(int), truth["cluster_id"].astype(int)))
    rows, _ = pair_metrics(truth_map, links.itertuples(index=False, name=None))
    out: dict[str, Any] = {"overall": rows[-1], "languages": {r["lang"]: r for r in per_language(truth, links)}}
    pairs = must_not_link_pairs(truth, mnl)
    uf = UnionFind()
    for d, c in zip(links["duplicate_id"], links["canonical_id"]):
        uf.union(int(d), int(c))
    out["must_not_link"] = len(pairs)
    out["must_not_link_merged"] = int(sum(uf.find(int(a)) == uf.find(int(b)) for a, b in zip(pairs["a"], pairs["b"])))
    return out


@dataclass
class PeerRun:
    system: str
    seconds: float                       # wall clock, read to deduplicated output
    links: pd.DataFrame
    steps: dict[str, float] = field(default_factory=dict)
    prep_seconds: float = 0.0            # input conversion the system needs first (not in seconds)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- newsdedup stages 1-3

def run_newsdedup(spark, conf: "Config", path: str | Path, work: Path, run_id: str) -> PeerRun:
    """job.run with stages 1-3 (semantic off, no Postgres), read to Delta; its duplicate_links."""
    from newsdedup.io import store

    from .bench import end_to_end

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    t0 = time.perf_counter()
    report = end_to_end(spark, conf, Path(path), work, run_id)
    secs = time.perf_counter() - t0
    links = (spark.read.format("delta").load(store.table_path(work / "out", "duplicate_links"))
             .select("duplicate_id", "canonical_id", "stage").toPandas())
    return PeerRun("newsdedup", secs, links, steps=dict(report.seconds))


# --------------------------------------------------------------------------- datatrove

# datatrove's tokenizer table maps the bare code "ben" to the Latin-script (Stanza) row, because
# its csv's "FALSE" strings read as true; "ben_Beng" is the Bengali-script IndicNLP tokenizer.
DATATROVE_LANGUAGES = {"bn": "ben_Beng", "en": "eng"}


def datatrove_input(path: str | Path, dest: Path, parts: int = 2) -> dict[str, Path]:
    """The corpus as datatrove reads it: per language, `parts` Parquet files of (id, text) with
    text = title + newline + body. Its readers shard by file, so one file per task."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    shutil.rmtree(dest, ignore_errors=True)
    table = pq.read_table(path, columns=["id", "title", "body", "lang"])
    text = pc.binary_join_element_wise(pc.fill_null(table["title"], ""), pc.fill_null(table["body"], ""), "\n")
    lang = pc.fill_null(table["lang"], "en")
    out: dict[str, Path] = {}
    for code in pc.unique(lang).to_pylist():
        mask = pc.equal(lang, code)
        sub = pa.table({"id": pc.cast(pc.filter(table["id"], mask), pa.string()), "text": pc.filter(text, mask)})
        folder = dest / code
        folder.mkdir(parents=True)
        step = math.ceil(len(sub) / parts)
        for k in range(parts):
            pq.write_table(sub.slice(k * step, step), folder / f"{k:05d}.parquet")
        out[code] = folder
    return out


def datatrove_config(**overrides):
    from datatrove.pipeline.dedup.minhash import MinhashConfig

    return MinhashConfig(**overrides)


def run_datatrove(path: str | Path, work: Path, tasks: int = 2, workers: int = 2, config=None) -> PeerRun:
    """datatrove's 4-stage MinHash pipeline (examples/minhash_deduplication.py) per language.

    Signatures and filter: `tasks` tasks over `tasks` files; buckets: one task per bucket;
    cluster: one task (datatrove requires it). The filter writes kept and removed documents
    with their `minhash_cluster_id`; a removed document is linked to the kept one of its cluster.
    """
    import pyarrow.parquet as pq
    from datatrove.executor.local import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter,
                                                  MinhashDedupSignature)
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.writers import ParquetWriter

    config = config or datatrove_config()
    shutil.rmtree(work, ignore_errors=True)
    t0 = time.perf_counter()
    inputs = datatrove_input(path, work / "input", parts=tasks)
    prep = time.perf_counter() - t0
    steps: dict[str, float] = {"signatures": 0.0, "buckets": 0.0, "cluster": 0.0, "filter": 0.0}
    frames = []
    t_all = time.perf_counter()
    for code, folder in sorted(inputs.items()):
        base = work / code
        language = DATATROVE_LANGUAGES.get(code, "eng")

        def reader():
            return ParquetReader(str(folder), glob_pattern="*.parquet")

        stages = [
            ("signatures", [reader(), MinhashDedupSignature(output_folder=str(base / "signatures"), config=config,
                                                            language=language)], tasks, workers),
            ("buckets", [MinhashDedupBuckets(input_folder=str(base / "signatures"), output_folder=str(base / "buckets"),
                                             config=config)], config.num_buckets, workers),
            ("cluster", [MinhashDedupCluster(input_folder=str(base / "buckets"), output_folder=str(base / "remove_ids"),
                                             config=config, save_cluster_id=True)], 1, 1),
            ("filter", [reader(), MinhashDedupFilter(input_folder=str(base / "remove_ids"), load_cluster_ids=True,
                                                     exclusion_writer=ParquetWriter(str(base / "removed"),
                                                                                    expand_metadata=True)),
                        ParquetWriter(str(base / "kept"), expand_metadata=True)], tasks, workers),
        ]
        for name, pipeline, n_tasks, n_workers in stages:
            t = time.perf_counter()
            LocalPipelineExecutor(pipeline=pipeline, tasks=n_tasks, workers=n_workers,
                                  logging_dir=str(base / "logs" / name)).run()
            steps[name] += time.perf_counter() - t
        for kind in ("kept", "removed"):
            files = sorted((base / kind).glob("*.parquet"))
            if files:
                t = pq.read_table(files, columns=["id", "minhash_cluster_id"]).to_pandas()
                t["kept"] = kind == "kept"
                frames.append(t.assign(code=code))
    secs = time.perf_counter() - t_all
    docs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["id", "minhash_cluster_id", "kept", "code"])
    docs = docs[docs["minhash_cluster_id"] >= 0].copy()
    docs["id"] = docs["id"].astype(np.int64)
    docs["cluster"] = docs["code"] + ":" + docs["minhash_cluster_id"].astype(str)
    kept = docs[docs["kept"]].drop_duplicates("cluster").set_index("cluster")["id"]
    dup = docs[~docs["kept"]]
    links = links_frame(dup["id"], dup["cluster"].map(kept).fillna(-1), "datatrove")
    if (links["canonical_id"] < 0).any():
        raise RuntimeError("datatrove: a removed document's cluster has no kept document")
    return PeerRun("datatrove", secs, links, steps=steps, prep_seconds=prep,
                   notes=[f"MinhashConfig: {config}"])


# --------------------------------------------------------------------------- Spark MinHash LSH (text-dedup style)

NON_ALPHA = re.compile(r"\W", re.UNICODE)
MAX_HASH = (1 << 32) - 1
MOD_PRIME = 4_294_967_291   # the largest prime below 2^32


def optimal_param(threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows) minimising the equal-weighted false positive + false negative areas of the
    banding S-curve around threshold (datasketch's rule, which text-dedup uses)."""
    from scipy.integrate import quad

    best, opt = float("inf"), (0, 0)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp, _ = quad(lambda s: 1 - (1 - s ** r) ** b, 0.0, threshold)
            fn, _ = quad(lambda s: (1 - s ** r) ** b, threshold, 1.0)
            if 0.5 * fp + 0.5 * fn < best:
                best, opt = 0.5 * fp + 0.5 * fn, (b, r)
    return opt


def _ngrams(tokens: list[str], n: int, min_length: int):
    if len(tokens) < min_length:
        return []
    if len(tokens) < n:
        return [tuple(tokens)]
    its = tee(tokens, n)
    for i, it in enumerate(its):
        for _ in range(i):
            next(it, None)
    return zip(*its)


def minhash_bands(text: str, a: np.ndarray, b: np.ndarray, bands: int, rows: int, ngram: int,
                  min_length: int) -> list[bytes] | None:
    """text-dedup's per-document signature: a set of lower-cased \\W-split word n-grams, the first
    4 bytes of sha1 of each, (h * a + b) mod p over the permutations, min, cut into bands.
    None for a document with no shingle (text-dedup would give it the all-MAX signature, which
    puts every such document in one cluster)."""
    tokens = {" ".join(t).encode("utf-8") for t in _ngrams(NON_ALPHA.split(text.lower()), ngram, min_length)}
    if not tokens:
        return None
    hv = np.fromiter((struct.unpack("<I", hashlib.sha1(t).digest()[:4])[0] for t in tokens),
                     dtype=np.uint64, count=len(tokens))
    # h, a < 2^32 so h * a + b < 2^64: exact in uint64.
    phv = (hv[:, None] * a[None, :] + b[None, :]) % np.uint64(MOD_PRIME)
    sig = phv.min(axis=0).astype(np.uint32)
    return [sig[i * rows:(i + 1) * rows].byteswap().tobytes() for i in range(bands)]


def _connected_components(edges, max_iterations: int = 20):
    """Alternating large-star / small-star (Kiveris et al. 2014) over an RDD of (node, smaller node)
    edges, as text-dedup runs it: returns (node, component minimum) for every node with an edge."""
    from operator import add

    def large(edges):
        def reduce(kv):
            node, nbrs = kv
            nbrs = set(nbrs)
            m = min(nbrs | {node})
            new = {(n, m) for n in nbrs | {node} if n > node}
            return list(new), len(new - {(node, n) for n in nbrs})

        grouped = edges.flatMap(lambda e: [e] if e[0] == e[1] else [e, (e[1], e[0])]).groupByKey().map(reduce).cache()
        change = grouped.map(lambda x: x[1]).fold(0, add)
        return grouped.flatMap(lambda x: x[0]), change, grouped

    def small(edges):
        def reduce(kv):
            node, nbrs = kv
            nbrs = set(nbrs)
            m = min(nbrs | {node})
            new = {(n, m) for n in nbrs | {node} if n <= node and n != m}
            return list(new), len(new - {(node, n) for n in nbrs})

        grouped = edges.map(lambda e: e if e[1] <= e[0] else (e[1], e[0])).groupByKey().map(reduce).cache()
        change = grouped.map(lambda x: x[1]).fold(0, add)
        return grouped.flatMap(lambda x: x[0]), change, grouped

    prev = (None, None)
    cached = []
    for _ in range(max_iterations):
        edges, lc, g1 = large(edges)
        edges, sc, g2 = small(edges)
        cached += [g1, g2]
        if (lc, sc) == prev or (lc == 0 and sc == 0):
            break
        prev = (lc, sc)
    return edges, cached


def run_spark_lsh(spark, path: str | Path, work: Path, threshold: float = 0.7, ngram: int = 5,
                  min_length: int = 5, num_perm: int = 250, seed: int = 42,
                  bands_rows: tuple[int, int] | None = None) -> PeerRun:
    """text-dedup's MinHash LSH on Spark, over title + newline + body; writes the kept documents
    (singletons and each component's smallest id) as Parquet, like text-dedup."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    bands, rows = bands_rows or optimal_param(threshold, num_perm)
    rng = np.random.RandomState(seed)
    a = rng.randint(1, MOD_PRIME, size=num_perm, dtype=np.uint32).astype(np.uint64)
    b = rng.randint(0, MOD_PRIME, size=num_perm, dtype=np.uint32).astype(np.uint64)

    def signatures(batches):
        for batch in batches:
            ids, band_no, values = [], [], []
            for i, text in zip(batch.column("id").to_pylist(), batch.column("text").to_pylist()):
                sig = minhash_bands(text or "", a, b, bands, rows, ngram, min_length)
                if sig is None:
                    continue
                ids += [i] * bands
                band_no += range(bands)
                values += sig
            yield pa.RecordBatch.from_arrays([pa.array(band_no, pa.int32()), pa.array(values, pa.binary()),
                                              pa.array(ids, pa.int64())], names=["band_idx", "band", "id"])

    shutil.rmtree(work, ignore_errors=True)
    t0 = time.perf_counter()
    df = spark.read.parquet(str(path))
    text = df.select(F.col("id").cast("long").alias("id"),
                     F.concat_ws("\n", F.coalesce("title", F.lit("")), F.coalesce("body", F.lit(""))).alias("text"))
    sigs = text.mapInArrow(signatures, "band_idx int, band binary, id long")
    grouped = (sigs.groupBy("band_idx", "band").agg(F.collect_list("id").alias("ids"))
               .where(F.size("ids") > 1))
    edges = (grouped.select(F.explode("ids").alias("a"), F.array_min("ids").alias("b"))
             .where(F.col("a") != F.col("b")).distinct())
    edge_rdd = edges.rdd.map(lambda r: (r[0], r[1])).cache()
    components, cached = _connected_components(edge_rdd)
    comp = spark.createDataFrame(components.distinct(), "id long, component long").cache()
    comp_pd = comp.toPandas()
    (df.join(comp, "id", "left").where(F.col("component").isNull()).drop("component")
     .write.mode("overwrite").parquet(str(work / "kept")))
    secs = time.perf_counter() - t0
    for c in cached:
        c.unpersist()
    comp.unpersist()
    edge_rdd.unpersist()
    links = links_frame(comp_pd["id"], comp_pd["component"], "spark_lsh")
    return PeerRun("spark_lsh", secs, links,
                   notes=[f"threshold {threshold}, {ngram}-grams, min_length {min_length}, num_perm {num_perm}, "
                          f"{bands} bands x {rows} rows"])


# --------------------------------------------------------------------------- the bench

@dataclass
class Row:
    corpus: str
    n: int
    system: str
    seconds: float
    prep_seconds: float
    links: int
    scores: dict[str, Any] | None
    steps: dict[str, float]
    load_before: str
    load_after: str
    notes: list[str] = field(default_factory=list)

    def per_core(self, cores: int) -> float:
        return self.n / self.seconds / cores if self.seconds > 0 else float("nan")


def bench_corpus(spark, conf: "Config", label: str, path: Path, truth: pd.DataFrame | None, work: Path,
                 mnl: pd.DataFrame | None = None, systems: Sequence[str] = SYSTEMS,
                 datatrove_cfg=None, log: Callable[[str], None] = print) -> list[Row]:
    n = int(truth.shape[0]) if truth is not None else spark.read.parquet(str(path)).count()
    out = []
    for system in systems:
        before = load()
        if system == "newsdedup":
            run = run_newsdedup(spark, conf, path, work / "newsdedup", f"peers-{label}-{time.time_ns()}")
        elif system == "datatrove":
            run = run_datatrove(path, work / "datatrove", config=datatrove_cfg)
        elif system == "spark_lsh":
            run = run_spark_lsh(spark, path, work / "spark_lsh")
        else:
            raise ValueError(f"unknown system {system!r}")
        after = load()
        scores = score(run.links, truth, mnl) if truth is not None else None
        row = Row(label, n, system, run.seconds, run.prep_seconds, len(run.links), scores, run.steps, before, after,
                  run.notes)
        log(f"[peers] {label} {system}: {run.seconds:.1f}s (prep {run.prep_seconds:.1f}s) links={len(run.links)} "
            f"load {before} -> {after} "
            + (f"P/R/F1 {scores['overall']['precision']:.4f}/{scores['overall']['recall_cumulative']:.4f}/"
               f"{scores['overall']['f1_cumulative']:.4f}" if scores else ""))
        out.append(row)
    return out


# --------------------------------------------------------------------------- report

def _f(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:,.{digits}f}"


def throughput_table(rows: Sequence[Row], cores: int) -> str:
    lines = ["| corpus | docs | system | wall s | docs/s/core | newsdedup / system (throughput) | "
             "input prep s (not in wall) | P | R | F1 | load before -> after |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ours = next((x for x in rows if x.corpus == r.corpus and x.system == "newsdedup"), None)
        ratio = ours.per_core(cores) / r.per_core(cores) if ours else float("nan")
        o = (r.scores or {}).get("overall", {})
        lines.append(f"| {r.corpus} | {r.n:,} | {r.system} | {_f(r.seconds, 1)} | {_f(r.per_core(cores), 0)} | "
                     f"{_f(ratio, 2)} | {_f(r.prep_seconds, 1)} | {_f(o.get('precision'), 4)} | "
                     f"{_f(o.get('recall_cumulative'), 4)} | {_f(o.get('f1_cumulative'), 4)} | "
                     f"{r.load_before} -> {r.load_after} |")
    return "\n".join(lines)


def quality_table(rows: Sequence[Row]) -> str:
    lines = ["| corpus | system | lang | links | predicted pairs | true pairs found | P | R | F1 | "
             "must-not-link pairs merged |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if not r.scores:
            continue
        for lang, s in [("all", r.scores["overall"]), *sorted(r.scores["languages"].items())]:
            mnl = f"{r.scores['must_not_link_merged']} of {r.scores['must_not_link']}" if lang == "all" else ""
            lines.append(f"| {r.corpus} | {r.system} | {lang} | {s['links']:,} | {s['pred_pairs']:,} | "
                         f"{s['true_pairs_found']:,} | {_f(s['precision'], 4)} | {_f(s['recall_cumulative'], 4)} | "
                         f"{_f(s['f1_cumulative'], 4)} | {mnl} |")
    return "\n".join(lines)


def steps_table(rows: Sequence[Row]) -> str:
    lines = ["| corpus | system | steps (s) |", "|---|---|---|"]
    for r in rows:
        if r.steps:
            lines.append(f"| {r.corpus} | {r.system} | "
                         + ", ".join(f"{k} {v:.1f}" for k, v in r.steps.items()) + " |")
    return "\n".join(lines)


def markdown(rows: Sequence[Row], command: str, machine: str, cores: int, notes: Sequence[str] = ()) -> str:
    parts = ["# Peers: newsdedup stages 1-3 beside datatrove MinHash and a Spark MinHash LSH", "",
             "Generated by `python -m newsdedup_lab.bench_peers`; rerun with:", "", "```", command, "```", "",
             f"Machine: {machine}. docs/s/core = documents / wall seconds / {cores} cores. All systems ran in one "
             "process, one after the other, on the same files; the machine is shared, so the load averages "
             "(`uptime`) before and after each run are given and the ratios matter more than the seconds.", "",
             "## Throughput and quality", "", throughput_table(rows, cores), "",
             "## Quality per language (scored as `newsdedup eval` scores: pairs of the clusters the links close)",
             "", quality_table(rows), "", "## Steps", "", steps_table(rows), ""]
    configs = sorted({f"- {r.system}: {n}" for r in rows for n in r.notes})
    if configs:
        parts += ["## Configurations", "", *configs, ""]
    parts += [f"Note: {n}" for n in notes]
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------- command line

def _hardlinked_corpus(n: int, seed: int, root: Path, reuse: Sequence[Path]) -> Path:
    """The synthetic corpus of n documents (bench.corpus); hard-links an identical one already
    generated under a `reuse` directory instead of generating it again."""
    from .bench import corpus

    d = root / f"corpus_{n}_s{seed}"
    if not (d / "_complete").exists():
        for r in reuse:
            src = r / f"corpus_{n}_s{seed}"
            if (src / "_complete").exists():
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir(parents=True)
                for name in ("docs.parquet", "truth.parquet", "_complete"):
                    os.link(src / name, d / name)
                break
    return corpus(n, seed, root)


def main(argv: Sequence[str] | None = None) -> int:
    from newsdedup import config as config_mod
    from newsdedup.io.spark import get_spark

    from .bench import parse_sizes

    p = argparse.ArgumentParser(prog="python -m newsdedup_lab.bench_peers", description=__doc__.split("\n")[0])
    p.add_argument("--conf", help="YAML merged over conf/default.yaml (semantic is turned off regardless)")
    p.add_argument("--sizes", default="200k", help="synthetic corpus sizes, e.g. 200k,1m; '' for none")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--realtext", help="a labelled real-text corpus directory (docs, truth, must_not_link .parquet)")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--datatrove-ngrams", type=int, help="a second datatrove run on the real text with this n-gram size")
    p.add_argument("--work", default="out/peers")
    p.add_argument("--reuse", action="append", default=[], help="directories with generated corpora to hard-link")
    p.add_argument("--warmup", type=int, default=1000, help="documents of a throwaway run first (JIT, workers)")
    p.add_argument("--out", default="docs/benchmarks-peers.md")
    args = p.parse_args(argv)

    conf = config_mod.load_config(args.conf, overrides={"semantic": {"enabled": False}})
    spark = get_spark(conf, "newsdedup-bench-peers")
    cores = spark.sparkContext.defaultParallelism
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Spark master {spark.sparkContext.master}"
    command = "python -m newsdedup_lab.bench_peers " + " ".join(argv if argv is not None else sys.argv[1:])
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    systems = [s for s in args.systems.split(",") if s]
    rows: list[Row] = []
    notes = [f"datatrove {_version('datatrove')}; "
             "LocalPipelineExecutor, signatures/filter 2 tasks on 2 workers, buckets 14 tasks on 2 workers, "
             "cluster 1 task; input prep = writing its per-language (id, text) Parquet shards, not in its wall time."]
    out = Path(args.out)

    def save() -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(markdown(rows, command, machine, cores, notes), encoding="utf-8")

    reuse = [Path(r) for r in args.reuse]
    if args.warmup:
        small = _hardlinked_corpus(args.warmup, args.seed + 1, work, reuse)
        bench_corpus(spark, conf, "warmup", small, None, work / "warmup", systems=systems)
        notes.append(f"a {args.warmup}-document warm-up run of every system preceded the measurements")
    if args.realtext:
        rt = Path(args.realtext)
        truth = pd.read_parquet(rt / "truth.parquet")
        mnl_path = rt / "must_not_link.parquet"
        mnl = pd.read_parquet(mnl_path) if mnl_path.exists() else None
        rows += bench_corpus(spark, conf, "real text", rt / "docs.parquet", truth, work / "realtext", mnl, systems)
        save()
        if args.datatrove_ngrams and "datatrove" in systems:
            cfg = datatrove_config(n_grams=args.datatrove_ngrams)
            extra = bench_corpus(spark, conf, "real text", rt / "docs.parquet", truth, work / "realtext_dt", mnl,
                                 ["datatrove"], datatrove_cfg=cfg)
            for r in extra:
                r.system = f"datatrove (n_grams={args.datatrove_ngrams})"
            rows += extra
            save()
    for n in (parse_sizes(args.sizes) if args.sizes else []):
        path = _hardlinked_corpus(n, args.seed, work, reuse)
        truth = pd.read_parquet(path.parent / "truth.parquet")
        rows += bench_corpus(spark, conf, f"synthetic {n // 1000}k", path, truth, work / f"synth_{n}", None, systems)
        save()
    save()
    print(out.read_text())
    return 0


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    sys.exit(main())
