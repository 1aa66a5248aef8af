"""A fresh process's first prepared documents, at two revisions side by side: what every Spark Python
worker, every `newsdedup check` and every test process pays before its first document.

    python -m newsdedup_lab.bench_coldstart --base BASE_LIB --new NEW_LIB --rounds 3

Each measurement is a fresh interpreter with PYTHONPATH=<lib>:<this lab>, base and new alternating:
the seconds to import the job, to build `prepare.Keys`, to prepare its first 10 documents, and
then 2,000 more (the steady rate). The documents are synthetic (synth.generate, seed 7), shaped
as prepare's UDF receives them (bench_prepare.udf_batches).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

LAB = Path(__file__).resolve().parents[1]


def side(n_first: int, n_more: int) -> dict[str, float]:
    """In this (fresh) process: the seconds of each part (the module docstring)."""
    t0 = time.perf_counter()
    from newsdedup import prepare
    from newsdedup.config import load_config
    t1 = time.perf_counter()
    conf = load_config(overrides={"semantic": {"enabled": False}})
    keys = prepare.Keys(conf)
    t2 = time.perf_counter()
    from .bench_prepare import udf_batches
    (arrays,), names = udf_batches(n_first + n_more, 7, n_first + n_more)

    def timed(a: int, b: int) -> float:
        s = time.perf_counter()
        prepare.prepare_batch(keys, [x.slice(a, b - a) for x in arrays], names)
        return time.perf_counter() - s

    first = timed(0, n_first)
    more = timed(n_first, n_first + n_more)
    return {"import": t1 - t0, "keys": t2 - t1, "first": first, "more": more}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m newsdedup_lab.bench_coldstart", description=__doc__.split("\n")[0])
    p.add_argument("--base", help="the lib directory of the base revision")
    p.add_argument("--new", help="the lib directory of the revision measured against it")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--first", type=int, default=10)
    p.add_argument("--more", type=int, default=2000)
    p.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.side:
        print(json.dumps(side(args.first, args.more)))
        return 0
    rows: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
    for _ in range(args.rounds):
        for name, lib in (("base", args.base), ("new", args.new)):
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([lib, str(LAB)])}
            out = subprocess.run([sys.executable, "-m", "newsdedup_lab.bench_coldstart", "--side",
                                  "--first", str(args.first), "--more", str(args.more)],
                                 env=env, check=True, capture_output=True, text=True).stdout
            rows[name].append(json.loads(out.strip().splitlines()[-1]))
    print(f"load average {os.getloadavg()[0]:.2f}; seconds per fresh process, rounds alternating base/new\n")
    print(f"| side | import | Keys() | first {args.first} docs | next {args.more} docs |")
    print("|---|---:|---:|---:|---:|")
    for name, runs in rows.items():
        for r in runs:
            print(f"| {name} | {r['import']:.2f} | {r['keys']:.2f} | {r['first']:.2f} | {r['more']:.2f} |")
    for name, runs in rows.items():
        print(f"| {name} median | " + " | ".join(f"{statistics.median(r[k] for r in runs):.2f}"
                                              for k in ("import", "keys", "first", "more")) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
