"""Reading, validating and fingerprinting the input snapshot.

Every input row ends up either in the prepared documents or in quarantine,
with a reason; nothing is dropped silently and no single bad row fails the job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import simhash as sh
from . import text as tx
from . import urls

REQUIRED = ("id", "url", "published_at", "source")
TEXT_COLUMNS = ("url", "title", "body", "html", "source", "lang")
FAR_FUTURE = "9999-12-31 00:00:00"


class InputSchemaError(ValueError):
    """The input is missing columns the job cannot run without."""


def read_input(spark: SparkSession, path: str) -> DataFrame:
    p = Path(path)
    if (p / "_delta_log").is_dir() or path.startswith("delta:"):
        return spark.read.format("delta").load(path.removeprefix("delta:"))
    return spark.read.parquet(path)


def check_columns(df: DataFrame) -> None:
    cols = {c.lower() for c in df.columns}
    missing = [c for c in REQUIRED if c not in cols]
    if "body" not in cols and "html" not in cols:
        missing.append("body or html")
    if missing:
        raise InputSchemaError(
            f"input is missing required column(s): {', '.join(missing)}; "
            f"expected id bigint, url string, title string, body string (or html string), "
            f"published_at timestamp, source string, lang string (nullable); found: {', '.join(df.columns)}")


def _as_utc_timestamp(df: DataFrame, naive_tz: str) -> Column:
    dtype = df.schema["published_at"].dataType
    col = F.col("published_at")
    if isinstance(dtype, T.TimestampNTZType):
        return F.to_utc_timestamp(col.cast("timestamp"), naive_tz)
    if isinstance(dtype, T.StringType):
        # Strings with an offset parse as instants; bare ones are read in naive_tz.
        # try_to_timestamp: an unparseable string becomes null (flagged later), not a failed job.
        has_zone = col.rlike(r"(Z|[+-]\d{2}:?\d{2})$")
        return F.when(has_zone, F.try_to_timestamp(col)).otherwise(
            F.to_utc_timestamp(F.try_to_timestamp(col), naive_tz))
    if isinstance(dtype, (T.DateType, T.TimestampType)):
        return col.cast("timestamp")
    if isinstance(dtype, (T.LongType, T.IntegerType)):
        return F.timestamp_seconds(col)
    raise InputSchemaError(f"published_at has unsupported type {dtype.simpleString()}")


def conform(df: DataFrame, conf: Mapping[str, Any]) -> DataFrame:
    """Cast the input to the internal shape: typed id/timestamp, text columns as raw bytes.

    Text travels to Python as binary so that invalid UTF-8 is repaired per row
    (errors='replace') instead of failing an Arrow batch.
    """
    check_columns(df)
    df = df.toDF(*[c.lower() for c in df.columns])
    out = [
        F.col("id").cast("string").alias("raw_id"),
        F.col("id").try_cast("bigint").alias("id"),  # "12a" -> null -> quarantined, not a crash
        _as_utc_timestamp(df, conf["input"]["naive_timezone"]).alias("published_at"),
        F.col("published_at").cast("string").alias("raw_published_at"),
    ]
    for c in TEXT_COLUMNS:
        if c in df.columns:
            out.append(F.col(c).cast("binary").alias(c))
        else:
            out.append(F.lit(None).cast("binary").alias(c))
    return df.select(*out)


def split_invalid(df: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Separate rows that cannot be documents (no usable id, repeated id) from the rest."""
    reason = (F.when(F.col("raw_id").isNull(), F.lit("id is null"))
              .when(F.col("id").isNull(), F.lit("id is not an integer")))
    flagged = df.withColumn("quarantine_reason", reason)
    bad = flagged.where(F.col("quarantine_reason").isNotNull())
    good = flagged.where(F.col("quarantine_reason").isNull())
    # Repeated ids: keep the earliest copy (then the smallest url, deterministic), quarantine the rest.
    w = Window.partitionBy("id").orderBy(F.col("published_at").asc_nulls_last(), F.col("url"), F.col("body"))
    ranked = good.withColumn("_copy", F.row_number().over(w))
    dup = (ranked.where("_copy > 1").drop("_copy")
           .withColumn("quarantine_reason", F.lit("duplicate id")))
    keep = ranked.where("_copy = 1").drop("_copy", "quarantine_reason")
    return keep, bad.unionByName(dup)


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
    T.StructField("flags", T.ArrayType(T.StringType()), True),
    T.StructField("prepare_error", T.StringType(), True),
])


def percent_escape_invalid_utf8(raw: bytes) -> str:
    """Decode a URL, writing bytes that are not UTF-8 as %XX escapes.

    Unlike U+FFFD replacement this loses nothing: two URLs that differ only in
    their undecodable bytes stay different, so stage 1 cannot merge them.
    """
    text = raw.decode("utf-8", errors="surrogateescape")
    return "".join(f"%{ord(ch) - 0xDC00:02X}" if "\udc80" <= ch <= "\udcff" else ch for ch in text)


