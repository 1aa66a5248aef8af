"""Stages 1-3 against the plain hash-and-group job (d), each in a fresh `python` process.

`newsdedup bench` times (d) and the job in one warm Spark session; this script answers
the other question of issue 23: what a user waits for when each is started on its own.
Every run is a new interpreter (a new JVM, new Python workers, numba's on-disk cache as it is)
on the same snapshot:

- (d): `baselines.plain_sha256_job` after `get_spark`, as `newsdedup bench` runs it;
- the job: `newsdedup run --no-postgres --no-semantic` (stages 1-3, Delta written).

Each process's wall time is measured from outside (spawn to exit); the ratio is job / (d).
The runs alternate, (d) first, so that both see the same machine load. Reproduce with:

    python -m newsdedup_lab.bench_fresh --input CORPUS.parquet --work /tmp/fresh --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

PLAIN = """
import sys, time
from newsdedup import config
from newsdedup.io.spark import get_spark
from newsdedup_lab.baselines import plain_sha256_job
spark = get_spark(config.load_config(), "newsdedup-plain")
rows, secs = plain_sha256_job(spark, sys.argv[1], sys.argv[2])
print("job seconds", round(secs, 2), "rows", rows)
"""


def timed_process(argv: list[str], log: Path) -> float:
    """Wall seconds from spawning argv to its exit; its output goes to log. Fails on a non-zero exit."""
    t0 = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy())
    secs = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"newsdedup: error: {' '.join(argv[:4])} ... exited {done.returncode}; see {log}")
    return secs


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "uptime unavailable"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m newsdedup_lab.bench_fresh", description=__doc__.split("\n")[0])
    p.add_argument("--input", required=True, help="the snapshot (Parquet, the job's input schema)")
    p.add_argument("--work", required=True, help="scratch directory (outputs and logs; emptied per run)")
    p.add_argument("--rounds", type=int, default=1, help="(d), then the job, this many times")
    p.add_argument("--conf", help="YAML merged over the defaults, passed to the job")
    args = p.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    results = []
    for r in range(args.rounds):
        load_before = uptime()
        shutil.rmtree(work / "plain", ignore_errors=True)
        plain = timed_process([python, "-c", PLAIN, args.input, str(work / "plain")], work / f"plain_{r}.log")
        shutil.rmtree(work / "out", ignore_errors=True)
        job_argv = [python, "-m", "newsdedup.cli", "run", "--input", args.input, "--output", str(work / "out"),
                    "--no-postgres", "--no-semantic"] + (["--conf", args.conf] if args.conf else [])
        job = timed_process(job_argv, work / f"job_{r}.log")
        row = {"round": r, "plain_s": round(plain, 1), "job_s": round(job, 1), "ratio": round(job / plain, 2),
               "uptime_before": load_before, "uptime_after": uptime()}
        results.append(row)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
