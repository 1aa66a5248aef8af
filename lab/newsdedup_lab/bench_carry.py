"""What carrying stage 3's verification features from prepare costs, against deriving them again.

Issue 23: prepare computes each document's content key and shingle set once; stage 3 used to
derive both again (and the numbers and names) for every document of a candidate pair. In one
Spark session, on one corpus:

1. prepare's frame (`prepare.fingerprint`, the verification columns included) is written to Delta
   once; then that table is copied twice, with and without the verification columns (shingles,
   nums, names), alternating: the difference is what storing them costs the prepare step's write.
2. The candidate pairs of every document with simhash_w (`candidate_pairs`), and their documents' ids.
3. `pair_features` of those ids, derived from the text (the code before issue 23) and read from the
   carried columns, each written to the noop sink, alternating.

The compute the verification columns add to prepare's UDF (numbers and names per document; the
shingle set is the kernel's own) is measured in one process by `--in-process`.
Reproduce with:

    python -m newsdedup_lab.bench_carry --input CORPUS.parquet --work /tmp/carry --rounds 2
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def in_process(n: int, seed: int = 7) -> dict[str, float]:
    """CPU microseconds per document of SimhashKeys.batch without and with the verification columns."""
    from newsdedup.config import load_config
    from newsdedup.stages.content import ContentKeys
    from newsdedup.stages.simhash.keys import SimhashKeys

    from .synth import generate

    conf = load_config()
    docs, _ = generate(n, seed)
    d = docs.to_pydict()
    content = ContentKeys(conf.content, conf.input.max_text_chars).batch(
        d["title"], d["body"], [None] * n, [None] * n, [[] for _ in range(n)])
    keys = SimhashKeys(conf.simhash)
    args = (content["key"], content["lang"], content["has_body"])
    keys.batch(*args, verify=True)           # compiled, word cache warm
    out = {}
    for verify in (False, True, False, True):
        t0 = time.process_time()
        keys.batch(*args, verify=verify)
        us = (time.process_time() - t0) / n * 1e6
        name = "keys_us_with_verify" if verify else "keys_us_without"
        out[name] = round(min(out.get(name, us), us), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m newsdedup_lab.bench_carry", description=__doc__.split("\n")[0])
    p.add_argument("--input", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--in-process", type=int, default=0, help="also time SimhashKeys.batch on this many documents")
    args = p.parse_args(argv)

    from pyspark.sql import functions as F

    from newsdedup import config, prepare
    from newsdedup.io.input import conform, plausible_range, read_input, split_invalid
    from newsdedup.io.spark import get_spark
    from newsdedup.stages.simhash.candidates import candidate_pairs
    from newsdedup.stages.simhash.verify import pair_features

    from .baselines import delta_bytes

    conf = config.load_config(overrides={"semantic": {"enabled": False}})
    spark = get_spark(conf, "newsdedup-bench-carry")
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    result: dict[str, object] = {}
    if args.in_process:
        result.update(in_process(args.in_process))

    raw = read_input(spark, args.input)
    valid, _ = split_invalid(conform(raw, conf.input.naive_timezone, plausible_range(conf.input)))
    prepared_path = str(work / "prepared")
    result["prepare_write_s"] = round(_timed(lambda: prepare.fingerprint(valid, conf).write.format("delta")
                                             .save(prepared_path)), 1)
    prepared = spark.read.format("delta").load(prepared_path)
    for r in range(args.rounds):
        for label, frame in (("with", prepared), ("without", prepared.drop(*prepare.VERIFY_COLUMNS))):
            path = str(work / f"copy_{label}_{r}")
            secs = _timed(lambda: frame.write.format("delta").save(path))
            result.setdefault(f"copy_{label}_s", []).append(round(secs, 1))
            result[f"copy_{label}_mb"] = round(delta_bytes(path) / 2 ** 20, 1)
            shutil.rmtree(path, ignore_errors=True)

    docs = prepared.where(F.col("prepare_error").isNull())
    pairs, _ = candidate_pairs(docs, conf.simhash)
    ids_path = str(work / "ids")
    (pairs.select(F.col("a").alias("id")).unionByName(pairs.select(F.col("b").alias("id"))).distinct()
     .write.format("delta").save(ids_path))
    ids = spark.read.format("delta").load(ids_path)
    result["documents"] = docs.count()
    result["candidate_documents"] = ids.count()
    carried = docs.where(F.col("shingles").isNotNull()).select("id", *prepare.VERIFY_COLUMNS)
    for r in range(args.rounds):
        for label, frame in (("derived", pair_features(docs, ids, conf)),
                             ("carried", pair_features(docs, ids, conf, carried, complete=True))):
            secs = _timed(lambda: frame.write.format("noop").mode("overwrite").save())
            result.setdefault(f"features_{label}_s", []).append(round(secs, 1))
    print(json.dumps(result), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
