"""Peak memory and time of one stage-3 verification group, whole against chunked pair measures.

Stage 3 verifies each group of candidate components in one Python call (`verify._linked_in_group`).
This measures that call alone, outside Spark, so that two ways of doing it compare side by side in one
run: each variant runs in a fresh interpreter that loads the same group from an Arrow file, and reports
its peak RSS during the call over what it held before it (sampled every 2 ms) and the call's time.

The group: the features (`PairFeatures`, as stage 3 derives them) of the first DOCS documents of a
corpus, and PAIRS_PER_DOC random same-language pairs per document (a 1M synthetic run has about 2.0
candidate pairs per document in pairs). Verification reads every pair's two sets whatever their
likeness, so random pairs cost what candidate pairs cost.

    python -m newsdedup_lab.bench_verify_memory --corpus CORPUS/docs.parquet --docs 20000,60000 --chunks 0,4096
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq


def build_group(corpus: str, n_docs: int, pairs_per_doc: float, seed: int, out: Path) -> dict[str, float]:
    """Write the group's features and pairs as two Arrow IPC files; their sizes."""
    from newsdedup.config import load_config
    from newsdedup.stages.simhash.verify import PairFeatures

    conf = load_config(None)
    docs = pq.ParquetFile(corpus).iter_batches(batch_size=n_docs, columns=["id", "lang", "title", "body"])
    batch = next(docs)
    feats = PairFeatures(conf).batch(batch)
    rng = np.random.default_rng(seed)
    langs = np.asarray(batch.column("lang").to_pylist(), object)
    ids = batch.column("id").to_numpy()
    a, b, lang = [], [], []
    for value in sorted(set(langs) - {None}):
        members = ids[langs == value]
        n = int(round(len(members) * pairs_per_doc))
        left, right = rng.choice(members, n), rng.choice(members, n)
        keep = left != right
        a.append(left[keep])
        b.append(right[keep])
        lang += [value] * int(keep.sum())
    pairs = pa.table({"a": np.concatenate(a), "b": np.concatenate(b), "lang": pa.array(lang, pa.string())})
    ts = pa.array(np.arange(len(ids), dtype=np.int64))
    feats = pa.Table.from_batches([feats]).append_column("ts", ts)
    for name, table in (("feats", feats), ("pairs", pairs)):
        with ipc.new_file(out / f"{name}.arrow", table.schema) as w:
            w.write_table(table)
    lengths = np.diff(feats.column("shingles").combine_chunks().offsets.to_numpy())
    return {"docs": len(ids), "pairs": pairs.num_rows, "mean_set": float(lengths.mean()),
            "feats_mb": (out / "feats.arrow").stat().st_size / 2 ** 20}


def _child(group: str, chunk: int, repeat: int) -> None:
    """Runs in a fresh interpreter: the group's call with pair chunks of `chunk` (0: all at once)."""
    import gc
    import hashlib
    import threading

    import psutil

    from newsdedup.config import load_config
    from newsdedup.stages.simhash import verify

    sim_conf = load_config(None).simhash
    if chunk == 0:
        chunk = 1 << 62
    original = verify._measures_of_rows
    verify._measures_of_rows = lambda values, left, right: original(values, left, right, chunk=chunk)
    feats = ipc.open_file(os.path.join(group, "feats.arrow")).read_all()
    pairs = ipc.open_file(os.path.join(group, "pairs.arrow")).read_all()
    run = verify._linked_in_group(sim_conf)
    run(pairs.slice(0, 100), feats)            # compile and import outside the measurement
    gc.collect()
    proc = psutil.Process()
    before = proc.memory_info().rss / 2 ** 20
    peak = [before]
    done = threading.Event()

    def sample() -> None:                      # RSS now and then: ru_maxrss would keep the imports' peak
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss / 2 ** 20)
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    times, digest = [], ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = run(pairs, feats)
        times.append(time.perf_counter() - t0)
        digest = hashlib.sha256(b"".join(
            c.to_numpy(zero_copy_only=False).tobytes() for c in result.columns)).hexdigest()
        del result
    done.set()
    sampler.join()
    peak = peak[0]
    print(json.dumps({"held_mb": before, "peak_mb": peak, "extra_mb": peak - before,
                      "best_s": min(times), "rows": digest}))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", required=True)
    p.add_argument("--docs", default="20000,60000")
    p.add_argument("--pairs-per-doc", type=float, default=2.0)
    p.add_argument("--chunks", default="0,4096", help="pairs per measures call; 0 = a group's pairs at once")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]), int(args.child[2]))
        return 0
    print("| docs | pairs | mean set size | features MB | pairs per call | held before MB | extra peak MB | best s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in [int(x) for x in args.docs.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            info = build_group(args.corpus, n, args.pairs_per_doc, args.seed, Path(tmp))
            results = {}
            for chunk in [int(x) for x in args.chunks.split(",")]:
                out = subprocess.run([sys.executable, "-m", "newsdedup_lab.bench_verify_memory", "--corpus",
                                      args.corpus, "--child", tmp, str(chunk), str(args.repeat)],
                                     check=True, capture_output=True, text=True)
                r = json.loads(out.stdout.strip().splitlines()[-1])
                results[chunk] = r
                print(f"| {info['docs']:,} | {info['pairs']:,} | {info['mean_set']:.0f} | {info['feats_mb']:.0f} | "
                      f"{'all' if chunk == 0 else f'{chunk:,}'} | {r['held_mb']:.0f} | {r['extra_mb']:.0f} | "
                      f"{r['best_s']:.2f} |", flush=True)
            if len({r["rows"] for r in results.values()}) != 1:
                raise SystemExit(f"variants disagree on the output: {results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
