"""Every stage's per-document keys, computed over Arrow batches.

Spark does what it does natively: it checks the raw bytes for valid UTF-8 and
decodes them, hashes the URL key (sha2) and cuts the SimHash bands. One Arrow
UDF per batch (`prepare_batch`) calls each stage's batch function in order:
`UrlKeys.batch`, `ContentKeys.batch`, `SimhashKeys.batch` (a compiled kernel).
The stored title and body never travel to Python and back: the UDF returns only
keys, plus a repaired text where the input was not valid UTF-8 (or the body
was extracted from html), and Spark keeps the original columns otherwise.

A row whose keys cannot be computed is kept with prepare_error set (it is
quarantined by the cascade); no single bad row fails the job: a batch that
raises is recomputed row by row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .io.input import TEXT_COLUMNS
from .stages.content import ContentKeys
from .stages.simhash import SimhashKeys, bands
from .stages.url import UrlKeys, url_hash

if TYPE_CHECKING:
    from .config import Config

PREPARED_SCHEMA = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("published_at", T.TimestampType(), True),
    T.StructField("source", T.StringType(), True),
    T.StructField("url", T.StringType(), True),
    T.StructField("canonical_url", T.StringType(), True),
    T.StructField("url_hash", T.StringType(), True),
    T.StructField("url_error", T.StringType(), True),
    T.StructField("title", T.StringType(), True),
    T.StructField("body", T.StringType(), True),
    T.StructField("lang", T.StringType(), True),
    T.StructField("lang_detected", T.BooleanType(), True),
    T.StructField("content_hash", T.StringType(), True),
    T.StructField("text_chars", T.IntegerType(), True),
    T.StructField("simhash", T.LongType(), True),
    T.StructField("n_features", T.IntegerType(), True),
    T.StructField("band_0", T.IntegerType(), True),
    T.StructField("band_1", T.IntegerType(), True),
    T.StructField("band_2", T.IntegerType(), True),
    T.StructField("band_3", T.IntegerType(), True),
    T.StructField("simhash_w", T.LongType(), True),                      # stage 3 (issue 11)
    T.StructField("mh_bands", T.ArrayType(T.LongType()), True),
    T.StructField("flags", T.ArrayType(T.StringType()), True),
    T.StructField("prepare_error", T.StringType(), True),
    # Stage 3's verification features (SimhashKeys.VERIFY_FIELDS), for this run's stage 3 only:
    # the cascade splits them off before anything becomes a documents row.
    T.StructField("shingles", T.BinaryType(), True),
    T.StructField("nums", T.ArrayType(T.StringType()), True),
    T.StructField("names", T.ArrayType(T.StringType()), True),
])
# The prepared columns that are not documents columns.
VERIFY_COLUMNS = tuple(name for name, _ in SimhashKeys.VERIFY_FIELDS)

# Text columns the UDF may return repaired (invalid UTF-8, or a body extracted from html).
REPAIRED = ("url", "title", "body", "source")
_ARROW_TYPES = {"string": pa.string(), "binary": pa.binary(), "int": pa.int32(), "bigint": pa.int64(), "boolean": pa.bool_(),
                "array<string>": pa.list_(pa.string()), "array<bigint>": pa.list_(pa.int64())}


def percent_escape_invalid_utf8(raw: bytes) -> str:
    """Decode a URL, writing bytes that are not UTF-8 as %XX escapes.

    Unlike U+FFFD replacement this loses nothing: two URLs that differ only in
    their undecodable bytes stay different, so stage 1 cannot merge them.
    """
    text = raw.decode("utf-8", errors="surrogateescape")
    return "".join(f"%{ord(ch) - 0xDC00:02X}" if "\udc80" <= ch <= "\udcff" else ch for ch in text)


def _replace_invalid(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


class Keys:
    """The stages' batch functions, built once per Python worker task."""

    def __init__(self, conf: "Config"):
        self.url = UrlKeys(conf.url)
        self.content = ContentKeys(conf.content, conf.input.max_text_chars)
        self.simhash = SimhashKeys(conf.simhash)

    def fields(self) -> list[tuple[str, str]]:
        return [*[(f"{c}_fixed", "string") for c in REPAIRED], *UrlKeys.FIELDS, *ContentKeys.FIELDS,
                *SimhashKeys.FIELDS, ("flags", "array<string>"), ("prepare_error", "string"),
                *SimhashKeys.VERIFY_FIELDS]

    def batch(self, cols: dict[str, list], n: int) -> dict[str, Any]:
        """cols: the UDF's inputs as Python lists (text as str, invalid text as raw bytes in <name>_raw)."""
        flags: list[list[str]] = [[] for _ in range(n)]
        text: dict[str, list] = {}
        out: dict[str, Any] = {}
        for c in TEXT_COLUMNS:     # flags keep this order: url, title, body, html, source, lang
            repair = percent_escape_invalid_utf8 if c == "url" else _replace_invalid
            values, fixed = list(cols[c]), [None] * n
            for i, raw in enumerate(cols[f"{c}_raw"]):
                if raw is not None:
                    values[i] = fixed[i] = repair(raw)
                    flags[i].append(f"invalid_utf8:{c}")
            text[c] = values
            if c in REPAIRED:
                out[f"{c}_fixed"] = fixed
        for i, ts_flag in enumerate(cols["published_at_flag"]):
            if ts_flag is not None:
                # Unreadable or implausible dates keep the document (ordered last); the raw value lives on in the flag.
                flags[i].append(ts_flag)

        out.update(self.url.batch(text["url"], text["source"]))
        content = self.content.batch(text["title"], text["body"], text["html"], text["lang"], flags)
        out["body_fixed"] = [h if h is not None else f for h, f in zip(content.pop("body_from_html"),
                                                                      out["body_fixed"])]
        keys, has_body = content.pop("key"), content.pop("has_body")
        out.update(content)
        out.update(self.simhash.batch(keys, out["lang"], has_body, verify=True))
        out["flags"] = flags
        out["prepare_error"] = [None] * n
        return out

    def failed(self, exc: Exception) -> dict[str, Any]:
        out: dict[str, Any] = {name: [None] for name, _ in self.fields()}
        out.update(flags=[[]], prepare_error=[f"{type(exc).__name__}: {exc}"[:1000]])
        return out


