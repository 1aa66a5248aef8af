"""Stage 3's per-document keys: `SimhashKeys`, whose `batch` is the function `prepare` calls
once per Arrow batch, and the band columns it cuts in Spark.

Every value is computed by the compiled kernels (kernels.keys_batch), exactly
what reference.py defines one document at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from . import kernels
from .reference import bands, char_classes, minhash_salts

if TYPE_CHECKING:
    from ...config import SimhashConfig

# What stage 3 needs on the unresolved rows besides id and lang.
STAGE_COLUMNS = ("simhash_w", "mh_bands")


class SimhashKeys:
    """Stage-3 columns for a batch of documents: the seed's simhash and n_features (bands are
    derived in Spark, bit-identical to `reference.bands`), plus simhash_w (SimHash of the distinct
    shingle set) and mh_bands (MinHash LSH band hashes) that stage 3 joins on.

    `batch` is what `prepare` calls once per Arrow batch; it runs the compiled
    kernel (kernels.keys_batch) over all texts at once for every column.
    """

    FIELDS = (("simhash", "bigint"), ("n_features", "int"), ("simhash_w", "bigint"), ("mh_bands", "array<bigint>"))
    # The verification features of the documents stage 3 can pair (those with simhash_w): the
    # kernel has the shingle set at hand, and stage 3 would otherwise derive the content key again.
    # Carried from prepare to stage 3 in the prepared frame (prepare.VERIFY_COLUMNS), never stored on
    # the documents table: the shingle set as little-endian int32 bytes (as verify.Features.shingle_bytes
    # packs one document's), numbers, names.
    VERIFY_FIELDS = (("shingles", "binary"), ("nums", "array<string>"), ("names", "array<string>"))

    def __init__(self, sim_conf: "SimhashConfig"):
        self.conf = sim_conf

    def batch(self, keys: Sequence[str], langs: Sequence[str | None],
              has_body: Sequence[bool], verify: bool = False) -> dict[str, Any]:
        """keys: normalised texts (content_key). Returns simhash (int64, valid where n_features suffice)
        and simhash_w (int64) as masked pairs, n_features, and mh_bands (a list of n_bands ints, or None):
        {"simhash", "simhash_valid", "n_features", "simhash_w", "simhash_w_valid", "mh_bands"}.
        Documents too short for the seed fingerprint stay out of stage 3 altogether (no set columns).
        Also set_offsets, set_values: document i's shingle set is set_values[set_offsets[i]:set_offsets[i + 1]]
        (empty where simhash_w is not valid).
        verify: also VERIFY_FIELDS, null where simhash_w is: shingles (a pyarrow binary array) and
        nums, names (lists), the values verify.PairFeatures gives for the same key and lang; and
        mh_bands as a pyarrow list array (prepare's UDF returns Arrow) instead of Python lists."""
        n = len(keys)
        kinds = np.full(n, -1, dtype=np.int8)
        set_kinds = np.full(n, -1, dtype=np.int8)
        ngrams = np.zeros(n, dtype=np.int64)
        set_ngrams = np.zeros(n, dtype=np.int64)
        minimum = np.zeros(n, dtype=np.int64)
        for i, (lang, body) in enumerate(zip(langs, has_body)):
            if body:
                spec = self.conf.language(lang)
                kinds[i], set_kinds[i] = kernels.KIND_CODES[spec.features], kernels.KIND_CODES[spec.set_features]
                ngrams[i], set_ngrams[i], minimum[i] = spec.ngram, spec.set_ngram, spec.min_features
        folded = [k.casefold() if kinds[i] >= 0 else "" for i, k in enumerate(keys)]
        is_word, is_text = char_classes()
        n_bands, rows = self.conf.minhash_bands, self.conf.minhash_rows
        seed, n_features, seed_valid, simhash_w, simhash_w_valid, mh_bands, set_offsets, set_values = kernels.keys_batch(
            *kernels.code_points(folded), kinds, ngrams, minimum, set_kinds, set_ngrams,
            minhash_salts(n_bands * rows), n_bands, rows, is_word, is_text, *kernels.word_cache().arrays())
        if verify:
            # Straight into Arrow for prepare's UDF: a list of ints per document and back cost more
            # than the MinHash itself.
            bands_or_none = pa.ListArray.from_arrays(
                pa.array(np.arange(0, n * n_bands + 1, n_bands, dtype=np.int32)),
                pa.array(np.ascontiguousarray(mh_bands).view(np.int64).reshape(-1)),
                mask=pa.array(~np.asarray(simhash_w_valid, np.bool_)))
        else:
            bands_or_none = [row if ok else None
                             for row, ok in zip(mh_bands.view(np.int64).tolist(), simhash_w_valid)]
        out = {"simhash": seed.view(np.int64), "simhash_valid": seed_valid,
               "n_features": n_features.astype(np.int32),
               "simhash_w": simhash_w.view(np.int64), "simhash_w_valid": simhash_w_valid, "mh_bands": bands_or_none,
               # The shingle sets behind simhash_w (stage 3's verification set, kernels.keys_batch), as offsets
               # and int32 values: not a column, but the live lookup need not compute them a second time.
               "set_offsets": set_offsets, "set_values": set_values.view(np.int32)}
        if verify:
            out.update(verify_features(keys, set_offsets, set_values, simhash_w_valid))
        return out

    def columns(self, key: str, lang: str | None, has_body: bool) -> dict[str, Any]:
        """One document (tests, tools): simhash (None below min_features), n_features, band_0..,
        simhash_w, mh_bands."""
        out = self.batch([key], [lang], [has_body])
        fp = int(out["simhash"][0]) if out["simhash_valid"][0] else None
        cols: dict[str, Any] = {"simhash": fp, "n_features": int(out["n_features"][0])}
        for i, b in enumerate(bands(fp, self.conf.bands) if fp is not None else [None] * self.conf.bands):
            cols[f"band_{i}"] = b
        cols["simhash_w"] = int(out["simhash_w"][0]) if out["simhash_w_valid"][0] else None
        cols["mh_bands"] = out["mh_bands"][0]
        return cols

    def spark_columns(self, simhash: Column) -> dict[str, Column]:
        """The band columns, computed in Spark from the fingerprint (same values as `reference.bands`)."""
        width = 64 // self.conf.bands
        mask = (1 << width) - 1
        return {f"band_{i}": F.shiftrightunsigned(simhash, width * i).bitwiseAND(mask).cast("int")
                for i in range(self.conf.bands)}


def verify_features(keys: Sequence[str], offsets: np.ndarray, shingles: np.ndarray,
                    valid: np.ndarray) -> dict[str, Any]:
    """VERIFY_FIELDS of a batch from keys_batch's shingle sets (empty where a document has none).

    keys_batch computes the set exactly as verify's shingle_sets does (same features, same sort), so
    the bytes are the set stage 3 would derive. Built over the kernel's buffer without a copy per
    document; int32 little-endian, as Postgres' documents.shingles holds it."""
    n = len(keys)
    validity = pa.array(np.asarray(valid, np.bool_)).buffers()[1] if not np.all(valid) else None
    byte_offsets = (np.asarray(offsets, np.int64) * 4).astype(np.int32)
    data = np.ascontiguousarray(shingles).view(np.int32).astype("<i4", copy=False)   # the bits, as they are
    binary = pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(byte_offsets), pa.py_buffer(data)],
                                   null_count=-1)
    # Documents without a set get no evidence either: they are scanned as empty texts.
    nums, names = kernels.numbers_and_names([k if ok else "" for k, ok in zip(keys, valid)])
    return {"shingles": binary,
            "nums": [v if ok else None for v, ok in zip(nums, valid)],
            "names": [v if ok else None for v, ok in zip(names, valid)]}
