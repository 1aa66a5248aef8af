"""Stage 3's verification features before and after issue 12, side by side in one process.

    python -m newsdedup_lab.bench_pair_features --sizes 20000

Per size: the synthetic corpus (`synth.generate(n, seed)`) as the documents table holds it (id,
the language prepare stored, title, body), then id, shingles, nums, names of every document:
- before: pair_features' former per-row loop (ContentKeys.columns, shingle_set, and the first
  definitions of numbers_of and names_of: translate the whole text, a lookbehind pattern);
- after: PairFeatures.batch, over Arrow batches of Spark's default 10,000 rows.
Both start with empty word caches and both results are compared value for value. Seconds are
the best of --repeats; a second table splits the after path into its parts.
"""

from __future__ import annotations

import argparse
import re
import time
from typing import Any, Callable

from .bench_set_kernel import timed   # best of n, with the word caches emptied before each run

BATCH_ROWS = 10_000     # spark.sql.execution.arrow.maxRecordsPerBatch's default
_BANGLA_DIGITS = str.maketrans("০১২৩৪৫৬৭৮৯", "0123456789")
_FIRST_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_FIRST_NAME = re.compile(r"(?<=[^\s.!?\n\"'])\s+([A-Z][\w'-]*[a-z][\w'-]*)")


def documents(n: int, seed: int, conf) -> "Any":
    """The corpus as a pyarrow Table of id, lang (as prepare detects it), title, body."""
    import pyarrow as pa

    from newsdedup.stages.content import ContentKeys
    from .synth import generate

    docs = generate(n, seed)[0]
    d = docs.select(["title", "body", "lang"]).to_pydict()
    langs = ContentKeys(conf.content, conf.input.max_text_chars).batch(
        d["title"], d["body"], [None] * n, d["lang"], [[] for _ in range(n)])["lang"]
    return pa.table({"id": docs.column("id"), "lang": pa.array(langs, pa.string()), "title": docs.column("title"),
                     "body": docs.column("body")})


def before(conf, docs) -> list[tuple]:
    """pair_features as it was: a Python row at a time, through the per-document functions."""
    from newsdedup.stages.content import ContentKeys
    from newsdedup.stages.simhash.reference import shingle_set

    keys = ContentKeys(conf.content, conf.input.max_text_chars)
    out = []
    for r in docs.to_pylist():
        key = keys.columns(r["title"], r["body"], None, r["lang"], [])["key"]
        spec = conf.simhash.language(r["lang"])
        out.append((r["id"], shingle_set(key, spec.set_features, spec.set_ngram).tolist(),
                    sorted(set(_FIRST_NUMBER.findall(key.translate(_BANGLA_DIGITS)))),
                    sorted(set(_FIRST_NAME.findall(key)))))
    return out


def after(conf, docs) -> list[tuple]:
    from newsdedup.stages.simhash.verify import PairFeatures

    features = PairFeatures(conf)
    return [features.batch(b) for b in docs.to_batches(max_chunksize=BATCH_ROWS)]


def as_rows(batches) -> list[tuple]:
    return [(r["id"], r["shingles"], r["nums"], r["names"]) for b in batches for r in b.to_pylist()]


def parts(conf, docs) -> dict[str, float]:
    """Seconds of each part of the after path over the whole corpus (warm word cache)."""
    from newsdedup.stages.content import ContentKeys
    from newsdedup.stages.simhash.kernels import shingle_sets
    from newsdedup.stages.simhash.reference import names_of, numbers_of
    from newsdedup.stages.simhash.verify import PairFeatures

    n = docs.num_rows
    d = docs.to_pydict()
    seconds: dict[str, float] = {}

    def timed_part(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        out = fn()
        seconds[name] = time.perf_counter() - t0
        return out

    content = ContentKeys(conf.content, conf.input.max_text_chars)
    keys = timed_part("content keys", lambda: content.batch(d["title"], d["body"], [None] * n, d["lang"],
                                                           [[] for _ in range(n)])["key"])
    kinds, ngrams = PairFeatures(conf).set_features(d["lang"])
    timed_part("shingle sets", lambda: shingle_sets([k.casefold() for k in keys], kinds, ngrams))
    timed_part("numbers", lambda: [numbers_of(k) for k in keys])
    timed_part("names", lambda: [names_of(k) for k in keys])
    return seconds


def main(argv: list[str] | None = None) -> None:
    from newsdedup.config import load_config

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20000])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    conf = load_config()
    after(conf, documents(200, args.seed + 1, conf))          # compile / load the numba kernels
    rows, split = [], []
    for n in args.sizes:
        docs = documents(n, args.seed, conf)
        t_before, out_before = timed(before, conf, docs, repeats=args.repeats)
        t_after, out_after = timed(after, conf, docs, repeats=args.repeats)
        if out_before != as_rows(out_after):
            raise SystemExit(f"{n} documents: the batch features differ from the per-row ones")
        rows.append((n, t_before, t_after))
        split.append((n, parts(conf, docs)))
    print("| docs | before s | before docs/s | after s | after docs/s | speed-up |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n, tb, ta in rows:
        print(f"| {n:,} | {tb:.2f} | {n / tb:,.0f} | {ta:.2f} | {n / ta:,.0f} | {tb / ta:.1f}x |")
    names = list(split[0][1])
    print("\n| docs | " + " | ".join(f"{p} s" for p in names) + " |")
    print("|---:|" + "---:|" * len(names))
    for n, seconds in split:
        print(f"| {n:,} | " + " | ".join(f"{seconds[p]:.2f}" for p in names) + " |")


if __name__ == "__main__":
    main()