class Preparer:
    """Documents held in Python, for live lookups and tools (`newsdedup check`): the same stage
    batch functions as the Spark pass (one compiled kernel call per list), with the hashes and
    bands the Spark pass computes in Spark."""

    def __init__(self, conf: "Config"):
        self.url = UrlKeys(conf.url)
        self.content = ContentKeys(conf.content, conf.input.max_text_chars)
        self.simhash = SimhashKeys(conf.simhash)

    @staticmethod
    def _decoded(r: dict[str, Any], flags: list[str]) -> dict[str, str | None]:
        def text(name: str, repair=_replace_invalid) -> str | None:
            value = r.get(name)
            if value is None or isinstance(value, str):
                return value
            try:
                return bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                flags.append(f"invalid_utf8:{name}")
                return repair(bytes(value))

        return {"url": text("url", percent_escape_invalid_utf8), "title": text("title"), "body": text("body"),
                "html": text("html"), "source": text("source"), "lang": text("lang")}

    def rows(self, rs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """rs: the input columns (text as str or raw bytes), published_at as a datetime or None.
        Each result holds prepare's columns, plus content_key (the normalised text stages 3 and
        4 start from; not stored) and, where simhash_w is set, set_shingles: the sorted distinct
        shingle set simhash_w and mh_bands were computed from (stage 3 verifies on it; not stored)."""
        flags: list[list[str]] = [[] for _ in rs]
        texts = [self._decoded(r, fl) for r, fl in zip(rs, flags)]
        for r, fl in zip(rs, flags):
            if r.get("published_at") is None:
                raw_ts = str(r.get("raw_published_at") or "").strip()
                fl.append(f"unparseable_published_at:{raw_ts[:64]}" if raw_ts else "no_published_at")
        urls = self.url.batch([t["url"] for t in texts], [t["source"] for t in texts])
        content = self.content.batch([t["title"] for t in texts], [t["body"] for t in texts],
                                     [t["html"] for t in texts], [t["lang"] for t in texts], flags)
        sim = self.simhash.batch(content["key"], content["lang"], content["has_body"])
        n_bands = self.simhash.conf.bands
        out = []
        for i, (r, t) in enumerate(zip(rs, texts)):
            fp = int(sim["simhash"][i]) if sim["simhash_valid"][i] else None
            key = urls["url_key"][i]
            row: dict[str, Any] = {
                "id": int(r["id"]), "published_at": r.get("published_at"), "source": t["source"], "url": t["url"],
                "title": t["title"], "flags": flags[i], "canonical_url": urls["canonical_url"][i],
                "url_hash": url_hash(key) if key is not None else None,
                "url_error": urls["url_error"][i], "body": content["body_from_html"][i] or t["body"],
                **{c: content[c][i] for c in ("content_hash", "text_chars", "lang", "lang_detected")},
                "content_key": content["key"][i], "simhash": fp, "n_features": int(sim["n_features"][i]),
                "simhash_w": int(sim["simhash_w"][i]) if sim["simhash_w_valid"][i] else None,
                "mh_bands": sim["mh_bands"][i],
                "set_shingles": (sim["set_values"][sim["set_offsets"][i]:sim["set_offsets"][i + 1]]
                                 if sim["simhash_w_valid"][i] else None)}
            for b, value in enumerate(bands(fp, n_bands) if fp is not None else [None] * n_bands):
                row[f"band_{b}"] = value
            out.append(row)
        return out

    def row(self, r: dict[str, Any]) -> dict[str, Any]:
        """One document: `rows` of one."""
        return self.rows([r])[0]


def _arrow(name: str, kind: str, values: Any, out: dict[str, Any]) -> pa.Array:
    if isinstance(values, pa.Array):
        return values
    if kind.startswith("array<"):
        return pa.array(values, type=_ARROW_TYPES[kind])
    if isinstance(values, np.ndarray):
        valid = out.get(f"{name}_valid")
        return pa.array(values, type=_ARROW_TYPES[kind], mask=None if valid is None else ~np.asarray(valid))
    return pa.array(values, type=_ARROW_TYPES[kind])


def _concat(parts: Sequence[dict[str, Any]], fields: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Row-by-row results (lists or arrays of one) as one batch of lists."""
    merged: dict[str, Any] = {}
    for name, _ in fields:
        merged[name] = [_py(part[name][0]) if bool(part.get(f"{name}_valid", [True])[0]) else None
                        for part in parts]
    return merged


def _py(value: Any) -> Any:
    if isinstance(value, pa.Scalar):
        return value.as_py()
    return value.item() if isinstance(value, np.generic) else value


def prepare_batch(keys: Keys, arrays: Sequence[pa.Array], names: Sequence[str]) -> pa.StructArray:
    cols = {name: arr.to_pylist() for name, arr in zip(names, arrays)}
    n = len(arrays[0])
    fields = keys.fields()
    try:
        out = keys.batch(cols, n)
    except Exception:  # find the row(s) that fail; the others keep their keys
        parts = []
        for i in range(n):
            try:
                parts.append(keys.batch({k: v[i:i + 1] for k, v in cols.items()}, 1))
            except Exception as exc:  # quarantined downstream, with the reason
                parts.append(keys.failed(exc))
        out = _concat(parts, fields)
    return pa.StructArray.from_arrays([_arrow(name, kind, out[name], out) for name, kind in fields],
                                      names=[name for name, _ in fields])


def _udf_inputs(df: DataFrame) -> dict[str, Column]:
    """Decoded text where the bytes are valid UTF-8, the raw bytes (for Python to repair) where not."""
    cols: dict[str, Column] = {}
    for c in TEXT_COLUMNS:
        valid = F.is_valid_utf8(F.col(c).cast("string"))
        cols[c] = F.when(valid, F.col(c).cast("string"))
        cols[f"{c}_raw"] = F.when(~valid, F.col(c))
    # io.input.conform judged the date in Spark (unparseable, implausible or missing); the flag is its verdict.
    cols["published_at_flag"] = (F.col("published_at_flag") if "published_at_flag" in df.columns
                                 else F.when(F.col("published_at").isNull(), F.lit("no_published_at")))
    return cols


def fingerprint(df: DataFrame, conf: "Config") -> DataFrame:
    """URL/content/SimHash keys for every row: one Arrow UDF over batches, the rest in Spark."""
    inputs = _udf_inputs(df)
    names = list(inputs)
    fields = Keys(conf).fields()
    state: dict[str, Keys] = {}

    def keys_udf(*arrays: pa.Array) -> pa.Array:
        if "keys" not in state:
            state["keys"] = Keys(conf)
        return prepare_batch(state["keys"], arrays, names)

    ddl = ", ".join(f"{name} {kind}" for name, kind in fields)
    udf = F.arrow_udf(keys_udf, returnType=ddl)
    k = F.col("_k")
    keyed = df.withColumn("_k", udf(*inputs.values()))
    simhash = SimhashKeys(conf.simhash)
    url_cols = UrlKeys.spark_columns(k["url_key"])
    band_cols = simhash.spark_columns(k["simhash"])
    fixed = {c: F.coalesce(k[f"{c}_fixed"], F.col(c).cast("string")) for c in REPAIRED}
    by_name: dict[str, Column] = {
        "id": F.col("id"), "published_at": F.col("published_at"), **fixed, **url_cols, **band_cols,
        **{name: k[name] for name, _ in fields if name not in {f"{c}_fixed" for c in REPAIRED}},
    }
    return keyed.select(*[by_name[f.name].cast(f.dataType).alias(f.name) for f in PREPARED_SCHEMA.fields])
