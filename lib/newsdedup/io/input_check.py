"""What the input's files say about themselves, judged: which cannot be used, and which types reconcile.

Pure functions over facts the reader gathered (io/input_files.py reads the
footers and decodes the row groups); nothing here touches a file or Spark.

A file is *unusable* when its footer cannot be read, when it lacks a column
the job cannot run without, or when one of its row groups cannot be decoded.
Unusable files stop the run (one line each) or, with `input.skip_unreadable`,
are skipped and recorded. Files that disagree on a column's type are
*reconciled* (`reconciled_type`) where one type reads both without loss;
only a disagreement no rule settles refuses the run, naming the column and
the files, whatever `skip_unreadable` says: both files are readable, and
which one is wrong is for the operator to decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Iterable, Mapping, Sequence

from pyspark.sql import types as T

from ..errors import UserError

REQUIRED = ("id", "url", "published_at", "source")
TEXT_COLUMNS = ("url", "title", "body", "html", "source", "lang")
KNOWN = ("id", "published_at", *TEXT_COLUMNS)   # the columns the job reads; any other is ignored


class InputSchemaError(UserError, ValueError):
    """The input is missing columns the job cannot run without, or its files disagree on a column's type."""


class UnreadableInputError(UserError):
    """Input files that cannot be used, one line each (the run was not started)."""


