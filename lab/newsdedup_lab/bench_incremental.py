"""An incremental slice against a stored archive: time in proportion to the slice, not the archive.

    python -m newsdedup_lab.bench_incremental --archive 200000 --slice-share 0.01 --work /tmp/bench-inc

1. builds a synthetic archive of N documents (synth.write, seeded) and a slice of N x share new
   documents: half fresh synthetic documents (with their own duplicates), half derived from stored
   ones so that every stage has work against the archive: the same URL (stage 1), the same text
   under another URL (stage 2), a light edit under another URL (stage 3); a third of the derived
   ones are older than their stored original, so they take its cluster over (links superseded);
2. runs the archive in full (stages 1-3, Delta, no Postgres: as docs/benchmarks-e2e.md), timed;
3. copies that output and runs the slice on it incrementally (input.incremental: slice), timed, with
   each step's seconds and the closure's size: the closure by stored components (the default) and,
   with --rounds, by rounds (input.closure: rounds, a pass over the stored keys per round), each on
   its own copy;
4. with --baseline, runs the same slice on another copy over the whole archive (input.incremental:
   archive, the behaviour before the closure), timed;

and checks that every slice run ends with the same active links.

Prints a markdown report (and writes it to --md when given).
"""

from __future__ import annotations

import argparse
import platform
import random
import shutil
import statistics
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .synth import INPUT_SCHEMA, generate, typo

STEPS = ("prepare", "closure", "url", "content", "simhash", "components", "write_delta")


def make_slice(archive: pa.Table, n: int, seed: int) -> pa.Table:
    """n new documents: half fresh (synth, ids after the archive's), half copies of stored ones
    (same URL / same text / a typo), a third of those dated a day before their original."""
    rng = random.Random(seed)
    n_fresh = n // 2
    fresh, _ = generate(max(n_fresh, 1), seed=seed + 1)
    fresh = fresh.slice(0, n_fresh)
    next_id = int(pc.max(archive["id"]).as_py()) + 1
    fresh = fresh.set_column(0, "id", pa.array(range(next_id, next_id + len(fresh)), pa.int64()))
    next_id += len(fresh)
    picks = rng.sample(range(archive.num_rows), n - n_fresh)
    # Row by row: take() concatenates whole string columns, which overflows 32-bit offsets at 1M documents.
    rows = [archive.slice(i, 1).to_pylist()[0] for i in picks]
    out = []
    for i, r in enumerate(rows):
        kind = i % 3
        doc = dict(r, id=next_id + i)
        if kind != 0:   # another URL: stage 2 (same text) or stage 3 (a typo)
            doc["url"] = f"https://wire.example/copy/{next_id + i}"
        if kind == 2:
            doc["body"] = typo(r["body"] or "", rng)
        if rng.random() < 1 / 3 and r["published_at"] is not None:
            doc["published_at"] = r["published_at"] - timedelta(days=1)
        out.append(doc)
    derived = pa.Table.from_pylist(out, schema=INPUT_SCHEMA)
    return pa.concat_tables([fresh.select(INPUT_SCHEMA.names).cast(INPUT_SCHEMA), derived])


def timed_run(spark, conf, path: Path, out: Path):
    from newsdedup import job

    t0 = time.perf_counter()
    report = job.run(spark, str(path), str(out), conf, load_pg=False)
    return report, time.perf_counter() - t0


