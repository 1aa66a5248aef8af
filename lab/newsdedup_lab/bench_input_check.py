"""What checking the input's files costs (docs/operations.md, "Unreadable input files").

    python -m newsdedup_lab.bench_input_check --mb 300 --files 12 --many 2000 --root /tmp/input-check-bench

Writes a snapshot of about MB megabytes of Parquet (random-word articles of ~2.8 KB, snappy,
2,000 rows a row group, FILES files) and, separately, MANY tiny files; then times, in one local
Spark session:

- footers: `read_footers` over the MANY tiny files (the per-file cost) and over the big snapshot;
- row groups: `rows_read` over the big snapshot (input.verify: row_groups);
- a plain read of the same columns (each of these two twice, the second reported) (`sum(hash(...))` over id, url, title, body, published_at,
  source, lang): what the job's own read of the input costs, for comparison.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def write_snapshot(root: Path, mb: int, files: int, seed: int = 7) -> Path:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = root / f"snapshot_{mb}mb_{files}"
    if d.exists():
        return d
    d.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i:05d}" for i in range(50_000)])
    rows_per_file = max(1, int(mb * 1_000_000 / files / 2_600))   # ~2.6 KB of Parquet per article
    next_id = 0
    for f in range(files):
        ids = np.arange(next_id, next_id + rows_per_file)
        next_id += rows_per_file
        words = rng.choice(vocab, size=(rows_per_file, 400))
        bodies = [" ".join(w) for w in words]
        table = pa.table({"id": pa.array(ids, pa.int64()), "url": [f"https://ex.com/{i}" for i in ids],
                          "title": [b[:60] for b in bodies], "body": bodies,
                          "published_at": pa.array(ids * 1_000_000 + 1_700_000_000_000_000, pa.timestamp("us", "UTC")),
                          "source": ["ex"] * len(ids), "lang": ["en"] * len(ids)})
        pq.write_table(table, d / f"part-{f:04d}.parquet", row_group_size=2_000)
    return d


def write_many(root: Path, n: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = root / f"many_{n}"
    if d.exists():
        return d
    d.mkdir(parents=True)
    for i in range(n):
        pq.write_table(pa.table({"id": [i], "url": [f"https://ex.com/{i}"], "body": ["x"],
                                 "published_at": pa.array([1_700_000_000_000_000], pa.timestamp("us", "UTC")),
                                 "source": ["ex"]}), d / f"f{i:05d}.parquet")
    return d


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mb", type=int, default=300)
    p.add_argument("--files", type=int, default=12)
    p.add_argument("--many", type=int, default=2000)
    p.add_argument("--root", default="/tmp/input-check-bench")
    args = p.parse_args(argv)

    from pyspark.sql import functions as F

    from newsdedup.config import load_config
    from newsdedup.io import input_files
    from newsdedup.io.spark import get_spark

    root = Path(args.root)
    snap, many = write_snapshot(root, args.mb, args.files), write_many(root, args.many)
    size = sum(f.stat().st_size for f in snap.glob("*.parquet")) / 1e6
    conf = load_config(overrides={"spark": {"shuffle_partitions": 2}, "semantic": {"enabled": False}})
    spark = get_spark(conf, "bench-input-check")
    _, files = input_files.data_files(spark, str(snap))
    input_files.read_footers(spark, files[:2])   # the JVM's classes loaded before timing
    (_, many_files), list_s = timed(lambda: input_files.data_files(spark, str(many)))
    _, many_s = timed(lambda: input_files.read_footers(spark, many_files))
    facts, footers_s = timed(lambda: input_files.read_footers(spark, files))
    rows = sum(sum(f.row_groups) for f in facts)
    cols = ["id", "url", "title", "body", "published_at", "source", "lang"]
    # Each twice, alternating, the second of each reported: the first pays the JIT's warm-up.
    for _ in range(2):
        _, plain_s = timed(lambda: spark.read.parquet(str(snap)).select(F.sum(F.hash(*cols))).collect())
        read, row_groups_s = timed(lambda: input_files.rows_read(spark, facts))
    assert sum(read.values()) == rows
    print(f"machine: {spark.sparkContext.master}; snapshot {size:.0f} MB in {len(files)} files, {rows} rows, "
          f"{sum(len(f.row_groups) for f in facts)} row groups")
    print(f"list {len(many_files)} tiny files: {list_s:.2f}s; their footers: {many_s:.2f}s "
          f"({1000 * many_s / len(many_files):.1f} ms/file)")
    print(f"footers of the snapshot: {footers_s:.2f}s")
    print(f"row groups of the snapshot (rows_read): {row_groups_s:.2f}s ({size / row_groups_s:.1f} MB/s)")
    print(f"plain read of the same columns: {plain_s:.2f}s ({size / plain_s:.1f} MB/s)")


if __name__ == "__main__":
    main()
