"""What a run pays to keep one small frame (runstate): written, read back and counted, as Delta and as Parquet.

One warm Spark session, the variants alternated round by round, each written `--writes` times to
a fresh path; the median of every write after the first is printed. The frame is `--rows` rows of
a long, a string, a timestamp and an array, shaped like the job's small step frames.

    PYTHONPATH=lib:lab python -m newsdedup_lab.bench_frames --rows 1000 --writes 6 --rounds 2
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time

# name -> (format, session confs for its writes)
VARIANTS = {
    "delta": ("delta", {}),
    "delta, no checksum file": ("delta", {"spark.databricks.delta.writeChecksumFile.enabled": "false"}),
    "parquet": ("parquet", {}),
}


def seconds_per_frame(spark, df, fmt: str, confs: dict[str, str], writes: int, where: str) -> list[float]:
    """Seconds of each write + read back + count of df as fmt, under confs."""
    for k, v in confs.items():
        spark.conf.set(k, v)
    try:
        out = []
        for i in range(writes):
            path = f"{where}/{i}"
            start = time.perf_counter()
            df.write.format(fmt).mode("overwrite").save(path)
            spark.read.format(fmt).load(path).count()
            out.append(time.perf_counter() - start)
        return out
    finally:
        for k in confs:
            spark.conf.unset(k)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--writes", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)

    from newsdedup.config import load_config
    from newsdedup.io.spark import get_spark

    conf = load_config(overrides={"semantic": {"enabled": False}, "spark": {"shuffle_partitions": 2}})
    spark = get_spark(conf, "bench-frames")
    df = spark.range(args.rows).selectExpr("id", "cast(id as string) as s", "current_timestamp() as ts",
                                           "array(id, id) as a")
    work = tempfile.mkdtemp(prefix="bench-frames-")
    try:
        for r in range(args.rounds):
            for name, (fmt, confs) in VARIANTS.items():
                took = seconds_per_frame(spark, df, fmt, confs, args.writes, f"{work}/{r}/{fmt}-{len(confs)}")
                print(f"round {r}  {name:24s} median {statistics.median(took[1:]):.2f} s  "
                      f"all {[round(t, 2) for t in took]}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