def active_keys(spark, out: Path):
    from pyspark.sql import functions as F

    from newsdedup.io import store

    return store.active_links(spark, str(out)).select(
        "duplicate_id", "canonical_id", "stage", F.round("score", 9).alias("score"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m newsdedup_lab.bench_incremental", description=__doc__.split("\n")[0])
    p.add_argument("--archive", type=int, default=200_000)
    p.add_argument("--slice-share", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--work", default="/tmp/bench-incremental")
    p.add_argument("--baseline", action="store_true", help="also run the slice over the whole archive")
    p.add_argument("--rounds", action="store_true", help="also run the slice's closure by rounds")
    p.add_argument("--repeat", type=int, default=1,
                   help="run the slice variants this many times, alternating, each on a fresh copy of the "
                        "full run's output (the ratios then come from each variant's median)")
    p.add_argument("--reuse-full", action="store_true",
                   help="take the full run's output from an earlier bench in --work (its time is then not measured)")
    p.add_argument("--md", help="write the markdown report here too")
    args = p.parse_args(argv)

    from newsdedup.config import load_config
    from newsdedup.io.spark import get_spark

    from .bench import corpus

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    archive_path = corpus(args.archive, args.seed, work)
    n_slice = int(round(args.archive * args.slice_share))
    slice_path = work / f"slice_{args.archive}_{n_slice}_s{args.seed}.parquet"
    if not slice_path.exists():
        pq.write_table(make_slice(pq.read_table(archive_path), n_slice, args.seed + 100), slice_path)

    conf = load_config(overrides={"semantic": {"enabled": False}})
    spark = get_spark(conf, "bench-incremental")
    full_out = work / f"out_full_{args.archive}"
    variants = [("slice (components)", "out_slice", conf)]
    if args.rounds:
        variants.append(("slice (rounds)", "out_rounds", conf.with_overrides({"input": {"closure": "rounds"}})))
    if args.baseline:
        variants.append(("slice (whole archive)", "out_archive",
                         conf.with_overrides({"input": {"incremental": "archive"}})))
    for d in ([] if args.reuse_full else [full_out]) + [work / v[1] for v in variants]:
        shutil.rmtree(d, ignore_errors=True)
    rows = []
    if not args.reuse_full:
        full, full_s = timed_run(spark, conf, archive_path, full_out)
        rows.append(("full archive", args.archive, full, full_s))
    seconds: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        for label, name, variant_conf in variants:
            shutil.rmtree(work / name, ignore_errors=True)
            shutil.copytree(full_out, work / name)
            report, secs = timed_run(spark, variant_conf, slice_path, work / name)
            rows.append((label, n_slice, report, secs))
            seconds.setdefault(label, []).append(secs)
    inc = next(r for label, _, r, _ in rows if label == variants[0][0])
    first = active_keys(spark, work / variants[0][1])
    same = all(first.subtract(other).count() == 0 and other.subtract(first).count() == 0
               for other in (active_keys(spark, work / v[1]) for v in variants[1:])) if len(variants) > 1 else None

    lines = [f"Machine: {platform.machine()}, {__import__('os').cpu_count()} cores, Spark master "
             f"{spark.sparkContext.master}. Archive: synth, {args.archive:,} documents (seed {args.seed}); slice: "
             f"{n_slice:,} new documents (half fresh, half copies of stored ones: same URL, same text, a typo).",
             "",
             "| run | input docs | wall s | " + " | ".join(f"{s} s" for s in STEPS)
             + " | affected docs | rounds | keys passes | links new | superseded |",
             "|---|---:|---:|" + "---:|" * (len(STEPS) + 5)]
    for name, n, r, secs in rows:
        steps = " | ".join(f"{r.seconds[s]:.1f}" if s in r.seconds else "-" for s in STEPS)
        c = r.counts
        lines.append(f"| {name} | {n:,} | {secs:.1f} | {steps} | {c.get('incremental.affected_documents', '-')} | "
                     f"{c.get('incremental.rounds', '-')} | {c.get('incremental.keys_passes', '-')} | "
                     f"{c.get('links.new', 0)} | {c.get('links.superseded', 0)} |")
    medians = {label: statistics.median(v) for label, v in seconds.items()}
    lines += [""] + [f"{label}: median {m:.1f} s of {len(seconds[label])}"
                     + (f", / full archive: {m / full_s:.3f}" if not args.reuse_full else "")
                     for label, m in medians.items()]
    if same is not None:
        lines.append(f"Active links identical across the slice runs: {same}")
    lines.append("Closure rounds (documents added): " + ", ".join(
        f"{k}={v}" for k, v in sorted(inc.counts.items()) if k.startswith("incremental.")))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        Path(args.md).write_text(text, encoding="utf-8")
    spark.stop()
    return 0 if same in (None, True) else 1


if __name__ == "__main__":
    raise SystemExit(main())
