"""Reading and conforming the input snapshot.

`read_input` reads Parquet (schemas of all files merged) or Delta; `conform`
casts it to the internal shape; `split_invalid` sets aside rows that cannot be
documents. Every input row ends up either in the prepared documents or in
quarantine, with a reason.

Timestamps: `published_at` may be a timestamp (with or without zone), a date,
a string (with or without zone, or an integer epoch written as digits) or a
number (an epoch whose unit is inferred per value, see `epoch_micros`). Any
year Spark can hold (0001-9999) is kept. A value that cannot be read becomes
null with the flag `unparseable_published_at:<raw>`; one outside
`input.published_at_min/max` is kept but flagged `implausible_published_at:<raw>`
and, like an unknown date, ordered last (`order_date`). Nothing here converts a
timestamp to pandas: the Python pass receives it as microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Sequence
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import UserError
from . import input_files, paths
from .input_check import (KNOWN, REQUIRED, TEXT_COLUMNS, BadFile, FileFacts, InputSchemaError,  # noqa: F401
                          UnreadableInputError, first_short_row_group, footer_problem, reconciled_schema,
                          refusal, row_group_problem)

if TYPE_CHECKING:
    from ..config import InputConfig

# Spark's timestamp range, 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999Z, in microseconds.
MIN_MICROS = -62_135_596_800_000_000
MAX_MICROS = 253_402_300_799_999_999
IMPLAUSIBLE = "implausible_published_at"
UNPARSEABLE = "unparseable_published_at"
DECODE_REASONS = 20   # files whose decoding failure is read back for its reason (one small Spark job each)


# ---------------------------------------------------------------- reading

class InputNotFoundError(UserError):
    """The --input path does not exist."""


@dataclass(frozen=True)
class Input:
    """The input as the run reads it: its rows (the files' schemas reconciled), and the files it skipped."""

    frame: DataFrame
    files: int                      # data files checked (a Delta table's live files)
    skipped: tuple[BadFile, ...] = ()


def read_input(spark: SparkSession, path: str, conf: "InputConfig | None" = None) -> DataFrame:
    """open_input's rows (lab and tests); every file checked, an unusable one refused unless conf skips it."""
    return open_input(spark, path, conf).frame


def open_input(spark: SparkSession, path: str, conf: "InputConfig | None" = None) -> Input:
    """A Delta table (asked of the path's FileSystem, so s3a:// Delta is read as Delta) or Parquet files.

    Reading a Delta directory as plain Parquet would also read the files Delta has removed.
    Parquet files are each checked first (their footers and, with input.verify = row_groups,
    every row group), then read with their schemas reconciled (input_check.reconciled_type): a
    column missing from some files is null in their rows (the html-only files of a mixed
    snapshot), columns the job does not read are dropped.
    """
    from ..config import InputConfig

    conf = conf or InputConfig()
    if path.startswith("delta:"):
        return _open_delta(spark, paths.qualified(path.removeprefix("delta:")))
    if not paths.exists(spark, path):
        raise InputNotFoundError(f"--input {path}: no such file or directory")
    if paths.is_delta(spark, path):
        return _open_delta(spark, paths.qualified(path))
    root, files = input_files.data_files(spark, path)
    if not files:
        raise InputSchemaError(f"--input {path} holds no data files (names starting with _ or . are not data)")
    facts = input_files.read_footers(spark, files, root)
    bad = [b for b in map(footer_problem, facts) if b is not None]
    usable = [f for f in facts if footer_problem(f) is None]
    _target(usable)   # types no rule reconciles are refused now, before the row groups are read
    if conf.verify == "row_groups":
        damaged = undecodable(spark, usable)
        bad += damaged
        usable = [f for f in usable if f.path not in {b.path for b in damaged}]
    if bad and not (conf.skip_unreadable and usable):
        raise UnreadableInputError(refusal(sorted(bad, key=lambda b: b.path), len(files)))
    frame = _reconciled(spark, usable, root, conf.naive_timezone, whole=not bad)
    return Input(frame, len(files), tuple(sorted(bad, key=lambda b: b.path)))


def undecodable(spark: SparkSession, facts: Sequence[FileFacts]) -> list[BadFile]:
    """The files with a row group Spark's reader cannot decode, each named with its first such row group."""
    read = input_files.rows_read(spark, facts)
    short = [f for f in facts if read.get(f.path, 0) < sum(f.row_groups)]
    out = []
    for i, f in enumerate(short):
        group = first_short_row_group(f.row_groups, input_files.rows_read_per_row_group(spark, f))
        cause = input_files.decode_failure(spark, f) if i < DECODE_REASONS else None
        out.append(row_group_problem(f, group if group is not None else 0, cause))
    return out


def _open_delta(spark: SparkSession, path: str) -> Input:
    """A Delta table; its live files' footers are checked (cheap), a bad one is refused, never skipped.

    Which files make up the table is Delta's to decide: leaving one out would read a version of
    the table that never existed. Its row groups are not decoded here (one more full read).
    """
    df = spark.read.format("delta").load(path)
    files = [unquote(f) for f in df.inputFiles()]
    broken = [BadFile(f.path, f"unreadable footer: {f.error}")
              for f in input_files.read_footers(spark, files) if f.error is not None]
    if broken:
        raise UnreadableInputError("\n".join(
            f"Delta table {path}: file {b.path}: {b.reason}; restore a version of the table without it "
            "(RESTORE TABLE ... TO VERSION AS OF) or repair it (--skip-unreadable does not skip a Delta table's files)"
            for b in broken))
    return Input(df, len(files))


def _as_reconciled(df: DataFrame, name: str, target: T.DataType, naive_tz: str) -> Column:
    """df's column read as target: timestamp_ntz in naive_tz (as conform reads one), any other by cast."""
    col, source = F.col(f"`{name}`"), df.schema[name].dataType
    if source == target:
        return col
    if isinstance(source, T.TimestampNTZType) and isinstance(target, T.TimestampType):
        return F.to_utc_timestamp(col.cast("timestamp"), naive_tz)
    return col.cast(target)


def _target(usable: Sequence[FileFacts]) -> dict[str, T.DataType]:
    """column -> the type the usable files' column is read as; InputSchemaError when no rule reads them all."""
    return reconciled_schema([(g[0].columns, [f.path for f in g]) for g in input_files.by_schema(usable)])


def _reconciled(spark: SparkSession, usable: Sequence[FileFacts], root: str | None, naive_tz: str,
                whole: bool) -> DataFrame:
    """The usable files' known columns, each read as its reconciled type, one frame.

    Files are read in groups of one schema (Spark reads a group with one footer's schema); a
    directory whose files all share one schema and all passed is read as Spark lists it.
    """
    groups = input_files.by_schema(usable)
    target = _target(usable)
    reader = spark.read.option("basePath", root) if root else spark.read
    out = None
    for group in groups:
        if whole and len(groups) == 1:
            df = spark.read.parquet(input_files.spark_path(root or group[0].path))
        else:
            df = reader.parquet(*[input_files.spark_path(f.path) for f in group])
        # Columns of Parquet type null are dropped: the union brings them back as nulls of the target type.
        keep = [c for c in df.columns if c.lower() in target and not isinstance(group[0].columns.get(c.lower()),
                                                                                T.NullType)]
        df = df.select(*[_as_reconciled(df, c, target[c.lower()], naive_tz).alias(c.lower()) for c in keep])
        out = df if out is None else out.unionByName(df, allowMissingColumns=True)
    absent = [c for c in target if c not in out.columns]   # null-typed in every file
    return out.select("*", *[F.lit(None).cast(target[c]).alias(c) for c in absent]) if absent else out


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
    # Column types too, so that a wrong schema stops the run before it starts (one line, nothing written).
    lowered = df.toDF(*[c.lower() for c in df.columns])
    for c in ("id", *TEXT_COLUMNS):
        if c in lowered.columns:
            _as_text(lowered, c)          # raises for struct/array/map columns
    _parsed_timestamp(lowered, "UTC")     # raises for a published_at type no rule reads


# ---------------------------------------------------------------- timestamps

def epoch_micros(col: Column) -> Column:
    """An integer or fractional epoch as microseconds, the unit inferred from the magnitude of each value.

    |v| < 1e11: seconds (until year 5138); < 1e14: milliseconds (from 1973-03-03 on,
    since smaller ms values are read as seconds); < 1e17: microseconds; larger:
    nanoseconds. The ranges overlap at their edges, and the rule picks the common
    case: a millisecond epoch of 1970-1973 is read as seconds of a far-future
    year (flagged implausible), and a microsecond epoch after year 5138 as
    nanoseconds (a date in the 1970s). Write such dates as timestamps.
    """
    a = F.abs(col.cast("double"))  # abs of the smallest long would overflow
    micros = (F.when(a < 1e11, col * F.lit(1_000_000))
              .when(a < 1e14, col * F.lit(1_000))
              .when(a < 1e17, col)
              .when(a < 9.2e18, F.floor(col / F.lit(1_000))))
    return F.floor(micros).try_cast("long")


def _micros_to_timestamp(micros: Column) -> Column:
    return F.when(micros.between(MIN_MICROS, MAX_MICROS), F.timestamp_micros(micros))


def _parsed_timestamp(df: DataFrame, naive_tz: str) -> Column:
    """published_at as a UTC timestamp, null when unreadable; any type the input may carry."""
    dtype = df.schema["published_at"].dataType
    col = F.col("published_at")
    if isinstance(dtype, T.TimestampNTZType):
        return F.to_utc_timestamp(col.cast("timestamp"), naive_tz)
    if isinstance(dtype, T.StringType):
        text = F.trim(col)
        numeric = text.rlike(r"^-?\d{5,19}(\.\d+)?$")  # "2026" stays a year, not an epoch
        # Strings with an offset parse as instants; bare ones are read in naive_tz.
        # try_to_timestamp: an unparseable string becomes null (flagged), not a failed job.
        has_zone = text.rlike(r"(Z|[+-]\d{2}:?\d{2})$")
        return (F.when(numeric, _micros_to_timestamp(epoch_micros(text.try_cast("double"))))
                .when(has_zone, F.try_to_timestamp(text))
                .otherwise(F.to_utc_timestamp(F.try_to_timestamp(text), naive_tz)))
    if isinstance(dtype, (T.DateType, T.TimestampType)):
        return col.cast("timestamp")
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return _micros_to_timestamp(epoch_micros(col.cast("long")))
    if isinstance(dtype, (T.FloatType, T.DoubleType, T.DecimalType)):
        d = col.cast("double")
        finite = ~F.isnan(d) & (F.abs(d) < F.lit(float("inf")))
        return F.when(finite, _micros_to_timestamp(epoch_micros(d)))
    if isinstance(dtype, T.NullType):
        return F.lit(None).cast("timestamp")
    raise InputSchemaError(f"published_at has unsupported type {dtype.simpleString()}; expected a timestamp, "
                           "date, string or integer epoch")


def plausible_range(conf: "InputConfig", now: datetime | None = None) -> tuple[datetime, datetime]:
    """[min, max] of believable publication instants; max defaults to one day after now."""
    lo = datetime.fromisoformat(conf.published_at_min).replace(tzinfo=timezone.utc)
    if conf.published_at_max:
        hi = datetime.fromisoformat(conf.published_at_max).replace(tzinfo=timezone.utc)
    else:
        hi = (now or datetime.now(timezone.utc)) + timedelta(days=1)
    return lo, hi


def _published_at_flag(raw: Column, ts: Column, plausible: tuple[datetime, datetime] | None) -> Column:
    raw_text = F.substring(raw.cast("string"), 1, 64)
    flag = (F.when(raw.isNull(), F.lit("no_published_at"))
            .when(ts.isNull(), F.concat(F.lit(UNPARSEABLE + ":"), raw_text)))
    if plausible is not None:
        lo, hi = (F.lit(int(t.timestamp() * 1_000_000)) for t in plausible)
        us = F.unix_micros(ts)
        flag = flag.when((us < lo) | (us > hi), F.concat(F.lit(IMPLAUSIBLE + ":"), raw_text))
    return flag


def order_date(col: str = "published_at", flags: str = "flags") -> Column:
    """The date the canonical rule and stage 4 windows use: published_at unless flagged implausible."""
    implausible = F.exists(F.coalesce(F.col(flags), F.array()), lambda f: f.startswith(IMPLAUSIBLE))
    return F.when(~implausible, F.col(col))


# ---------------------------------------------------------------- conforming

def _as_text(df: DataFrame, c: str) -> Column:
    """A text column as raw bytes (invalid UTF-8 is repaired per row in Python, not by Arrow)."""
    dtype = df.schema[c].dataType
    if isinstance(dtype, (T.StringType, T.BinaryType)):
        return F.col(c).cast("binary")
    if isinstance(dtype, T.NullType):
        return F.lit(None).cast("binary")
    if isinstance(dtype, (T.StructType, T.ArrayType, T.MapType)):
        expected = "an integer" if c == "id" else "a string"
        raise InputSchemaError(f"input column '{c}' has type {dtype.simpleString()}; expected {expected}")
    return F.col(c).cast("string").cast("binary")  # numbers, booleans, dates: their text


def _id(df: DataFrame) -> Column:
    """The id as a bigint, null (quarantined: "id is not an integer") when it is not one.

    A plain cast would make an id of something else: a double 7.5 is cast to 7 (another
    article's id), a boolean to 1 or 0. Fractional ids are kept when whole (pandas writes an
    integer column with nulls as float64); booleans, dates and timestamps are no ids.
    """
    col, dtype = F.col("id"), df.schema["id"].dataType
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return col.cast("bigint")
    if isinstance(dtype, (T.FloatType, T.DoubleType, T.DecimalType)):
        return F.when(col % 1 == 0, col.try_cast("bigint"))   # NaN and infinities: NaN % 1 is NaN
    if isinstance(dtype, (T.StringType, T.BinaryType)):
        return col.cast("string").try_cast("bigint")
    return F.lit(None).cast("bigint")


def conform(df: DataFrame, naive_timezone: str,
            plausible: tuple[datetime, datetime] | None = None) -> DataFrame:
    """Cast the input to the internal shape: typed id, UTC timestamp and its flag, text columns as raw bytes."""
    check_columns(df)
    df = df.toDF(*[c.lower() for c in df.columns])
    id_type = df.schema["id"].dataType
    if isinstance(id_type, (T.StructType, T.ArrayType, T.MapType)):
        raise InputSchemaError(f"input column 'id' has type {id_type.simpleString()}; expected an integer")
    ts = _parsed_timestamp(df, naive_timezone)
    ts = F.when(F.unix_micros(ts).between(MIN_MICROS, MAX_MICROS), ts)  # a zone shift can leave year 1
    out = [
        F.col("id").cast("string").alias("raw_id"),
        _id(df).alias("id"),  # "12a" -> null -> quarantined, not a crash
        ts.alias("published_at"),
        F.col("published_at").cast("string").alias("raw_published_at"),
        _published_at_flag(F.col("published_at"), ts, plausible).alias("published_at_flag"),
    ]
    for c in TEXT_COLUMNS:
        out.append(_as_text(df, c).alias(c) if c in df.columns else F.lit(None).cast("binary").alias(c))
    return df.select(*out)


def split_invalid(df: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Separate rows that cannot be documents (no usable id, repeated id) from the rest."""
    reason = (F.when(F.col("raw_id").isNull(), F.lit("id is null"))
              .when(F.col("id").isNull(), F.lit("id is not an integer")))
    flagged = df.withColumn("quarantine_reason", reason)
    bad = flagged.where(F.col("quarantine_reason").isNotNull())
    good = flagged.where(F.col("quarantine_reason").isNull())
    # Repeated ids: keep the earliest believable copy (then the smallest url, deterministic), quarantine the rest.
    # Only the rows of repeated ids go through the window: finding them shuffles ids, not the
    # text, and the (small) id set is broadcast.
    repeated = F.broadcast(good.groupBy("id").count().where("count > 1").select("id"))
    dated = F.when(F.col("published_at_flag").isNull(), F.col("published_at"))
    w = Window.partitionBy("id").orderBy(dated.asc_nulls_last(), F.col("url"), F.col("body"))
    ranked = good.join(repeated, "id", "left_semi").withColumn("_copy", F.row_number().over(w))
    dup = (ranked.where("_copy > 1").drop("_copy")
           .withColumn("quarantine_reason", F.lit("duplicate id")))
    keep = (good.join(repeated, "id", "left_anti")
            .unionByName(ranked.where("_copy = 1").drop("_copy"))
            .drop("quarantine_reason"))
    return keep, bad.unionByName(dup)
