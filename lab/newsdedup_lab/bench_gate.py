"""Stage 3's SimHash gate on the MinHash bands (`minhash_max_hamming`), measured two ways.

- `realtext`: every band pair of a labelled corpus (the job's bucket codes and scan, no bucket
  split), verified with the job's own measures and thresholds: how far apart in simhash_w the pairs
  that verify lie, and what each gate would lose.
- `archive`: the stage-3 inputs of a finished run (documents not linked at url or content, with
  their final cluster from the components table): band pairs, pairs per document, documents in
  the candidate graph and its largest connected component, for each gate; no pair is verified.

Both call `bucket_pairs` with the gate off (64) and apply each gate afterwards, so one scan serves
every row.

    python -m newsdedup_lab.bench_gate realtext --docs RT/docs.parquet --truth RT/truth.parquet
    python -m newsdedup_lab.bench_gate archive --run OUT --limits 1000000,20000000 --work DIR
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

GATES = (64, 30, 28, 26, 24, 22)


def band_pairs(ids: np.ndarray, lang: pa.Array, simhash_w: pa.Array, mh_bands: pa.Array, sim_conf,
               max_bucket: int) -> np.ndarray:
    """Distinct band pairs (a < b, as a * 2^32 + b) by the job's bucket codes and compiled scan, gate off;
    ids below 2^32."""
    from newsdedup.stages.simhash.candidates import MINHASH, _language_tables, bucket_pairs, code_rows, language_codes

    n = len(ids)
    fp = np.asarray(simhash_w.fill_null(0).to_numpy(), np.int64)
    row, code, is_table = code_rows(lang, simhash_w, mh_bands, sim_conf)
    row, code = row[~is_table], code[~is_table]
    names = np.asarray(lang.fill_null("default").to_numpy(zero_copy_only=False), object)
    lang_code = np.zeros(n, np.int32)
    for i, name in enumerate(language_codes(sim_conf)):
        lang_code[names == name] = i
    order = np.lexsort((ids[row], fp[row], code))
    row, code = row[order], code[order]
    max_h, masks, n_masks, minhash_max = _language_tables(sim_conf)
    a, b, *_ = bucket_pairs(code, np.full(len(row), MINHASH, np.int32), np.zeros(len(row), np.int32),
                            lang_code[row], fp[row], ids[row], max_h, masks, n_masks,
                            np.full_like(minhash_max, 64), max_bucket, True)
    return np.unique(a.astype(np.int64) * (1 << 32) + b)


def _ends(ids_sorted: np.ndarray, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.searchsorted(ids_sorted, pairs >> 32), np.searchsorted(ids_sorted, pairs & ((1 << 32) - 1))


def realtext(docs_path: str, truth_path: str) -> None:
    from newsdedup.config import load_config
    from newsdedup.stages.content import ContentKeys
    from newsdedup.stages.simhash.keys import SimhashKeys
    from newsdedup.stages.simhash.verify import PairFeatures, features_of, pair_measures, passes

    conf = load_config(overrides={"semantic": {"enabled": False}})
    d = pq.read_table(docs_path).sort_by("id").to_pydict()
    truth = pq.read_table(truth_path).to_pydict()
    cluster = dict(zip(truth["id"], truth["cluster_id"]))
    n = len(d["id"])
    keys = ContentKeys(conf.content, conf.input.max_text_chars).batch(
        d["title"], d["body"], [None] * n, d.get("lang", [None] * n), [[] for _ in range(n)])
    sk = SimhashKeys(conf.simhash).batch(keys["key"], keys["lang"], keys["has_body"])
    ok = sk["simhash_w_valid"]
    ids = np.array(d["id"], np.int64)
    simhash_w = pa.array([int(v) if o else None for v, o in zip(sk["simhash_w"], ok)], pa.int64())
    pairs = band_pairs(ids, pa.array(keys["lang"], pa.string()), simhash_w,
                       pa.array(sk["mh_bands"], pa.list_(pa.int64())), conf.simhash, 10 ** 9)
    ia, ib = _ends(ids, pairs)
    feats = features_of(PairFeatures(conf), d["id"], keys["lang"], d["title"], d["body"], keys=keys["key"])
    m = pair_measures([feats[i] for i in ia], [feats[i] for i in ib])
    verified = passes([keys["lang"][i] for i in ia], m, conf.simhash)
    fp = np.asarray(simhash_w.fill_null(0).to_numpy(), np.int64).view(np.uint64)
    dist = np.bitwise_count(fp[ia] ^ fp[ib])
    same = np.array([cluster.get(int(ids[x])) == cluster.get(int(ids[y])) for x, y in zip(ia, ib)])
    print(f"documents {n}, band pairs {len(pairs)}, verified {int(verified.sum())} "
          f"(in one truth cluster {int((verified & same).sum())})")
    print("verified pairs by simhash_w distance:", sorted(Counter(dist[verified].tolist()).items()))
    print("rejected pairs by simhash_w distance:", sorted(Counter(dist[~verified].tolist()).items()))
    for gate in GATES:
        lost = verified & (dist > gate)
        print(f"gate {gate}: band pairs removed {int((dist > gate).sum())}, verified pairs lost {int(lost.sum())}")


def archive(run: str, limits: list[int], work: str) -> None:
    """The run's stage-3 inputs (written once to WORK/stage3_in), then per limit (documents with id <= limit)
    the band pairs and the candidate graph under each gate."""
    from newsdedup.clustering import component_labels
    from newsdedup.config import load_config

    conf = load_config(overrides={"semantic": {"enabled": False}})
    inputs = Path(work) / "stage3_in"
    if not (inputs / "_SUCCESS").exists():
        from pyspark.sql import functions as F

        from newsdedup.io.spark import get_spark

        spark = get_spark(conf, "bench-gate")
        docs = spark.read.format("delta").load(f"{run}/documents").select("id", "lang", "simhash_w", "mh_bands")
        earlier = (spark.read.format("delta").load(f"{run}/duplicate_links")
                   .where(F.col("stage").isin("url", "content")).select(F.col("duplicate_id").alias("id")))
        comps = spark.read.format("delta").load(f"{run}/components").select("id", "component")
        docs.join(earlier, "id", "left_anti").join(comps, "id", "left").write.mode("overwrite").parquet(str(inputs))
        spark.stop()
    table = pq.read_table(inputs).sort_by("id")
    for limit in limits:
        t = table.filter(pc.less_equal(table["id"], limit)).combine_chunks()
        ids = t["id"].to_numpy()
        pairs = band_pairs(ids, t["lang"], t["simhash_w"], t["mh_bands"], conf.simhash, conf.simhash.max_band_bucket)
        ia, ib = _ends(ids, pairs)
        fp = np.asarray(t["simhash_w"].fill_null(0).to_numpy(), np.int64).view(np.uint64)
        dist = np.bitwise_count(fp[ia] ^ fp[ib])
        comp = t["component"].fill_null(-1).to_numpy()
        same = (comp[ia] == comp[ib]) & (comp[ia] >= 0)
        print(f"documents {len(ids)}: band pairs {len(pairs)}, of one final cluster {int(same.sum())} "
              f"(farthest {int(dist[same].max()) if same.any() else 0} bits)")
        for gate in GATES:
            keep = dist <= gate
            ends = np.unique(np.concatenate((ia[keep], ib[keep])))
            labels = component_labels(ends, ia[keep], ib[keep])
            largest = int(np.unique(labels, return_counts=True)[1].max()) if len(labels) else 0
            print(f"  gate {gate}: band pairs {int(keep.sum())} ({2 * keep.sum() / len(ids):.2f} per document), "
                  f"documents in pairs {len(ends)}, largest component {largest}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("realtext")
    r.add_argument("--docs", required=True)
    r.add_argument("--truth", required=True)
    a = sub.add_parser("archive")
    a.add_argument("--run", required=True, help="a run's output directory (Delta tables)")
    a.add_argument("--limits", default="1000000,20000000", help="document id limits, comma-separated")
    a.add_argument("--work", required=True)
    args = p.parse_args(argv)
    if args.what == "realtext":
        realtext(args.docs, args.truth)
    else:
        archive(args.run, [int(x) for x in args.limits.split(",")], args.work)


if __name__ == "__main__":
    main()
