"""The single Python pass over the conformed snapshot: every stage's per-row keys.

A row whose keys cannot be computed is kept with prepare_error set (it is
quarantined by the cascade); no single bad row fails the job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Mapping

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from .io.input import TEXT_COLUMNS
from .stages.content import ContentKeys
from .stages.simhash import SimhashKeys
from .stages.url import UrlKeys

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
    """One row in, the keys of every stage out; one instance per Python worker.

    The stages own their keys: url_keys, content_keys and simhash_keys are each
    stage's pure per-row function. This class only decodes the raw bytes, calls
    them in order and turns a failure into a quarantined row.
    """

    def __init__(self, conf: "Config"):
        self.url = UrlKeys(conf.url)
        self.content = ContentKeys(conf.content, conf.input.max_text_chars)
        self.simhash = SimhashKeys(conf.simhash)

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

        out.update(self.url.columns(url, source))
        content = self.content.columns(title, body, html, lang_hint, flags)
        key, has_body = content.pop("key"), content.pop("has_body")
        out.update(content)
        out.update(self.simhash.columns(key, out["lang"], has_body))
        return out

    def safe_row(self, r: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return self.row(r)
        except Exception as exc:  # quarantined downstream, with the reason
            empty = {f.name: None for f in PREPARED_SCHEMA.fields}
            empty.update(id=int(r["id"]), published_at=r["published_at"], flags=[],
                         prepare_error=f"{type(exc).__name__}: {exc}"[:1000])
            return empty


def fingerprint(df: DataFrame, conf: "Config") -> DataFrame:
    """Compute URL/content/SimHash keys for every row with one Python pass (mapInPandas)."""
    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        prep = Preparer(conf)
        names = [f.name for f in PREPARED_SCHEMA.fields]
        for pdf in batches:
            rows = [prep.safe_row(r) for r in pdf.to_dict("records")]
            out = pd.DataFrame(rows, columns=names)
            for c in ("simhash", "simhash_w", "n_features", "text_chars", "band_0", "band_1", "band_2", "band_3"):
                out[c] = out[c].astype("Int64")
            yield out

    cols = ["id", "published_at", *TEXT_COLUMNS]
    if "raw_published_at" in df.columns:
        cols.append("raw_published_at")
    return df.select(*cols).mapInPandas(run, PREPARED_SCHEMA)
