"""What a slice's closure pass finds in a stored output: its candidate pairs, which of them verify,
how far apart in time the two documents lie, and which verification test rejects the others.

    PYTHONPATH=../lib:. python -m newsdedup_lab.closure_candidates --output OUT --slice SLICE.parquet

The slice is prepared as a run would prepare it; its keys are compared with every stored document's
by the closure's own pass (incremental.round_hits) and the pairs verified as stage 3 verifies them.
Nothing is written. Used in docs/benchmarks-incremental.md (session 20) to ask whether the candidate
pairs' stored text could be read from the files of a few days only.
"""

from __future__ import annotations

import argparse

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from newsdedup import incremental, prepare
from newsdedup.config import load_config
from newsdedup.io import store
from newsdedup.io.input import conform, plausible_range
from newsdedup.io.spark import get_spark
from newsdedup.stages.simhash.verify import pair_features, similarity, verified


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--output", required=True)
    ap.add_argument("--slice", required=True)
    ap.add_argument("--far-days", type=float, default=30.0)
    args = ap.parse_args(argv)
    conf = load_config(overrides={"semantic": {"enabled": False}})
    spark = get_spark(conf, "closure-candidates")
    docs = store.read(spark, args.output, "documents")
    raw = spark.read.parquet(args.slice)
    prepared = prepare.fingerprint(conform(raw, conf.input.naive_timezone, plausible_range(conf.input)), conf)
    keys = prepared.select(*incremental.KEY_COLUMNS).toArrow()
    ids = np.sort(np.asarray(keys["id"].to_numpy()))
    index = spark.sparkContext.broadcast(incremental.FrontierIndex.of(keys, ids, conf.simhash))

    def hits(batches):
        for batch in batches:
            yield incremental.round_hits(index.value, batch, conf.simhash)

    found = (docs.select(*incremental.KEY_COLUMNS).mapInArrow(hits, incremental.HITS_SCHEMA)
             .where(F.col("kind") == incremental.PAIR).select("a", "b", "lang").distinct().toArrow())
    pairs = spark.createDataFrame(found)
    both = np.unique(np.concatenate([found["a"].to_numpy(), found["b"].to_numpy()]))
    wanted = spark.createDataFrame(pa.table({"id": pa.array(both, pa.int64())}))
    text = docs.select("id", "lang", "title", "body").unionByName(prepared.select("id", "lang", "title", "body"))
    scored = similarity(pairs, pair_features(text, wanted, conf, None, broadcast=True), "a", "b")
    ok = verified(scored, conf.simhash).select("a", "b", F.lit(True).alias("ok"))
    dated = (scored.join(ok, ["a", "b"], "left")
             .join(docs.select(F.col("id").alias("b"), F.col("published_at").alias("tb")), "b")
             .join(prepared.select(F.col("id").alias("a"), F.col("published_at").alias("ta")), "a")
             .withColumn("days", F.abs(F.unix_timestamp("tb") - F.unix_timestamp("ta")) / 86400)
             .toPandas())
    dated["ok"] = dated["ok"].astype("boolean").fillna(False).astype(bool)
    print(f"candidate pairs {len(dated)}, stored documents in them {dated['b'].nunique()}")
    for label, part in (("verified", dated[dated.ok]), ("not verified", dated[~dated.ok])):
        if not len(part):
            continue
        print(f"{label}: {len(part)} pairs, {part['b'].nunique()} stored documents; days apart median "
              f"{part['days'].median():.1f}, p90 {part['days'].quantile(0.9):.1f}, "
              f"over {args.far_days:g} days {int((part['days'] > args.far_days).sum())}")
    bad = dated[~dated.ok]
    lang_spec = conf.simhash.language
    fails_numbers = sum(1 for r in bad.itertuples() if r.numbers == r.numbers and r.numbers < lang_spec(r.lang).numbers_overlap)
    similar = sum(1 for r in bad.itertuples() if r.jaccard >= lang_spec(r.lang).jaccard
                  or r.containment >= lang_spec(r.lang).containment)
    print(f"not verified: {fails_numbers} fail the numbers test, {similar} pass jaccard or containment; "
          f"jaccard median {bad['jaccard'].median():.3f}")
    only_bad = set(bad["b"]) - set(dated[dated.ok]["b"])
    print(f"stored documents only in pairs that do not verify: {len(only_bad)}")


if __name__ == "__main__":
    main()
