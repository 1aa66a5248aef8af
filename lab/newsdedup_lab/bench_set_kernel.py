"""Stage-3 key columns before and after the compiled set kernel, side by side (issue 12).

    python -m newsdedup_lab.bench_set_kernel --sizes 3000 20000

Per size: the synthetic corpus (`synth.generate(n, seed)`), title + body through
ContentKeys as `prepare` does, then the stage-3 columns of all documents in one call:
- before: the seed kernel (simhash.kernels.fingerprint_batch) and then simhash_w and
  mh_bands per document in Python (simhash.reference), as SimhashKeys.batch did before;
- after: SimhashKeys.batch (simhash.kernels.keys_batch, everything compiled).
Both start with empty word caches (the compiled WordCache and the Python lru_cache)
and both results are compared value for value. Seconds are the best of --repeats.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np


def corpus_keys(n: int, seed: int, conf) -> tuple[list[str], list[str | None], list[bool]]:
    from newsdedup.stages.content import ContentKeys
    from .synth import generate

    d = generate(n, seed)[0].to_pydict()
    c = ContentKeys(conf.content, conf.input.max_text_chars).batch(d["title"], d["body"], [None] * n, d["lang"],
                                                                   [[] for _ in range(n)])
    return c["key"], c["lang"], c["has_body"]


def before(sim_conf, keys, langs, has_body) -> dict[str, Any]:
    """The pre-issue-12 SimhashKeys.batch: compiled seed, then the set columns per document in Python."""
    from newsdedup.stages.simhash import kernels as kern
    from newsdedup.stages.simhash.reference import char_classes, set_columns

    n = len(keys)
    kinds = np.full(n, -1, dtype=np.int8)
    ngrams = np.zeros(n, dtype=np.int64)
    minimum = np.zeros(n, dtype=np.int64)
    for i, (lang, body) in enumerate(zip(langs, has_body)):
        if body:
            spec = sim_conf.language(lang)
            kinds[i] = kern.KIND_WORD if spec.features == "word" else kern.KIND_CHAR
            ngrams[i], minimum[i] = spec.ngram, spec.min_features
    folded = [k.casefold() if kinds[i] >= 0 else "" for i, k in enumerate(keys)]
    is_word, is_text = char_classes()
    fps, distinct, _ = kern.fingerprint_batch(*kern.code_points(folded), kinds, ngrams, is_word, is_text,
                                              *kern.word_cache().arrays())
    valid = (kinds >= 0) & (distinct >= minimum) & (distinct > 0)
    w: list[int | None] = [None] * n
    mh: list[list[int] | None] = [None] * n
    for i in np.flatnonzero(valid):
        spec = sim_conf.language(langs[i])
        _, w[i], mh[i] = set_columns(keys[i], spec.set_features, spec.set_ngram, sim_conf.minhash_bands,
                                     sim_conf.minhash_rows)
    return {"simhash": fps.view(np.int64), "simhash_valid": valid, "simhash_w": w, "mh_bands": mh}


def after(sim_conf, keys, langs, has_body) -> dict[str, Any]:
    from newsdedup.stages.simhash import SimhashKeys

    return SimhashKeys(sim_conf).batch(keys, langs, has_body)


def cold() -> None:
    from newsdedup.stages.simhash import kernels as kern
    from newsdedup.stages.simhash import reference

    kern.word_cache.cache_clear()
    reference.word_value.cache_clear()


def timed(fn, *args, repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        cold()
        t0 = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best, out


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    w_after = [int(v) if ok else None for v, ok in zip(b["simhash_w"], b["simhash_w_valid"])]
    return (np.array_equal(a["simhash_valid"], b["simhash_valid"])
            and np.array_equal(a["simhash"][a["simhash_valid"]], b["simhash"][b["simhash_valid"]])
            and a["simhash_w"] == w_after and a["mh_bands"] == b["mh_bands"])


def main(argv: list[str] | None = None) -> None:
    from newsdedup.config import load_config

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[3000, 20000])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    sim_conf = load_config().simhash
    warm = corpus_keys(200, args.seed + 1, load_config())
    before(sim_conf, *warm), after(sim_conf, *warm)          # compile / load the numba kernels
    rows = []
    for n in args.sizes:
        keys = corpus_keys(n, args.seed, load_config())
        t_before, out_before = timed(before, sim_conf, *keys, repeats=args.repeats)
        t_after, out_after = timed(after, sim_conf, *keys, repeats=args.repeats)
        if not same(out_before, out_after):
            raise SystemExit(f"{n} documents: the compiled columns differ from the Python ones")
        rows.append((n, int(out_after["simhash_w_valid"].sum()), t_before, t_after))
    print("| docs | with set columns | before s | before docs/s | after s | after docs/s | speed-up |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, with_sets, tb, ta in rows:
        print(f"| {n:,} | {with_sets:,} | {tb:.2f} | {n / tb:,.0f} | {ta:.2f} | {n / ta:,.0f} | {tb / ta:.1f}x |")


if __name__ == "__main__":
    main()