@dataclass(frozen=True)
class FileFacts:
    """One input file as its footer describes it, or why the footer could not be read.

    columns: lower-cased name -> Spark type, for the columns the job reads (KNOWN), plus those the
    file's partition directories (key=value) give. all_columns: every name, as written.
    row_groups: the rows of each row group, in file order. A column of Parquet type null has NullType.
    """

    path: str
    columns: Mapping[str, T.DataType] = field(default_factory=dict)
    all_columns: tuple[str, ...] = ()
    row_groups: tuple[int, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class BadFile:
    """A file the run cannot use: why, and which row group (null: the whole file, e.g. its footer)."""

    path: str
    reason: str
    row_group: int | None = None
    rows: int | None = None      # the rows its footer counts (None: the footer is unreadable)


def missing_columns(names: Iterable[str]) -> list[str]:
    """The required columns absent from names (lower-cased), 'body or html' when both are."""
    have = {n.lower() for n in names}
    missing = [c for c in REQUIRED if c not in have]
    if "body" not in have and "html" not in have:
        missing.append("body or html")
    return missing


def _case_twins(names: Sequence[str]) -> list[str]:
    """Names that differ only in case (Spark reads columns case-insensitively: it cannot tell them apart)."""
    seen: dict[str, list[str]] = {}
    for n in names:
        seen.setdefault(n.lower(), []).append(n)
    return [" and ".join(v) for v in seen.values() if len(v) > 1]


def footer_problem(facts: FileFacts) -> BadFile | None:
    """Why a file cannot be used, judged from its footer alone; None when it can."""
    if facts.error is not None:
        return BadFile(facts.path, f"unreadable footer: {facts.error}")
    rows = sum(facts.row_groups)
    twins = _case_twins(facts.all_columns)
    if twins:
        return BadFile(facts.path, f"columns that differ only in case: {'; '.join(twins)}", rows=rows)
    missing = missing_columns(facts.columns)
    if missing:
        found = ", ".join(facts.all_columns) or "no columns"
        return BadFile(facts.path, f"missing required column(s): {', '.join(missing)} (it has {found})", rows=rows)
    return None


def first_short_row_group(expected: Sequence[int], read: Mapping[int, int]) -> int | None:
    """The first row group of which fewer rows were read than the footer counts; None when all were read.

    A reader that meets a row group it cannot decode gives up on the rest of its split, so the
    row groups after the first short one may be fine or not: only the first is known to be bad.
    """
    for index, rows in enumerate(expected):
        if read.get(index, 0) < rows:
            return index
    return None


def row_group_problem(facts: FileFacts, row_group: int, cause: str | None) -> BadFile:
    start = sum(facts.row_groups[:row_group])
    rows = facts.row_groups[row_group]
    where = (f"row group {row_group} of {len(facts.row_groups)} (rows {start}-{start + rows - 1}) "
             f"cannot be decoded")
    return BadFile(facts.path, where + (f": {cause}" if cause else ""), row_group, sum(facts.row_groups))


def shown(path: str) -> str:
    """A path as a person gave it: a local file without Hadoop's `file:` prefix."""
    return path[len("file:"):] if path.startswith("file:/") and not path.startswith("file://") else path


def refusal(bad: Sequence[BadFile], total: int) -> str:
    """One line per unusable file, each saying what to do (the CLI prefixes every line)."""
    if len(bad) == total:
        hint = f"none of the {total} input files can be used: repair them, or check --input"
    else:
        hint = "repair or remove it, or rerun with --skip-unreadable to skip it (recorded in <output>/skipped_files)"
    return "\n".join(f"input file {shown(b.path)}: {b.reason}; {hint}" for b in bad)


# ---------------------------------------------------------------- reconciling types across files

_INTEGERS = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FRACTIONS = (T.FloatType, T.DoubleType)
_INSTANTS = (T.DateType, T.TimestampType, T.TimestampNTZType)
_TEXT = (T.StringType, T.BinaryType)
_NESTED = (T.StructType, T.ArrayType, T.MapType)


def _all(types: Iterable[T.DataType], kinds: tuple[type, ...]) -> bool:
    return all(isinstance(t, kinds) for t in types)


def reconciled_type(column: str, types: Iterable[T.DataType]) -> T.DataType | None:
    """The one type every file's `column` is read as, or None when no rule reads them all.

    - integers of any width: bigint (int32 and int64 ids); floats: double;
    - string and binary: string (large_string and dictionary-encoded strings are strings in Parquet);
    - published_at: dates, timestamps and timestamp_ntz as timestamps (naive ones are read in
      input.naive_timezone, dates at midnight UTC, as `conform` reads each); integer and fractional
      epochs as double (exact to the microsecond for any epoch of seconds, ms or µs);
    - id and the text columns: any mix of plain types as string (conform reads an id from its text,
      a text column as its text).
    A nested type (struct, array, map) never mixes with another.
    """
    distinct = list({t.json(): t for t in types}.values())
    typed = [t for t in distinct if not isinstance(t, T.NullType)]   # an all-null column constrains nothing
    if len(typed) <= 1:
        return typed[0] if typed else T.NullType()
    distinct = typed
    if _all(distinct, _INTEGERS):
        return T.LongType()
    if _all(distinct, _FRACTIONS):
        return T.DoubleType()
    if _all(distinct, _TEXT):
        return T.StringType()
    if column == "published_at":
        if _all(distinct, _INSTANTS):
            return T.TimestampType()
        if _all(distinct, _INTEGERS + _FRACTIONS):
            return T.DoubleType()
        return None
    if column in ("id", *TEXT_COLUMNS) and not any(isinstance(t, _NESTED) for t in distinct):
        return T.StringType()
    return None


def _files_text(files: Sequence[str]) -> str:
    names = ", ".join(PurePosixPath(f).name for f in files[:3])
    return names + (f" and {len(files) - 3} more" if len(files) > 3 else "")


def reconciled_schema(groups: Sequence[tuple[Mapping[str, T.DataType], Sequence[str]]]) -> dict[str, T.DataType]:
    """column -> the type it is read as, over groups of (the files' columns, the files).

    Raises InputSchemaError, one line naming each column no rule reconciles, its types and files.
    """
    by_column: dict[str, dict[str, tuple[T.DataType, list[str]]]] = {}
    for columns, files in groups:
        for name, dtype in columns.items():
            by_column.setdefault(name, {}).setdefault(dtype.simpleString(), (dtype, []))[1].extend(files)
    target, conflicts = {}, []
    for name, by_type in sorted(by_column.items()):
        dtype = reconciled_type(name, [t for t, _ in by_type.values()])
        if dtype is None:
            parts = "; ".join(f"{s} in {_files_text(fs)}" for s, (_, fs) in sorted(by_type.items()))
            conflicts.append(f"input column '{name}' has conflicting types across files: {parts}")
        else:
            target[name] = dtype
    if conflicts:
        raise InputSchemaError(" | ".join(conflicts) + ". No rule reads both: rewrite the files with one type "
                               "for the column, or run them as separate inputs")
    return target
