"""One run against k slices on a real-text corpus: the active links must be identical.

    python -m newsdedup_lab.realtext --clir /work/data/bn_clir_mh/articles.jsonl --out DIR
    python -m newsdedup_lab.realtext_slices DIR/docs.parquet --work /tmp/rt-slices

Runs docs.parquet once into <work>/full, then as k slices (by id % k, in the order k-1 .. 0, so
later slices bring older members of stored clusters) into <work>/slices, and compares the active
links (key and score to 9 digits). Stages 1-3 (stage 4 off), no Postgres.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def compare(spark, conf, docs: str | Path, work: str | Path, k: int = 3) -> dict:
    """Counts of the comparison: documents, links of the full run, active links after the slices,
    links only in one of them, and per slice its documents, affected documents and seconds."""
    from pyspark.sql import functions as F

    from newsdedup import job
    from newsdedup.io import store

    work = Path(work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    table = pq.read_table(docs)
    full = job.run(spark, str(docs), str(work / "full"), conf, load_pg=False)
    out = str(work / "slices")
    slices = []
    for r in reversed(range(k)):
        path = work / f"slice{r}.parquet"
        pq.write_table(table.filter(pa.array(table["id"].to_numpy() % k == r)), path)
        t0 = time.perf_counter()
        rep = job.run(spark, str(path), out, conf, load_pg=False)
        slices.append({"documents": rep.counts["documents"],
                       "affected": rep.counts.get("incremental.affected_documents", rep.counts["documents"]),
                       "rounds": rep.counts.get("incremental.rounds", 0),
                       "keys_passes": rep.counts.get("incremental.keys_passes", 0),
                       "by_components": rep.counts.get("incremental.by_components", 0),
                       "seconds": round(time.perf_counter() - t0, 1)})

    def keys(df):
        return df.select("duplicate_id", "canonical_id", "stage", F.round("score", 9).alias("score"))

    whole, active = keys(store.read(spark, str(work / "full"), "duplicate_links")), keys(store.active_links(spark, out))
    return {"documents": full.counts["documents"], "links_full": whole.count(), "links_slices": active.count(),
            "only_full": whole.subtract(active).count(), "only_slices": active.subtract(whole).count(),
            "stages": {s: full.counts.get(f"links.{s}", 0) for s in ("url", "content", "simhash")},
            "slices": slices}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m newsdedup_lab.realtext_slices", description=__doc__.split("\n")[0])
    p.add_argument("docs")
    p.add_argument("--work", default="/tmp/realtext-slices")
    p.add_argument("-k", type=int, default=3)
    p.add_argument("--closure", choices=("components", "rounds"), default="components",
                   help="how each slice's closure is found (input.closure)")
    args = p.parse_args(argv)
    from newsdedup.config import load_config
    from newsdedup.io.spark import get_spark

    conf = load_config(overrides={"semantic": {"enabled": False}, "input": {"closure": args.closure}})
    spark = get_spark(conf, "realtext-slices")
    result = compare(spark, conf, args.docs, args.work, args.k)
    print(result)
    spark.stop()
    return 0 if result["only_full"] == result["only_slices"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
