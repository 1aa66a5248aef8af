"""Bad input never crashes the job and is never lost: each row is a document (flagged) or quarantined.

One Parquet file, written with pyarrow so that it can hold invalid UTF-8 in
string columns, carries every kind of bad row; the job runs on it twice.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from newsdedup import job, prepare
from newsdedup.io import input as input_io
from newsdedup.io import store
from newsdedup.config import load_config

UTC = timezone.utc


def story(k: int, n: int = 40) -> str:
    """A body of n distinct words unique to story k (no accidental SimHash neighbours)."""
    return " ".join(f"w{k}x{i}{'abcdefghij'[(i * k) % 10]}" for i in range(n))


HUGE = story(10, 3000)  # ~20k characters, far over max_text_chars below
ROWS = [  # id, url, title, body, published_at (string), source, lang
    ("1", "https://ex.com/a", "Title A", story(1), "2026-01-01 10:00:00", "ex", "en"),   # naive: Asia/Dhaka
    ("2", None, "Title A", story(1), "2026-01-02T00:00:00Z", "ex", "en"),               # null url, copy of 1
    ("3", "not a url", "Title C", story(3), "2026-01-01T10:00:00+06:00", "ex", "en"),
    ("4", "https://ex.com/e1", "", "", "2026-01-01 00:00:00", "ex", "en"),
    ("5", "https://ex.com/e2", "", "   ", "2026-01-01 00:00:00", "ex", "en"),
    ("6", "https://ex.com/e3", "Live updates", "", "2026-01-01 00:00:00", "ex", "en"),
    ("7", "https://ex.com/e4", "Live updates", None, "2026-01-01 00:00:00", "ex", "en"),
    ("8", b"https://ex.com/caf\xe9", b"Caf\xe9", b"\xff\xfe " + story(8).encode(), "2026-01-01 00:00:00", "ex", "en"),
    ("9", b"https://ex.com/caf\xe8", "Other", story(9), "2026-01-01 00:00:00", "ex", "en"),
    ("10", "https://ex.com/huge", "Huge", HUGE, "2026-01-01 00:00:00", "ex", "en"),
    ("11", "https://ex.com/d1", "Dup id", story(11), "2026-01-01 00:00:00", "ex", "en"),
    ("11", "https://ex.com/d2", "Dup id later", story(12), "2026-01-03 00:00:00", "ex", "en"),
    ("11", "https://ex.com/d2", "Dup id later", story(12), "2026-01-03 00:00:00", "ex", "en"),  # exact copy
    (None, "https://ex.com/noid", "No id", story(13), "2026-01-01 00:00:00", "ex", "en"),
    ("13abc", "https://ex.com/badid", "Bad id", story(14), "2026-01-01 00:00:00", "ex", "en"),
    ("14", "https://ex.com/baddate", "Bad date", story(15), "sometime last week", "ex", "en"),
]
COLUMNS = ("id", "url", "title", "body", "published_at", "source", "lang")


def _string_column(values) -> pa.Array:
    """A Parquet *string* column whose values may be arbitrary bytes (pyarrow does not validate a view)."""
    raw = [v if v is None or isinstance(v, bytes) else v.encode("utf-8") for v in values]
    return pa.array(raw, type=pa.binary()).view(pa.string())


def write_input(path, rows=ROWS) -> str:
    table = pa.table({c: _string_column([r[i] for r in rows]) for i, c in enumerate(COLUMNS)})
    pq.write_table(table, path)
    return str(path)


@pytest.fixture(scope="module")
def bad_conf():
    return load_config(overrides={"spark": {"shuffle_partitions": 2, "delta_snapshot_partitions": 1},
                                  "input": {"naive_timezone": "Asia/Dhaka", "max_text_chars": 400}})


@pytest.fixture(scope="module")
def runs(spark, bad_conf, tmp_path_factory):
    base = tmp_path_factory.mktemp("bad")
    src = write_input(base / "input.parquet")
    out = str(base / "out")
    first = job.run(spark, src, out, bad_conf, load_pg=False)
    counts = {t: store.read(spark, out, t).count() for t in ("documents", "duplicate_links", "quarantine")}
    second = job.run(spark, src, out, bad_conf, load_pg=False)
    docs = {r.id: r for r in store.read(spark, out, "documents").collect()}
    quarantine = store.read(spark, out, "quarantine").collect()
    links = {(r.duplicate_id, r.canonical_id, r.stage) for r in store.read(spark, out, "duplicate_links").collect()}
    return first, second, counts, docs, quarantine, links, out


def test_every_input_row_is_accounted_for(runs):
    first, _, counts, docs, quarantine, _, _ = runs
    assert first.counts["input_rows"] == len(ROWS)
    assert len(docs) + len(quarantine) == len(ROWS)
    assert first.counts["documents"] == len(docs) == 12 and first.counts["quarantined"] == 4


def test_rerun_adds_no_rows_anywhere(spark, runs):
    _, second, counts, docs, quarantine, links, out = runs
    assert second.counts["input_rows"] == len(ROWS)
    assert counts == {"documents": len(docs), "duplicate_links": len(links), "quarantine": len(quarantine)}


def test_null_and_malformed_urls_are_kept_and_still_deduped_by_content(runs):
    _, _, _, docs, _, links, _ = runs
    assert docs[2].url is None and docs[2].url_hash is None and docs[2].url_error == "url is null"
    assert docs[3].url == "not a url" and docs[3].url_hash is None
    assert docs[3].url_error.startswith("url contains whitespace") and docs[3].content_hash is not None
    assert (2, 1, "content") in links


def test_empty_bodies_get_no_content_hash_and_do_not_collapse(runs):
    _, _, _, docs, _, links, _ = runs
    for i in (4, 5, 6, 7):
        assert docs[i].content_hash is None and docs[i].simhash is None
        assert "empty_body" in docs[i].flags
    assert not {d for d, _, _ in links} & {4, 5, 6, 7}


def test_invalid_utf8_survives_with_flags_and_distinct_urls(runs):
    _, _, _, docs, _, links, _ = runs
    d8, d9 = docs[8], docs[9]
    assert {"invalid_utf8:url", "invalid_utf8:title", "invalid_utf8:body"} <= set(d8.flags)
    assert d8.url == "https://ex.com/caf%E9" and d9.url == "https://ex.com/caf%E8"  # nothing lost
    assert d8.url_hash != d9.url_hash and (9, 8, "url") not in links
    assert d8.title == "Caf\ufffd" and d8.content_hash is not None


def test_huge_document_is_truncated_for_hashing_only(runs):
    _, _, _, docs, _, _, _ = runs
    d = docs[10]
    assert "truncated" in d.flags and d.text_chars == 400
    assert d.body == HUGE and d.simhash is not None


def test_duplicate_id_keeps_the_earliest_and_quarantines_the_full_record(runs):
    _, _, _, docs, quarantine, _, _ = runs
    assert docs[11].url == "https://ex.com/d1"
    dup = [q for q in quarantine if q.raw_id == "11"]
    assert len(dup) == 2 and {q.reason for q in dup} == {"duplicate id"}  # identical copies both kept
    record = json.loads(dup[0].record)
    assert record["body"] == story(12) and record["url"] == "https://ex.com/d2"
    assert record["published_at"] == "2026-01-03 00:00:00"


def test_unusable_ids_are_quarantined_with_reasons(runs):
    _, _, _, _, quarantine, _, _ = runs
    reasons = {q.raw_id: q.reason for q in quarantine}
    assert reasons[None] == "id is null" and reasons["13abc"] == "id is not an integer"
    assert json.loads([q for q in quarantine if q.raw_id == "13abc"][0].record)["title"] == "Bad id"


def test_naive_zoned_and_unparseable_timestamp_strings(runs):
    _, _, _, docs, _, _, _ = runs
    assert docs[1].published_at.replace(tzinfo=UTC) == datetime(2026, 1, 1, 4, 0, tzinfo=UTC)  # Dhaka = UTC+6
    assert docs[3].published_at.replace(tzinfo=UTC) == datetime(2026, 1, 1, 4, 0, tzinfo=UTC)  # explicit +06:00
    assert docs[2].published_at.replace(tzinfo=UTC) == datetime(2026, 1, 2, 0, 0, tzinfo=UTC)  # explicit Z
    assert docs[14].published_at is None
    assert "unparseable_published_at:sometime last week" in docs[14].flags


def test_timestamp_ntz_column_is_read_in_the_naive_timezone(spark, bad_conf, tmp_path):
    path = tmp_path / "ntz.parquet"
    table = pa.table({"id": pa.array([1], pa.int64()), "url": ["https://ex.com/n"], "body": ["b"],
                      "source": ["ex"], "published_at": pa.array([datetime(2026, 6, 1, 12, 0)], pa.timestamp("us"))})
    pq.write_table(table, path)
    raw = input_io.read_input(spark, str(path))
    assert raw.schema["published_at"].dataType.typeName() == "timestamp_ntz"
    got = input_io.conform(raw, bad_conf.input.naive_timezone).collect()[0].published_at
    assert got.replace(tzinfo=UTC) == datetime(2026, 6, 1, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize("drop, named", [("url", "url"), ("published_at", "published_at"), ("body", "body or html")])
def test_missing_columns_name_the_column(spark, drop, named):
    cols = [c for c in ("id", "url", "published_at", "source", "body") if c != drop]
    df = spark.createDataFrame([], ", ".join(f"{c} string" for c in cols))
    with pytest.raises(input_io.InputSchemaError, match=f"missing required column\\(s\\): {named}"):
        input_io.check_columns(df)


def test_percent_escape_keeps_valid_utf8_and_escapes_the_rest():
    assert prepare.percent_escape_invalid_utf8("https://bn.ex/খবর".encode()) == "https://bn.ex/খবর"
    assert prepare.percent_escape_invalid_utf8(b"https://ex/a\xc3") == "https://ex/a%C3"


@pytest.mark.parametrize("raw", [b"ok \xe0\xa6\x95", b"\xed\xa0\x80", b"\xc0\x80", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80",
                                 b"\xef\xbf\xbe", b"\xf0\x9f\x98\x80", b"a\x80", b"\xe0\xa6", b"\xf8\x88\x80\x80\x80"])
def test_spark_utf8_check_agrees_with_python(spark, raw):
    # prepare lets Spark decide which bytes are valid UTF-8; Python must never be handed a string it rejects.
    try:
        raw.decode("utf-8")
        python_ok = True
    except UnicodeDecodeError:
        python_ok = False
    df = spark.createDataFrame([(bytearray(raw),)], "b binary")
    assert df.select(F.is_valid_utf8(F.col("b").cast("string"))).first()[0] == python_ok
