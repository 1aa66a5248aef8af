"""Does `newsdedup check` give the batch's answer? Live lookups against one batch run over everything.

    python -m newsdedup_lab.live_parity --docs DIR/docs.parquet --work WORK [--semantic] [--single]

The corpus is split into an archive and probes: with a truth.parquet beside docs.parquet,
the probes are the derived documents (parent_id > 0: edited copies, syndicated copies,
templated reports of other events...) and the archive is the rest; without one, the latest
--probe-share of the documents by published_at. Then:

1. a batch run over archive + probes (`full`), Delta only: the reference links;
2. a batch run over the archive alone, loaded into an embedded Postgres (`archive`);
3. every probe through Checker.check_many against that Postgres, in canonical order (earliest
   first), --batch-size at a time (--single: one article per call, no batch memory);
4. each probe's verdict (stage, canonical, score) against its active link in `full`.

Prints a table per stage (the batch's) and writes <work>/parity.json. A probe is `same` when
stage and canonical agree (scores are compared separately: |difference| <= 1e-9 for stages 1-3,
1e-5 for stage 4's cosine); `missed` when the batch links it and the lookup does not; `extra`
the reverse; `wrong` when both link it to different canonicals or at different stages.
Article text is read from the corpus files only; nothing of it is written out.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

TOLERANCE = {"url": 1e-9, "content": 1e-9, "simhash": 1e-9, "semantic": 1e-5}


def split(docs: list[dict], truth: list[dict] | None, probe_share: float) -> tuple[list[dict], list[dict]]:
    """(archive, probes): derived documents are probes when truth names parents, else the latest share."""
    if truth is not None:
        derived = {t["id"] for t in truth if (t.get("parent_id") or 0) > 0}
        return [d for d in docs if d["id"] not in derived], [d for d in docs if d["id"] in derived]
    ordered = sorted(docs, key=order)
    cut = int(len(ordered) * (1 - probe_share))
    return ordered[:cut], ordered[cut:]


def order(d: dict) -> tuple:
    ts = d.get("published_at")
    return (ts is None, ts.timestamp() if ts is not None else 0.0, d["id"])


def compare(batch: dict[int, tuple[str, int, float]], live: dict[int, tuple[str | None, int | None, float | None]]
            ) -> dict[str, Any]:
    """Counts per batch stage (and 'none' for probes the batch does not link)."""
    by_stage: dict[str, Counter] = {}
    for pid, (l_stage, l_canon, l_score) in live.items():
        b = batch.get(pid)
        key = b[0] if b else "none"
        c = by_stage.setdefault(key, Counter())
        c["probes"] += 1
        if b is None:
            c["same" if l_canon is None else "extra"] += 1
            continue
        b_stage, b_canon, b_score = b
        if l_canon is None:
            c["missed"] += 1
        elif (l_stage, l_canon) != (b_stage, b_canon):
            c["wrong"] += 1
            c[f"wrong_as_{l_stage}"] += 1
        else:
            c["same"] += 1
            if abs(l_score - b_score) <= TOLERANCE[b_stage]:
                c["same_score"] += 1
    total = Counter()
    for c in by_stage.values():
        total.update(c)
    linked = sum(c["probes"] for k, c in by_stage.items() if k != "none")
    same_linked = sum(c["same"] for k, c in by_stage.items() if k != "none")
    return {"by_stage": {k: dict(v) for k, v in sorted(by_stage.items())}, "total": dict(total),
            "linked_by_batch": linked, "same_canonical_share": same_linked / linked if linked else None}


def table(result: dict[str, Any]) -> str:
    cols = ("probes", "same", "same_score", "missed", "wrong", "extra")
    lines = ["| batch stage | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for stage, c in result["by_stage"].items():
        lines.append(f"| {stage} | " + " | ".join(str(c.get(k, 0)) for k in cols) + " |")
    t = result["total"]
    lines.append("| all | " + " | ".join(str(t.get(k, 0)) for k in cols) + " |")
    return "\n".join(lines)


def article(d: dict) -> dict:
    return {**d, "published_at": d["published_at"].isoformat() if d.get("published_at") else None}


def run(docs_path: str, work: str, *, semantic: bool = False, single: bool = False, batch_size: int = 256,
        probe_share: float = 0.3, limit: int | None = None, conf_path: str | None = None,
        conf=None, spark=None, dsn: str | None = None) -> dict[str, Any]:
    """The comparison; conf, spark and dsn default to the packaged configuration (stage 4 as
    `semantic` says), a session of its own (stopped at the end) and the archive's embedded Postgres."""
    from pyspark.sql import functions as F

    from newsdedup import job
    from newsdedup.config import load_config
    from newsdedup.io import pg, spark as spark_io, store
    from newsdedup.ops.check import Checker

    work_dir = Path(work)
    work_dir.mkdir(parents=True, exist_ok=True)
    docs = pq.read_table(docs_path).to_pylist()
    truth_path = Path(docs_path).with_name("truth.parquet")
    truth = pq.read_table(truth_path).to_pylist() if truth_path.exists() else None
    archive, probes = split(docs, truth, probe_share)
    if limit:
        probes = sorted(probes, key=lambda d: d["id"])[:limit]
        keep = {d["id"] for d in probes}
        docs = archive + [d for d in docs if d["id"] in keep]
    if conf is None:
        conf = load_config(conf_path, overrides={"semantic": {"enabled": bool(semantic)}})
    semantic = conf.semantic.enabled
    schema = pq.read_schema(docs_path)
    pq.write_table(pq.read_table(docs_path).filter(
        _ids_mask(pq.read_table(docs_path), {d["id"] for d in archive})).cast(schema), work_dir / "archive.parquet")
    pq.write_table(pq.read_table(docs_path).filter(
        _ids_mask(pq.read_table(docs_path), {d["id"] for d in docs})).cast(schema), work_dir / "all.parquet")

    own_session = spark is None
    if own_session:
        spark = spark_io.get_spark(conf, "live-parity", [str(work_dir)])
    t0 = time.perf_counter()
    job.run(spark, str(work_dir / "all.parquet"), str(work_dir / "full"), conf, load_pg=False)
    t1 = time.perf_counter()
    job.run(spark, str(work_dir / "archive.parquet"), str(work_dir / "archive"), conf, dsn=dsn)
    t2 = time.perf_counter()
    links = (store.read(spark, str(work_dir / "full"), "duplicate_links")
             .where(F.col("superseded_at").isNull() & F.col("reverted_at").isNull())
             .select("duplicate_id", "canonical_id", "stage", "score").collect())
    batch = {r.duplicate_id: (r.stage, r.canonical_id, r.score) for r in links}
    dsn = pg.resolve_dsn(conf, str(work_dir / "archive"), dsn)
    checker = Checker(conf, dsn, batch_size=batch_size)
    ordered = [article(d) for d in sorted(probes, key=order)]
    t3 = time.perf_counter()
    if single:
        verdicts = [checker.check_many([a])[0] for a in ordered]
    else:
        verdicts = checker.check_many(ordered)
    t4 = time.perf_counter()
    live = {v.id: (v.stage, v.canonical_id, v.score) for v in verdicts}
    result = compare(batch, live)
    result.update(archive=len(archive), probes=len(probes), semantic=semantic, single=single,
                  batch_size=batch_size, seconds={"full_run": round(t1 - t0, 1), "archive_run_and_load": round(t2 - t1, 1),
                                                  "check": round(t4 - t3, 2)},
                  wrong_examples=[{"id": pid, "live": live[pid], "batch": batch.get(pid)} for pid in live
                                  if live[pid][1] is not None and batch.get(pid) is not None
                                  and (live[pid][0], live[pid][1]) != batch[pid][:2]][:20],
                  missed_examples=[{"id": pid, "batch": batch[pid]} for pid in live
                                   if live[pid][1] is None and pid in batch][:20],
                  extra_examples=[{"id": pid, "live": live[pid]} for pid in live
                                  if live[pid][1] is not None and pid not in batch][:20])
    (work_dir / "parity.json").write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    if own_session:
        spark.stop()
    return result


def _ids_mask(table, ids: set[int]):
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.is_in(table.column("id"), value_set=pa.array(sorted(ids), pa.int64()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m newsdedup_lab.live_parity", description=__doc__.split("\n")[0])
    p.add_argument("--docs", required=True, help="docs.parquet (the job's input schema); truth.parquet beside it if any")
    p.add_argument("--work", required=True, help="scratch directory (outputs, embedded Postgres)")
    p.add_argument("--conf", help="configuration YAML (default: the packaged one)")
    p.add_argument("--semantic", action="store_true", help="stage 4 on (the configured or fallback model)")
    p.add_argument("--single", action="store_true", help="one article per check call (no batch memory)")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--probe-share", type=float, default=0.3)
    p.add_argument("--limit", type=int, help="at most this many probes (lowest ids)")
    args = p.parse_args(argv)
    result = run(args.docs, args.work, semantic=args.semantic, single=args.single, batch_size=args.batch_size,
                 probe_share=args.probe_share, limit=args.limit, conf_path=args.conf)
    print(table(result))
    print(json.dumps({k: result[k] for k in ("archive", "probes", "linked_by_batch", "same_canonical_share",
                                             "seconds")}, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
