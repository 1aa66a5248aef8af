"""prepare's per-batch key pass before and after a change, side by side on the same batches (issue 12).

    python -m newsdedup_lab.bench_prepare --baseline main --docs 20000 [--spark 200000]

The baseline is another revision of this repository: its lib/ is exported with
`git archive` and this file runs once per side in a fresh interpreter, with
PYTHONPATH set to that side's lib. Both sides build the same Arrow batches from
`synth.generate(docs, seed)` (shaped as prepare's UDF receives them: text
columns, their null *_raw twins, published_at_flag) and report, best of
--repeats after one warm-up pass, in CPU seconds:
- Keys.batch: the stages' key functions on the batch's Python lists;
- prepare_batch: the whole UDF body (to_pylist of the inputs, keys, Arrow output).
The two sides' outputs are compared value for value; any difference fails the run.

--spark N also times `prepare.fingerprint` in Spark over the synthetic corpus of
N documents (read, conform, keys; noop sink), one warm-up and --repeats timed
runs per side, each side in its own Spark session (wall seconds: Spark runs in
several processes).
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
from typing import Any

REPO = Path(__file__).resolve().parents[2]   # lab/newsdedup_lab/<this file>


def udf_batches(n: int, seed: int, size: int) -> tuple[list[list[Any]], list[str]]:
    """synth.generate(n, seed) cut into batches of `size` rows, with the columns of prepare's UDF."""
    import pyarrow as pa

    from newsdedup.io.input import TEXT_COLUMNS
    from newsdedup_lab.synth import generate

    docs = generate(n, seed)[0]
    cols: dict[str, Any] = {}
    for c in TEXT_COLUMNS:
        cols[c] = docs.column(c).combine_chunks() if c in docs.column_names else pa.nulls(n, pa.string())
        cols[f"{c}_raw"] = pa.nulls(n, pa.binary())
    cols["published_at_flag"] = pa.nulls(n, pa.string())
    names = list(cols)
    return [[a.slice(i, size) for a in cols.values()] for i in range(0, n, size)], names


def best_of(repeats: int, fn, clock=time.perf_counter) -> float:
    fn()                                    # warm-up: compiled kernels loaded, word cache filled
    best = float("inf")
    for _ in range(repeats):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def in_process(n: int, seed: int, size: int, repeats: int, out_dir: Path) -> dict[str, float]:
    """Seconds for Keys.batch and prepare_batch over all batches; the outputs go to out_dir/keys.arrow."""
    import pyarrow as pa

    from newsdedup.config import load_config
    from newsdedup.prepare import Keys, prepare_batch

    batches, names = udf_batches(n, seed, size)
    keys = Keys(load_config())
    lists = [{name: arr.to_pylist() for name, arr in zip(names, b)} for b in batches]
    # CPU seconds of this (single-threaded) process: what other work on a shared machine disturbs least.
    keys_s = best_of(repeats, lambda: [keys.batch(cols, len(b[0])) for cols, b in zip(lists, batches)],
                     time.process_time)
    prepare_s = best_of(repeats, lambda: [prepare_batch(keys, b, names) for b in batches], time.process_time)
    out = pa.Table.from_batches([pa.RecordBatch.from_struct_array(prepare_batch(keys, b, names)) for b in batches])
    with pa.OSFile(str(out_dir / "keys.arrow"), "wb") as f, pa.ipc.new_file(f, out.schema) as w:
        w.write_table(out)
    return {"keys_batch_s": keys_s, "prepare_batch_s": prepare_s}


def spark_noop(n: int, seed: int, repeats: int, root: Path) -> dict[str, float]:
    """Seconds for fingerprint over the corpus of n documents into a noop sink (best of repeats)."""
    from newsdedup import prepare
    from newsdedup.config import load_config
    from newsdedup.io.input import conform, read_input
    from newsdedup.io.spark import get_spark
    from newsdedup_lab.bench import corpus

    conf = load_config()
    spark = get_spark(conf, "bench-prepare")
    df = conform(read_input(spark, str(corpus(n, seed, root))), conf.input.naive_timezone)
    keyed = prepare.fingerprint(df, conf)
    secs = best_of(repeats, lambda: keyed.write.format("noop").mode("overwrite").save())
    spark.stop()
    return {"spark_noop_s": secs}


def side(args: argparse.Namespace) -> None:
    """One side's measurements, as JSON in --out/times.json."""
    import newsdedup

    out = Path(args.out)
    times: dict[str, Any] = {"lib": str(Path(newsdedup.__file__).parents[1])}
    times.update(in_process(args.docs, args.seed, args.batch, args.repeats, out))
    if args.spark:
        times.update(spark_noop(args.spark, args.seed, args.repeats, Path(args.corpus_root)))
    (out / "times.json").write_text(json.dumps(times))


def export(rev: str, into: Path) -> Path:
    """lib/ of revision rev (and conf/, which its default.yaml links to), extracted under into."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "lib", "conf"], check=True,
                             capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "lib"


def run_side(lib: Path, out: Path, argv: list[str]) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    # That side's lib, and this checkout's lab (the corpus generator and this script).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(lib), str(REPO / "lab")])}
    subprocess.run([sys.executable, __file__, "--side", "--out", str(out), *argv], env=env, check=True)
    return json.loads((out / "times.json").read_text())


def same_outputs(a: Path, b: Path) -> bool:
    import pyarrow as pa

    def read(p: Path) -> pa.Table:
        with pa.memory_map(str(p / "keys.arrow")) as f:
            return pa.ipc.open_file(f).read_all()

    return read(a).equals(read(b))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", default="main", help="git revision to compare with (default: main)")
    p.add_argument("--docs", type=int, default=20000)
    p.add_argument("--batch", type=int, default=10000, help="rows per Arrow batch (Spark's default)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--spark", type=int, default=0, help="documents for the Spark noop pass (0: skip it)")
    p.add_argument("--corpus-root", default=os.path.join(tempfile.gettempdir(), "newsdedup-bench"))
    p.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.side:
        return side(args)
    passed = ["--docs", str(args.docs), "--batch", str(args.batch), "--seed", str(args.seed),
              "--repeats", str(args.repeats), "--spark", str(args.spark), "--corpus-root", args.corpus_root]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        before = run_side(export(args.baseline, work), work / "before", passed)
        after = run_side(REPO / "lib", work / "after", passed)
        identical = same_outputs(work / "before", work / "after")
    print(f"{args.docs} documents in batches of {args.batch}, best of {args.repeats}; "
          f"before: {args.baseline} ({before['lib']}), after: {after['lib']}")
    print(f"{'':16}{'before s':>10}{'after s':>10}{'before docs/s':>15}{'after docs/s':>14}{'speed-up':>10}")
    for key, label, docs in (("keys_batch_s", "Keys.batch", args.docs), ("prepare_batch_s", "prepare_batch", args.docs),
                             ("spark_noop_s", "Spark noop", args.spark)):
        if key in before:
            b, a = before[key], after[key]
            print(f"{label:16}{b:10.2f}{a:10.2f}{docs / b:15,.0f}{docs / a:14,.0f}{b / a:10.2f}")
    print("outputs identical" if identical else "OUTPUTS DIFFER")
    if not identical:
        sys.exit(1)


if __name__ == "__main__":
    main()