def _replace_invalid(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _decode(value: Any, flags: list[str], name: str, repair=_replace_invalid) -> str | None:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    raw = bytes(value)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        flags.append(f"invalid_utf8:{name}")
        return repair(raw)


class Preparer:
    """Per-row fingerprinting; one instance per Python worker, config captured by closure."""

    def __init__(self, conf: Mapping[str, Any]):
        self.url_conf = conf["url"]
        self.boilerplate = tuple(conf["content"].get("boilerplate_lines") or ())
        self.max_chars = int(conf["input"].get("max_text_chars", 200_000))
        self.sim_conf = conf["simhash"]
        self.n_bands = int(self.sim_conf["bands"])
        self._rules: dict[tuple, urls.UrlRules] = {}

    def rules(self, source: str | None, host: str | None) -> urls.UrlRules:
        key = (source, host)
        if key not in self._rules:
            self._rules[key] = urls.rules_for(self.url_conf, source, host)
        return self._rules[key]

    def row(self, r: Mapping[str, Any]) -> dict[str, Any]:
        flags: list[str] = []
        url = _decode(r["url"], flags, "url", percent_escape_invalid_utf8)
        title = _decode(r["title"], flags, "title")
        body = _decode(r["body"], flags, "body")
        html = _decode(r["html"], flags, "html")
        source = _decode(r["source"], flags, "source")
        lang_hint = _decode(r["lang"], flags, "lang")
        out: dict[str, Any] = {"id": int(r["id"]), "published_at": r["published_at"], "source": source,
                               "url": url, "title": title, "flags": flags, "prepare_error": None}
        if r["published_at"] is None or pd.isna(r["published_at"]):
            raw_ts = r.get("raw_published_at")
            raw_ts = None if raw_ts is None or pd.isna(raw_ts) else str(raw_ts).strip()
            # Unreadable dates keep the document (ordered last); the raw value lives on in the flag.
            flags.append(f"unparseable_published_at:{raw_ts[:64]}" if raw_ts else "no_published_at")

        # Stage 1 key
        try:
            nu = urls.normalize_url(url, self.rules(source, urls.host_of(url)),
                                    bool(self.url_conf.get("scheme_insensitive", True)))
            out.update(canonical_url=nu.canonical, url_hash=nu.sha256, url_error=None)
        except urls.UrlError as exc:
            out.update(canonical_url=None, url_hash=None, url_error=str(exc))

        # Stage 2 key
        if (body is None or not body.strip()) and html:
            body = tx.html_to_text(html)
            flags.append("from_html")
        out["body"] = body
        key = tx.content_key(title, body, self.boilerplate)
        if len(key) > self.max_chars:
            key = key[: self.max_chars]
            flags.append("truncated")
        out["text_chars"] = len(key)
        has_body = bool(key.partition("\n")[2])
        if not has_body:
            flags.append("empty_body")
        # A headline alone is too weak a key: two different stories can share "Live updates".
        out["content_hash"] = tx.sha256_hex(key) if has_body else None

        lang = tx.detect_language(key, lang_hint)
        out["lang"] = lang
        out["lang_detected"] = not bool(lang_hint and lang_hint.strip())

        # Stage 3 fingerprint
        spec = self.sim_conf["languages"].get(lang, self.sim_conf["languages"]["default"])
        hashes = sh.features(key, spec["features"], int(spec["ngram"])) if has_body else np.empty(0, np.uint64)
        out["n_features"] = sh.distinct(hashes)
        fp = sh.simhash(hashes) if out["n_features"] >= int(spec.get("min_features", 1)) else None
        out["simhash"] = fp
        for i, b in enumerate(sh.bands(fp, self.n_bands) if fp is not None else [None] * self.n_bands):
            out[f"band_{i}"] = b
        return out

    def safe_row(self, r: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return self.row(r)
        except Exception as exc:  # quarantined downstream, with the reason
            empty = {f.name: None for f in PREPARED_SCHEMA.fields}
            empty.update(id=int(r["id"]), published_at=r["published_at"], flags=[],
                         prepare_error=f"{type(exc).__name__}: {exc}"[:1000])
            return empty


def fingerprint(df: DataFrame, conf: Mapping[str, Any]) -> DataFrame:
    """Compute URL/content/SimHash keys for every row with one Python pass (mapInPandas)."""
    conf = dict(conf)

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        prep = Preparer(conf)
        names = [f.name for f in PREPARED_SCHEMA.fields]
        for pdf in batches:
            rows = [prep.safe_row(r) for r in pdf.to_dict("records")]
            out = pd.DataFrame(rows, columns=names)
            for c in ("simhash", "n_features", "text_chars", "band_0", "band_1", "band_2", "band_3"):
                out[c] = out[c].astype("Int64")
            yield out

    cols = ["id", "published_at", *TEXT_COLUMNS]
    if "raw_published_at" in df.columns:
        cols.append("raw_published_at")
    return df.select(*cols).mapInPandas(run, PREPARED_SCHEMA)


def order_key(prefix: str = "") -> Column:
    """Canonical order: earliest published_at (unknown dates last), then lowest id."""
    ts = F.coalesce(F.col(f"{prefix}published_at"), F.lit(FAR_FUTURE).cast("timestamp"))
    return F.struct(ts.alias("ts"), F.col(f"{prefix}id").alias("id"))
