"""A backfill's slices against a stored archive: each slice its own `newsdedup run` process, against
all of them as one multi-slice job (`newsdedup run --input S1 S2 ...`), side by side.

    python -m newsdedup_lab.bench_slices make --archive ARCHIVE.parquet --n 10000 --count 3 --work WORK [--days 11]
    python -m newsdedup_lab.bench_slices run --from FULL_OUTPUT --work WORK [--rounds 1] [--full ARCHIVE.parquet] WORK/slice_*.parquet

`make` writes COUNT slices of N new documents each (bench_incremental.make_slice, seeds 108, 109, ...,
ids moved apart so slices never reuse each other's ids; with --days, each slice dated within its own
window of that many days at the archive's end, as a backfill run in time order). `run` copies FULL_OUTPUT (a stored archive) for
each side, runs the slices in order on it (stage 4 off, no Postgres), alternating the sides per round,
and prints per slice the wall time (the fresh side from outside the process, the job side from the job's
own "slice i of k: done in" line, plus the job's total from outside), the step timings, and whether both
sides end with the same active links. With --full, a fresh full run over ARCHIVE first, for the ratio.
With --base-lib BASE/lib, the other side is the same multi-slice job on another revision (an A/B of the
job's code) instead of the fresh processes.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

STEPS = ("check_input", "prepare", "closure", "url", "content", "simhash", "components", "write_delta",
         "optimize_delta")
HERE = Path(__file__).resolve().parents[2]


def make(args: argparse.Namespace) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .bench_incremental import make_slice

    archive = pq.read_table(args.archive)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    next_id = int(pc.max(archive["id"]).as_py()) + 1
    end = pc.max(archive["published_at"]).as_py()
    for k in range(args.count):
        if args.days:
            # A backfill in time order: slice k is dated within its own window of `days` days, the
            # windows consecutive and the last ending with the archive; its copies are of stored
            # documents of that window.
            lo = end - timedelta(days=args.days * (args.count - k))
            at = archive["published_at"]
            pool = archive.filter(pc.and_(pc.greater_equal(at, pa.scalar(lo, at.type)),
                                          pc.less(at, pa.scalar(lo + timedelta(days=args.days), at.type))))
            piece = make_slice(pool, args.n, args.seed + k)
            rng = random.Random(args.seed + k)
            n_fresh = args.n // 2
            dated = [lo + timedelta(days=rng.uniform(0, args.days)) for _ in range(n_fresh)]
            at = pa.chunked_array([pa.array(dated, piece["published_at"].type)] + piece["published_at"].slice(n_fresh).chunks)
            piece = piece.set_column(piece.schema.get_field_index("published_at"), "published_at", at)
            ids = pa.array(range(next_id + k * args.n, next_id + (k + 1) * args.n), pa.int64())
        else:
            piece = make_slice(archive, args.n, args.seed + k)
            ids = pc.add(piece["id"], pa.scalar(k * 2 * args.n, pa.int64()))   # apart from the other slices' ids
        piece = piece.set_column(piece.schema.get_field_index("id"), "id", ids)
        # The fresh half (first) gets its own URL path per slice: synth numbers its URLs from 0 in every
        # corpus, so without it slices would share URLs by chance. Within the slice, URL variants stay variants.
        n_fresh = args.n // 2
        urls = pc.replace_substring_regex(piece["url"].slice(0, n_fresh), r"^(\w+://[^/]+)/", rf"\1/s{k + 1}/")
        # make_slice names a copy's new URL by its id before the move: name it by the moved id.
        copies = piece["url"].slice(n_fresh)
        moved = pc.binary_join_element_wise("https://wire.example/copy/", pc.cast(piece["id"].slice(n_fresh), pa.string()), "")
        copies = pc.if_else(pc.starts_with(copies, "https://wire.example/copy/"), moved, copies)
        urls = pa.chunked_array(urls.chunks + copies.chunks, pa.string())
        piece = piece.set_column(piece.schema.get_field_index("url"), "url", urls)
        path = work / f"slice_{k + 1}.parquet"
        pq.write_table(piece, path)
        print(path)
    return 0


def _cli(argv: list[str], log: Path, lib: str | None = None) -> tuple[int, float]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=lib or str(HERE / "lib"))
    t0 = time.perf_counter()
    with log.open("w") as out:
        rc = subprocess.call([sys.executable, "-m", "newsdedup.cli", *argv], stdout=out, stderr=subprocess.STDOUT,
                             env=env)
    return rc, time.perf_counter() - t0


def _steps(text: str) -> list[dict[str, float]]:
    """Step seconds of each run in a log (a run starts at its check_input line)."""
    runs: list[dict[str, float]] = []
    for m in re.finditer(r"\] ([a-z_]+): done in ([\d.]+)s", text):
        if m[1] == "check_input":
            runs.append({})
        runs[-1][m[1]] = float(m[2])
    return runs


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run(args: argparse.Namespace) -> int:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "nosem.yaml"
    conf.write_text('{"semantic": {"enabled": false}}\n')
    common = ["--conf", str(conf), "--no-postgres"]
    rows = []   # (side, round, slice, wall, steps, load)
    if args.full:
        out = work / "out_fullrun"
        shutil.rmtree(out, ignore_errors=True)
        l0 = _load()
        rc, wall = _cli(["run", "--input", args.full, "--output", str(out), *common], work / "full.log")
        rows.append(("full", 1, "archive", wall, _steps((work / "full.log").read_text())[0], f"{l0} -> {_load()}"))
        print(f"full rc={rc} wall {wall:.1f}", flush=True)
        shutil.rmtree(out, ignore_errors=True)
    first = "base" if args.base_lib else "fresh"
    for r in range(1, args.rounds + 1):
        for side in (first, "job") if r % 2 else ("job", first):
            out = work / f"out_{side}"
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(args.source, out)
            os.sync()
            if side == "fresh":
                for k, piece in enumerate(args.slices, 1):
                    log = work / f"fresh_{r}_{k}.log"
                    l0 = _load()
                    rc, wall = _cli(["run", "--input", piece, "--output", str(out), *common], log)
                    rows.append((side, r, k, wall, _steps(log.read_text())[0], f"{l0} -> {_load()}"))
                    print(f"round {r} fresh slice {k} rc={rc} wall {wall:.1f}", flush=True)
            else:
                log = work / f"{side}_{r}.log"
                l0 = _load()
                rc, wall = _cli(["run", "--input", *args.slices, "--output", str(out), *common], log,
                                args.base_lib if side == "base" else None)
                text = log.read_text()
                walls = [float(m[1]) for m in re.finditer(r"\] slice \d+ of \d+: done in ([\d.]+)s", text)]
                load = f"{l0} -> {_load()}"
                for k, (w, steps) in enumerate(zip(walls, _steps(text)), 1):
                    rows.append((side, r, k, w, steps, load))
                rows.append((side, r, "all (outside)", wall, {}, load))
                print(f"round {r} {side} rc={rc} wall {wall:.1f} slices {walls}", flush=True)
    print(_table(rows))
    print(_same_links(work / f"out_{first}", work / "out_job", first))
    return 0


def _table(rows) -> str:
    lines = ["| side | round | slice | wall s | " + " | ".join(STEPS) + " | load |",
             "|---|---:|---|---:|" + "---:|" * len(STEPS) + "---|"]
    for side, r, k, wall, steps, load in rows:
        cells = " | ".join(f"{steps[n]:.1f}" if n in steps else "-" for n in STEPS)
        lines.append(f"| {side} | {r} | {k} | {wall:.1f} | {cells} | {load} |")
    for side in ("fresh", "base", "job"):
        per = [w for s, _, k, w, _, _ in rows if s == side and isinstance(k, int)]
        if per:
            lines.append(f"\n{side}: slice median {statistics.median(per):.1f} s over {len(per)} slices")
    return "\n".join(lines)


def _same_links(a: Path, b: Path, name: str) -> str:
    from newsdedup.config import load_config
    from newsdedup.io.spark import get_spark

    from .bench_incremental import active_keys

    spark = get_spark(load_config(overrides={"semantic": {"enabled": False}}), "bench-slices")
    ka, kb = active_keys(spark, a), active_keys(spark, b)
    only_a, only_b = ka.exceptAll(kb).count(), kb.exceptAll(ka).count()
    return f"active links: {ka.count()} {name}, {kb.count()} job; only in {name} {only_a}, only in job {only_b}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m newsdedup_lab.bench_slices", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--archive", required=True)
    m.add_argument("--n", type=int, default=10_000)
    m.add_argument("--count", type=int, default=3)
    m.add_argument("--seed", type=int, default=108)
    m.add_argument("--days", type=float, default=0,
                   help="each slice within its own window of DAYS days at the archive's end (0: spread over it)")
    m.add_argument("--work", required=True)
    m.set_defaults(func=make)
    r = sub.add_parser("run")
    r.add_argument("--from", dest="source", required=True, help="a stored archive (an earlier run's output)")
    r.add_argument("--work", required=True)
    r.add_argument("--rounds", type=int, default=1)
    r.add_argument("--full", help="the archive's snapshot: time a fresh full run of it first")
    r.add_argument("--base-lib", help="instead of fresh processes, the same multi-slice job with this lib/ (A/B)")
    r.add_argument("slices", nargs="+")
    r.set_defaults(func=run)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
