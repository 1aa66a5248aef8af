"""Stage 3: near-duplicates by SimHash and MinHash candidates, verified on exact shingle sets.

Read this first. docs/stage3.md has the design and the candidate arithmetic.

What stage 3 does
-----------------
1. Keys (in `prepare`, once per document, stored on the documents row): each
   document's normalised text (content_key) becomes a set of shingles (the
   language's set_features / set_ngram: word 3-shingles for every language today),
   hashed to 32 bits, kept distinct and sorted. From that set come a set SimHash
   (`simhash_w`) and MinHash band hashes (`mh_bands`). The older seed fingerprint (`simhash`, with `n_features`
   and `band_<i>`) is still computed, bit-identical; nothing reads it any more.
2. Candidates (Spark): two documents of the same language are a candidate pair
   when their simhash_w agree on the key bits of one Manku table (so they may be
   within max_hamming bits) or when they share a MinHash band (so their Jaccard
   is likely high). One shuffle, one compiled scan over sorted buckets; a bucket
   over simhash.max_band_bucket members is split into chunks and its members
   are flagged `simhash_bucket_split:tables` or `simhash_bucket_split:minhash`.
3. Verification (Spark): each pair is judged on the two documents' exact
   shingle sets (Jaccard or containment), and rejected when its numbers or
   names disagree (templated reports of different games); thresholds per
   language (conf simhash.languages).
4. Clustering (clustering.py): connected components of the verified pairs;
   each duplicate links to its component's canonical, scored by their Jaccard.

Module map (each module imports only modules above it; tests/test_imports.py checks)
-------------------------------------------------------------------------------------
- reference.py   per-document definitions in numpy / pure Python: features, the seed
                 SimHash and its bands, shingle sets, the set SimHash, MinHash bands,
                 numbers and names. The readable spec; no Spark, no numba.
- kernels.py     the same values compiled (numba) for a whole Arrow batch: BLAKE2b word
                 values with a per-worker word cache, `keys_batch` (every stored column)
                 and `shingle_sets` (verification).
- keys.py        `SimhashKeys`, the per-batch function `prepare` calls (FIELDS,
                 `spark_columns` for the bands), and STAGE_COLUMNS.
- candidates.py  candidate pairs (Spark + a compiled bucket scan): Manku tables on
                 simhash_w and MinHash bands, split buckets, per-language expressions.
- verify.py      verification (Spark + compiled set intersections): pair features,
                 measures, per-language thresholds.
- live.py        `SimhashLookup`, the same candidate rule, verification and canonical rule for
                 articles checked against Postgres (`newsdedup check`), and the stage's
                 Postgres columns (sim_buckets, shingles, nums, names).
- step.py        `SimhashStage`, the cascade's stage (`run(ctx, unresolved) -> StageResult`),
                 and its report counters.

reference imports no other module of the package, kernels only reference; neither imports
Spark. keys, candidates, verify, live and step import pyspark at their top (no function-level
imports anywhere in the package). Importing this package itself is cheap:
its names below are loaded on first use (`__getattr__`), so `import
newsdedup.stages.simhash` pulls in neither Spark nor numba.

Stored columns (the documents Delta table; Postgres holds simhash_w and mh_bands too, with
the live lookup's own columns: live.py)
-----------------------------------------------------------------------------------
Their names and values are fixed (bit-identical from release to release).

- simhash     bigint. The seed fingerprint: a signed 64-bit SimHash over every feature
              occurrence of the language's `features` / `ngram` (English word 3-shingles,
              Bangla character 4-grams; a repeated feature votes once per occurrence),
              `reference.seed_simhash`. Null without a body or with fewer than the language's
              min_features distinct features. Neither stage 3 nor `newsdedup check` reads it
              any more (kept, bit-identical, for the tables and tools that have it).
- n_features  int. Distinct seed features of the text (`reference.distinct_count`); 0 without
              a body.
- band_<i>    int, i = 0 .. simhash.bands - 1. Bits [w i, w i + w) of simhash, w = 64 / bands
              (16), as an unsigned value (`reference.bands`, cut in Spark by
              `SimhashKeys.spark_columns`); null where simhash is.
- simhash_w   bigint. The set SimHash stage 3 buckets on (Manku tables): each distinct 32-bit
              hash of the language's `set_features` / `set_ngram` (word 3-shingles) votes once
              (`reference.set_simhash`). Null where simhash is, or when the set is empty. Unlike
              simhash, no term-frequency weight: a shingle repeated ten times votes once.
- mh_bands    array<bigint> of simhash.minhash_bands values: band b is the hash of the band
              index b + 1 and rows b*r .. b*r + r - 1 (r = minhash_rows) of the MinHash
              signature of the same shingle set (`reference.minhash_bands`). Null exactly where
              simhash_w is.
stage 3 also writes its links (stage "simhash", score = Jaccard of the shingle sets)
and the flag `simhash_bucket_split:<tables|minhash>` on the documents it split.

Internal columns (not stored): candidate pairs carry a, b (ids, a < b), lang,
found_by (candidates.TABLES = 0 or candidates.MINHASH = 1: which search found the
pair) and distance (Hamming distance of their simhash_w); the compiled scan knows a
language by lang_code, its index in candidates.language_codes. Verification
features carry id, shingles (the sorted shingle set), nums and names.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .keys import STAGE_COLUMNS, SimhashKeys
    from .reference import bands, hamming
    from .step import SimhashStage

_EXPORTS = {"SimhashStage": "step", "SimhashKeys": "keys", "STAGE_COLUMNS": "keys",
            "bands": "reference", "hamming": "reference"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """The public names, imported from their module on first use (keeps this package's import cheap)."""
    if name in _EXPORTS:
        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
