"""Reading and conforming the input snapshot.

`read_input` reads Parquet or Delta; `conform` casts it to the internal shape;
`split_invalid` sets aside rows that cannot be documents. Every input row ends
up either in the prepared documents or in quarantine, with a reason.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import UserError

REQUIRED = ("id", "url", "published_at", "source")
TEXT_COLUMNS = ("url", "title", "body", "html", "source", "lang")


class InputSchemaError(UserError, ValueError):
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


def conform(df: DataFrame, naive_timezone: str) -> DataFrame:
    """Cast the input to the internal shape: typed id/timestamp, text columns as raw bytes.

    Text travels to Python as binary so that invalid UTF-8 is repaired per row
    (errors='replace') instead of failing an Arrow batch.
    """
    check_columns(df)
    df = df.toDF(*[c.lower() for c in df.columns])
    out = [
        F.col("id").cast("string").alias("raw_id"),
        F.col("id").try_cast("bigint").alias("id"),  # "12a" -> null -> quarantined, not a crash
        _as_utc_timestamp(df, naive_timezone).alias("published_at"),
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
    # Only the rows of repeated ids go through the window: finding them shuffles ids, not the
    # text, and the (small) id set is broadcast.
    repeated = F.broadcast(good.groupBy("id").count().where("count > 1").select("id"))
    w = Window.partitionBy("id").orderBy(F.col("published_at").asc_nulls_last(), F.col("url"), F.col("body"))
    ranked = good.join(repeated, "id", "left_semi").withColumn("_copy", F.row_number().over(w))
    dup = (ranked.where("_copy > 1").drop("_copy")
           .withColumn("quarantine_reason", F.lit("duplicate id")))
    keep = (good.join(repeated, "id", "left_anti")
            .unionByName(ranked.where("_copy = 1").drop("_copy"))
            .drop("quarantine_reason"))
    return keep, bad.unionByName(dup)
