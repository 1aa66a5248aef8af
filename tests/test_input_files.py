"""Input files are checked before a run starts, and their schemas reconciled (issue #24, items 1 and 2).

- A directory with a truncated-footer file and a file with one undecodable row
  group next to good files: by default the run stops with exit 2, one line per
  bad file naming it (and the row group); with --skip-unreadable it goes on, the
  good files' rows are all in documents or quarantine, and the skipped files are
  in the report, its summary and the Delta table skipped_files.
- Files written by different writers (timestamp and timestamp_ntz, int32 and
  int64 ids, string, large_string and dictionary-encoded strings, a missing
  optional column, extra columns of clashing types) are one run; an id that is
  a string in one file and a struct in another is refused in one line.

Real Spark, real Delta, real files written by pyarrow and damaged byte by byte.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

from newsdedup import job
from newsdedup.config import InputConfig, load_config
from newsdedup.io import input as input_io
from newsdedup.io import input_check, store

from cli_runner import run_cli, small_conf

UTC = timezone.utc
T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def story(k: int, n: int = 30) -> str:
    """n words unique to story k: no accidental near-duplicates between rows."""
    return " ".join(f"f{k}z{i}{'abcdefghij'[(i * k) % 10]}" for i in range(n))


def articles(ids, **columns) -> pa.Table:
    """A table of articles with the given ids; columns replace (or, given None, drop) the defaults."""
    n = len(ids)
    base = {"id": pa.array(ids, pa.int64()), "url": [f"https://ex.com/{i}" for i in ids],
            "title": [f"Title {i}" for i in ids], "body": [story(i) for i in ids],
            "published_at": pa.array([T0] * n, pa.timestamp("us", tz="UTC")), "source": ["ex"] * n,
            "lang": ["en"] * n}
    base.update(columns)
    return pa.table({k: v for k, v in base.items() if v is not None})


def write_truncated(path: Path, ids) -> None:
    """A Parquet file cut short: its footer (and the magic bytes after it) are gone."""
    pq.write_table(articles(ids), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 200])


def write_damaged_row_group(path: Path, ids, bad: int = 1, per_group: int = 10) -> None:
    """A file of several row groups whose row group `bad` has its body pages overwritten (the first
    page's header included, so that no reader can decode it); the footer is intact."""
    pq.write_table(articles(ids), path, row_group_size=per_group)
    chunk = pq.ParquetFile(path).metadata.row_group(bad).column(3)   # body
    assert chunk.path_in_schema == "body"
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    data = bytearray(path.read_bytes())
    data[start:start + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def conf_file(tmp_path_factory):
    return small_conf(tmp_path_factory, "input", "naive_timezone: Asia/Dhaka")


# ---------------------------------------------------------------- unreadable files

GOOD_A, GOOD_B, TRUNCATED, DAMAGED = range(1, 11), range(11, 21), range(21, 31), range(31, 61)


@pytest.fixture(scope="module")
def damaged_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("damaged") / "in"
    d.mkdir()
    pq.write_table(articles(list(GOOD_A)), d / "good_a.parquet")
    pq.write_table(articles(list(GOOD_B), lang=None), d / "good_b.parquet")
    write_truncated(d / "truncated.parquet", list(TRUNCATED))
    write_damaged_row_group(d / "damaged.parquet", list(DAMAGED), bad=1)
    (d / "_SUCCESS").write_bytes(b"")   # not data: never checked
    return d


def test_unreadable_files_stop_the_run_one_line_each(spark, damaged_dir, tmp_path, conf_file):
    out = tmp_path / "out"
    code, _, err = run_cli(["run", "--input", str(damaged_dir), "--output", str(out), "--no-postgres",
                            "--no-semantic", "--conf", conf_file])
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and all(ln.startswith("newsdedup: error: input file ") for ln in lines), err
    damaged, truncated = lines   # sorted by path
    assert str(damaged_dir / "truncated.parquet") in truncated and "unreadable footer" in truncated
    assert "--skip-unreadable" in truncated
    assert str(damaged_dir / "damaged.parquet") in damaged and "row group 1 of 3 (rows 10-19)" in damaged
    assert "Traceback" not in err and not (out / "documents").exists()


@pytest.fixture(scope="module")
def skipped_run(spark, damaged_dir, tmp_path_factory, conf_file):
    out = tmp_path_factory.mktemp("skipped") / "out"
    code, stdout, err = run_cli(["run", "--input", str(damaged_dir), "--output", str(out), "--no-postgres",
                                 "--no-semantic", "--skip-unreadable", "--conf", conf_file])
    assert code == 0, err
    (report_file,) = (out / "reports").glob("*.json")
    return out, stdout, json.loads(report_file.read_text())


def test_skipping_runs_every_row_of_the_good_files(spark, skipped_run):
    out, _, report = skipped_run
    docs = {r.id for r in store.read(spark, str(out), "documents").select("id").collect()}
    quarantined = store.read(spark, str(out), "quarantine").count()
    assert docs == set(GOOD_A) | set(GOOD_B) and quarantined == 0
    assert report["counts"]["input_rows"] == len(GOOD_A) + len(GOOD_B)
    assert report["counts"]["input_files"] == 4 and report["counts"]["input_files_skipped"] == 2


def test_skipped_files_are_in_the_report_its_summary_and_a_delta_table(spark, skipped_run, damaged_dir):
    out, stdout, report = skipped_run
    summary = "note: skipped 2 of 4 input files (input.skip_unreadable), 30 rows (as their footers count) and 1"
    assert summary in stdout
    assert f"note: skipped {damaged_dir / 'truncated.parquet'}: unreadable footer" in stdout
    assert any(n.startswith(f"skipped {damaged_dir / 'damaged.parquet'}: row group 1 of 3") for n in report["notes"])
    rows = {r.path: r for r in store.read(spark, str(out), "skipped_files").collect()}
    assert set(rows) == {str(damaged_dir / "truncated.parquet"), str(damaged_dir / "damaged.parquet")}
    truncated, damaged = rows[str(damaged_dir / "truncated.parquet")], rows[str(damaged_dir / "damaged.parquet")]
    assert truncated.row_group is None and truncated.rows is None and "unreadable footer" in truncated.reason
    assert damaged.row_group == 1 and damaged.rows == len(DAMAGED) and "cannot be decoded" in damaged.reason
    assert {r.run_id for r in rows.values()} == {report["run_id"]} and all(r.skipped_at for r in rows.values())


def test_the_config_key_skips_too_and_footers_only_misses_the_row_group(spark, damaged_dir):
    skipped = input_io.open_input(spark, str(damaged_dir), InputConfig(skip_unreadable=True)).skipped
    assert [(Path(b.path).name, b.row_group) for b in skipped] == [("damaged.parquet", 1), ("truncated.parquet", None)]
    # input.verify: footers reads no row group: the damaged file passes that check.
    footers_only = input_io.open_input(spark, str(damaged_dir), InputConfig(skip_unreadable=True, verify="footers"))
    assert [Path(b.path).name for b in footers_only.skipped] == ["truncated.parquet"]


def test_a_file_without_the_required_columns_is_named(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    pq.write_table(articles([1, 2]), d / "ok.parquet")
    pq.write_table(pa.table({"x": [1, 2]}), d / "other.parquet")   # a stray file of another dataset
    with pytest.raises(input_check.UnreadableInputError) as err:
        input_io.open_input(spark, str(d))
    (line,) = str(err.value).splitlines()
    assert "other.parquet: missing required column(s): id, url, published_at, source, body or html (it has x)" in line


# ---------------------------------------------------------------- schemas reconciled

NAIVE = datetime(2026, 6, 1, 12, 0)   # wall clock in Asia/Dhaka (UTC+6): 06:00 UTC


@pytest.fixture(scope="module")
def mixed_run(spark, tmp_path_factory):
    """Four files, four writers: one run."""
    base = tmp_path_factory.mktemp("mixed")
    d = base / "in"
    d.mkdir()
    # timestamp (UTC), int64 id, plain strings, an extra column of type struct
    pq.write_table(articles([1, 2], extra=pa.array([{"a": 1}, {"a": 2}])), d / "zoned.parquet")
    # timestamp_ntz, int32 id, large_string url, no lang column (optional), an extra int column
    pq.write_table(articles([3, 4], id=pa.array([3, 4], pa.int32()),
                            published_at=pa.array([NAIVE, NAIVE], pa.timestamp("us")),
                            url=pa.array(["https://ex.com/3", "https://ex.com/4"], pa.large_string()), lang=None,
                            extra=pa.array([7, 8], pa.int64())), d / "naive.parquet")
    # dictionary-encoded strings (pyarrow's categorical), ms timestamps
    pq.write_table(articles([5, 6], source=pa.array(["ex", "ex"]).dictionary_encode(),
                            body=pa.array([story(5), story(6)]).dictionary_encode(),
                            published_at=pa.array([T0, T0], pa.timestamp("ms", tz="UTC"))), d / "dictionary.parquet")
    # no title column at all, large_string body
    pq.write_table(articles([7], title=None, body=pa.array([story(7)], pa.large_string())), d / "untitled.parquet")
    conf = load_config(overrides={"spark": {"shuffle_partitions": 2, "delta_snapshot_partitions": 1},
                                  "semantic": {"enabled": False}, "input": {"naive_timezone": "Asia/Dhaka"}})
    out = str(base / "out")
    report = job.run(spark, str(d), out, conf, load_pg=False)
    docs = {r.id: r for r in store.read(spark, out, "documents").collect()}
    return report, docs, store.read(spark, out, "quarantine").count()


def test_mixed_writers_are_one_run(mixed_run):
    report, docs, quarantined = mixed_run
    assert set(docs) == set(range(1, 8)) and quarantined == 0
    assert report.counts["input_rows"] == 7 and report.counts["input_files_skipped"] == 0


def test_timestamp_ntz_next_to_timestamp_is_read_in_the_naive_timezone(mixed_run):
    _, docs, _ = mixed_run
    assert docs[3].published_at.replace(tzinfo=UTC) == datetime(2026, 6, 1, 6, 0, tzinfo=UTC)
    assert docs[1].published_at.replace(tzinfo=UTC) == T0 and docs[5].published_at.replace(tzinfo=UTC) == T0


def test_every_column_keeps_its_values(mixed_run):
    _, docs, _ = mixed_run
    assert docs[4].url == "https://ex.com/4" and docs[4].lang_detected is not None   # no lang column: detected
    assert docs[6].body == story(6) and docs[6].source == "ex"
    assert docs[7].title is None and docs[7].body == story(7)


def test_an_unreconcilable_pair_is_refused_in_one_line_even_when_skipping(spark, tmp_path, conf_file):
    d = tmp_path / "in"
    d.mkdir()
    pq.write_table(articles([1], id=pa.array(["1"])), d / "id_text.parquet")
    pq.write_table(articles([2], id=pa.array([{"n": 2}])), d / "id_struct.parquet")
    for extra in ([], ["--skip-unreadable"]):
        out = tmp_path / f"out{len(extra)}"
        code, _, err = run_cli(["run", "--input", str(d), "--output", str(out), "--no-postgres", "--no-semantic",
                                "--conf", conf_file, *extra])
        assert code == 2 and err.count("\n") == 1, err
        assert "input column 'id' has conflicting types across files" in err
        assert "string in id_text.parquet" in err and "struct<n:bigint> in id_struct.parquet" in err
        assert not (out / "documents").exists()


# ---------------------------------------------------------------- the rules, without Spark

@pytest.mark.parametrize("column, types, expected", [
    ("id", [T.IntegerType(), T.LongType()], T.LongType()),
    ("id", [T.StringType(), T.LongType()], T.StringType()),
    ("id", [T.StringType(), T.StructType([T.StructField("n", T.LongType())])], None),
    ("published_at", [T.TimestampType(), T.TimestampNTZType(), T.DateType()], T.TimestampType()),
    ("published_at", [T.LongType(), T.DoubleType()], T.DoubleType()),
    ("published_at", [T.StringType(), T.LongType()], None),
    ("body", [T.StringType(), T.BinaryType()], T.StringType()),
    ("title", [T.NullType(), T.StringType()], T.StringType()),
    ("lang", [T.NullType()], T.NullType()),
])
def test_reconciled_type(column, types, expected):
    assert input_check.reconciled_type(column, types) == expected


def test_the_first_short_row_group_is_named():
    assert input_check.first_short_row_group([10, 10, 10], {0: 10, 1: 10, 2: 10}) is None
    assert input_check.first_short_row_group([10, 10, 10], {0: 10, 2: 10}) == 1
    assert input_check.first_short_row_group([10, 10, 10], {0: 10, 1: 3}) == 1
