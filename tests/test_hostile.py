"""Hostile input: bad rows, schemas and configs never abort a batch and never lose text.

Every class of bad row is built into one of three snapshots, each run once
through the command line (`newsdedup run --no-postgres`) in this test
session's Spark:

- A: a directory of five Parquet files whose schemas differ (html-only files,
  pyarrow's null-typed columns, int32 ids, ms timestamps, dates) with typed
  timestamps of year 1 and 9999 and ~30 kinds of broken rows;
- B: integer epochs in seconds, milliseconds, microseconds and nanoseconds,
  string ids, a numeric text column;
- C: timestamp strings with and without zone, dates, digits, garbage.

Each asserts the exit code, that every input row is in documents or
quarantine (and in the report's counts) and that the article text survives.
Schema, config and Postgres errors are cheap runs that must stop with exit
code 2, one line, and nothing written.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from newsdedup.io import store

from cli_runner import run_cli, small_conf

UTC = timezone.utc
T = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
BN = ("ঢাকায় আজ সকাল থেকে ভারী বৃষ্টি হচ্ছে এবং নগরীর বিভিন্ন সড়কে জলাবদ্ধতা দেখা দিয়েছে বলে জানিয়েছে "
      "আবহাওয়া অধিদপ্তর যানবাহন চলাচল ব্যাহত হচ্ছে অফিসগামী মানুষ দুর্ভোগে পড়েছেন")


def story(k: int, n: int = 40) -> str:
    """n words unique to story k: no accidental near-duplicates between rows."""
    return " ".join(f"h{k}q{i}{'klmnopqrst'[(i * k) % 10]}" for i in range(n))


def sview(values) -> pa.Array:
    """A Parquet string column that may hold arbitrary bytes (invalid UTF-8)."""
    raw = [v if v is None or isinstance(v, bytes) else v.encode("utf-8") for v in values]
    return pa.array(raw, type=pa.binary()).view(pa.string())


def ts_col(values, unit="us") -> pa.Array:
    return pa.array(values, type=pa.timestamp(unit, tz="UTC"))


# ---------------------------------------------------------------- snapshot A: typed timestamps, four files

A_MAIN = [  # id, url, title, body, published_at, source, lang
    (1, "https://ex.com/a1", "Control", story(1), T, "ex", "en"),
    (2, "https://ex.com/y1", "Year one", story(2), datetime(1, 1, 1, tzinfo=UTC), "ex", "en"),
    (3, "https://ex.com/y1b", "Year one", story(2), T + timedelta(days=1), "ex", "en"),   # same text as 2
    (4, "https://ex.com/y9999", "Year 9999", story(4), datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), "ex", "en"),
    (5, "https://ex.com/nodate", "No date", story(5), None, "ex", "en"),
    (6, "data:text/html,<p>hello world</p>", "Data URL", story(6), T, "ex", "en"),
    (7, "https://ex.com:99999/p", "Port", story(7), T, "ex", "en"),
    (8, b"https://ex.com/caf\xe9", b"Caf\xe9", b"\xff " + story(8).encode(), T, "ex", "en"),
    (9, "https://ex.com/empty", "", "", T, "ex", "en"),
    (10, "https://ex.com/blank", "   ", " \n\t ", T, "ex", "en"),
    (11, "https://ex.com/nul", "Nul", "a\x00b " + story(11), T, "ex", "en"),
    (12, "https://ex.com/dup1", "Dup id", story(12), T, "ex", "en"),
    (12, "https://ex.com/dup2", "Dup id later", story(13), T + timedelta(hours=1), "ex", "en"),
    (None, "https://ex.com/noid", "No id", story(14), T, "ex", "en"),
    (-5, "https://ex.com/neg", "Negative id", story(15), T, "ex", "en"),
    (2**63 - 1, "https://ex.com/max", "Max id", story(16), T, "ex", "en"),
    (17, "javascript:alert(1)", "JS", story(17), T, "ex", "en"),
    (18, "https://ex.com/" + "a" * 10_000, "Long URL", story(18), T, "ex", "en"),
    (19, "https://ex.com/huge", "Huge", story(19, 3000), T, "ex", "en"),
    (20, "https://ex.com/zw", "\u200b", "\u200b\u200c\u200d\ufeff", T, "ex", "en"),   # invisible only
    (21, "https://ex.com/kl", "Klingon", story(21), T, "ex", "klingon"),
    (22, "https://ex.com/nosrc", "No source", story(22), T, None, "en"),
    (23, "https://ex.com/emoji", "🔥", "🔥" * 50 + " " + story(23), T, "ex", "en"),
    (24, "http://[::1]:80/x", "IPv6", story(24), T, "ex", "en"),
    (25, "https://bn.ex.com/1", "বৃষ্টি", BN, T, "bn-src", None),
    (26, "   ", "Blank URL", story(26), T, "ex", "en"),
    (27, "https://ex.com/titleonly", "Live updates", None, T, "ex", "en"),
    (28, "https://ex.com/twin", "Twin", story(28), T, "ex", "en"),
    (28, "https://ex.com/twin", "Twin", story(28), T, "ex", "en"),   # an exact copy of the row above
    (29, "https://ex.com/\u202eevil", "RTL override", story(29), T, "ex", "en"),
]
A_HTML = [  # id, url, html, published_at, source: a file with no title/body/lang columns at all
    (30, "https://ex.com/h1", f"<html><body><article><h1>Storm</h1><p>{story(30)}</p></article></body></html>", T),
    (31, "https://ex.com/h2", "<html></html>", T),
    (32, "https://ex.com/h3", f"<p>unclosed <b>{story(32)}", T),
]
A_NULLTYPED = [(40, "https://ex.com/n1", story(40)), (41, "https://ex.com/n2", story(41))]
A_INT32 = [(50, "https://ex.com/i1", story(50), T), (51, "https://ex.com/i2", story(51), T + timedelta(hours=2))]
A_DATES = [(60, date(2026, 1, 5)), (61, date(1, 1, 1))]   # a file whose published_at is a date column
A_ROWS = len(A_MAIN) + len(A_HTML) + len(A_NULLTYPED) + len(A_INT32) + len(A_DATES)


def write_a(d: Path) -> str:
    d.mkdir()
    cols = list(zip(*A_MAIN))
    pq.write_table(pa.table({"id": pa.array(cols[0], pa.int64()), "url": sview(cols[1]), "title": sview(cols[2]),
                             "body": sview(cols[3]), "published_at": ts_col(cols[4]), "source": sview(cols[5]),
                             "lang": sview(cols[6])}), d / "main.parquet")
    cols = list(zip(*A_HTML))
    pq.write_table(pa.table({"id": pa.array(cols[0], pa.int64()), "url": cols[1], "html": cols[2],
                             "published_at": ts_col(cols[3]), "source": ["ex"] * len(A_HTML)}), d / "html_only.parquet")
    cols = list(zip(*A_NULLTYPED))
    n = len(A_NULLTYPED)
    pq.write_table(pa.table({"id": pa.array(cols[0], pa.int64()), "url": cols[1], "title": pa.nulls(n, pa.null()),
                             "body": cols[2], "published_at": ts_col([T] * n), "source": ["ex"] * n,
                             "lang": pa.nulls(n, pa.null())}), d / "null_typed.parquet")
    cols = list(zip(*A_INT32))
    pq.write_table(pa.table({"id": pa.array(cols[0], pa.int32()), "url": cols[1], "body": cols[2],
                             "published_at": ts_col(cols[3], "ms"), "source": ["ex"] * len(A_INT32)}),
                   d / "int32_ms.parquet")
    n = len(A_DATES)
    pq.write_table(pa.table({"id": pa.array([r[0] for r in A_DATES], pa.int64()),
                             "url": [f"https://ex.com/d{r[0]}" for r in A_DATES], "body": [story(r[0]) for r in A_DATES],
                             "published_at": pa.array([r[1] for r in A_DATES], pa.date32()), "source": ["ex"] * n}),
                   d / "dates.parquet")
    return str(d)


# ---------------------------------------------------------------- snapshot B: integer epochs

EPOCH_S = 1_700_000_000   # 2023-11-14 22:13:20 UTC
B_ROWS = [  # id (string column), published_at (int64), body
    ("1", EPOCH_S, story(61)),
    ("2", EPOCH_S * 1_000, story(62)),
    ("3", EPOCH_S * 1_000_000, story(63)),
    ("4", EPOCH_S * 1_000_000_000, story(64)),
    ("5", 0, story(65)),
    ("6", -1_000_000_000, story(66)),                 # 1938-04-24 22:13:20
    ("7", 9_000_000_000_000_000_000, story(67)),      # ns: year 2255, implausible
    ("8", 90_000_000_000, story(68)),                 # s: year 4821, implausible
    ("9", -(2**63), story(69)),                       # out of any range: unparseable
    ("10", None, story(70)),
    ("12a", EPOCH_S, story(72)),                      # not an integer id
    (" 13 ", EPOCH_S, story(73)),                     # padded id: still 13
]


def write_b(path: Path) -> str:
    cols = list(zip(*B_ROWS))
    n = len(B_ROWS)
    pq.write_table(pa.table({"id": list(cols[0]), "url": [f"https://ex.com/b{i}" for i in range(n)],
                             "body": list(cols[2]), "published_at": pa.array(cols[1], pa.int64()),
                             "source": pa.array([7] * n, pa.int64())}), path)
    return str(path)


# ---------------------------------------------------------------- snapshot C: timestamp strings

C_ROWS = [  # id, published_at string, expected published_at (UTC, as Spark prints it) or None, expected flag prefix
    (1, "0001-01-01T00:00:00Z", "0001-01-01 00:00:00", "implausible_published_at:"),
    (2, "9999-12-31T23:59:59Z", "9999-12-31 23:59:59", "implausible_published_at:"),
    (3, "2026-01-01", "2026-01-01 00:00:00", None),
    (4, "1700000000000", "2023-11-14 22:13:20", None),
    (5, "", None, "unparseable_published_at:"),
    (6, "not a date", None, "unparseable_published_at:not a date"),
    (7, "2026-13-45T00:00:00Z", None, "unparseable_published_at:"),
    (8, "1799-12-31T00:00:00Z", "1799-12-31 00:00:00", "implausible_published_at:"),
    (9, "2026-03-01T12:00:00+06:00", "2026-03-01 06:00:00", None),
    (10, "2026-03-01 12:00:00", "2026-03-01 12:00:00", None),
]


def write_c(path: Path) -> str:
    n = len(C_ROWS)
    pq.write_table(pa.table({"id": pa.array([r[0] for r in C_ROWS], pa.int64()),
                             "url": [f"https://ex.com/c{r[0]}" for r in C_ROWS],
                             "body": [story(80 + r[0]) for r in C_ROWS], "published_at": [r[1] for r in C_ROWS],
                             "source": ["ex"] * n}), path)
    return str(path)


# ---------------------------------------------------------------- running

@pytest.fixture(scope="module")
def conf_file(tmp_path_factory):
    return small_conf(tmp_path_factory, "hostile", "max_text_chars: 400")


def run_snapshot(spark, src: str, out: Path, conf_file: str):
    code, stdout, err = run_cli(["run", "--input", src, "--output", str(out), "--no-postgres", "--conf", conf_file])
    assert code == 0, err
    (report_file,) = (out / "reports").glob("*.json")
    docs = {r["id"]: r for r in store.read(spark, str(out), "documents").selectExpr(
        "id", "url", "title", "body", "cast(published_at as string) AS ts", "flags", "url_error", "content_hash",
        "lang").collect()}
    quarantine = store.read(spark, str(out), "quarantine").collect()
    links = {(r.duplicate_id, r.canonical_id, r.stage) for r in store.read(spark, str(out), "duplicate_links").collect()}
    return json.loads(report_file.read_text())["counts"], docs, quarantine, links


@pytest.fixture(scope="module")
def run_a(spark, tmp_path_factory, conf_file):
    base = tmp_path_factory.mktemp("hostile_a")
    return run_snapshot(spark, write_a(base / "in"), base / "out", conf_file)


@pytest.fixture(scope="module")
def run_b(spark, tmp_path_factory, conf_file):
    base = tmp_path_factory.mktemp("hostile_b")
    return run_snapshot(spark, write_b(base / "in.parquet"), base / "out", conf_file)


@pytest.fixture(scope="module")
def run_c(spark, tmp_path_factory, conf_file):
    base = tmp_path_factory.mktemp("hostile_c")
    return run_snapshot(spark, write_c(base / "in.parquet"), base / "out", conf_file)


def assert_accounted(counts, docs, quarantine, n_rows):
    assert counts["input_rows"] == n_rows
    assert counts["documents"] + counts["quarantined"] == n_rows
    assert len(docs) + len(quarantine) == n_rows


def flag(doc, prefix: str) -> str | None:
    return next((f for f in doc["flags"] if f.startswith(prefix)), None)


# ---------------------------------------------------------------- A

def test_a_every_row_is_a_document_or_quarantined(run_a):
    counts, docs, quarantine, _ = run_a
    assert_accounted(counts, docs, quarantine, A_ROWS)
    assert {q.reason for q in quarantine} == {"id is null", "duplicate id"} and len(quarantine) == 3


def test_a_no_article_text_is_lost(run_a):
    _, docs, quarantine, _ = run_a
    stored = {(d["id"], d["body"]) for d in docs.values()}
    stored |= {(json.loads(q.record).get("id"), json.loads(q.record).get("body")) for q in quarantine}
    for row in A_MAIN:
        rid, body = row[0], row[3]
        if isinstance(body, str) and body:
            assert any(b == body for i, b in stored if str(i) == str(rid) or (rid is None and i is None)), rid
    assert docs[8]["body"] == "\ufffd " + story(8) and "invalid_utf8:body" in docs[8]["flags"]
    for i in (30, 32):   # html-only file: the text was extracted, not dropped
        assert story(i).split()[0] in docs[i]["body"] and "from_html" in docs[i]["flags"]
    for i in (40, 41, 50, 51, 60, 61):
        assert docs[i]["body"] == story(i)


def test_a_year_1_and_9999_are_kept_flagged_and_ordered_last(run_a):
    counts, docs, _, links = run_a
    assert counts["bad_published_at"] == 3 and counts["text_from_html"] == 3   # ids 2, 4, 61; 30, 31, 32
    assert docs[2]["ts"] == "0001-01-01 00:00:00" and flag(docs[2], "implausible_published_at:0001-01-01")
    assert docs[4]["ts"] == "9999-12-31 23:59:59" and flag(docs[4], "implausible_published_at:9999")
    # 2 says year 1, but an implausible date orders last: the 2026 copy is the canonical.
    assert (2, 3, "content") in links and (3, 2, "content") not in links
    assert "no_published_at" in docs[5]["flags"] and docs[5]["ts"] is None
    assert docs[60]["ts"] == "2026-01-05 00:00:00" and not docs[60]["flags"]   # a date column, merged with timestamps
    assert docs[61]["ts"] == "0001-01-01 00:00:00" and flag(docs[61], "implausible_published_at:")


def test_a_urls_have_clear_reasons(run_a):
    _, docs, _, _ = run_a
    assert docs[6]["url_error"] == "unsupported scheme 'data'"
    assert docs[17]["url_error"] == "unsupported scheme 'javascript'"
    assert docs[7]["url_error"] == "invalid port '99999'"
    assert docs[26]["url_error"] == "url is empty"
    assert docs[24]["url_error"] is None and docs[18]["url_error"] is None and docs[29]["url_error"] is None
    assert docs[8]["url"] == "https://ex.com/caf%E9"


def test_a_empty_and_invisible_bodies_get_no_content_hash(run_a):
    _, docs, _, links = run_a
    for i in (9, 10, 20, 27, 31):
        assert docs[i]["content_hash"] is None and "empty_body" in docs[i]["flags"], i
    assert not {d for d, _, _ in links} & {9, 10, 20, 27, 31}


def test_a_odd_ids_languages_and_sizes(run_a):
    _, docs, quarantine, _ = run_a
    assert -5 in docs and 2**63 - 1 in docs
    assert docs[12]["body"] == story(12)
    assert sum(q.raw_id == "28" for q in quarantine) == 1 and docs[28]["body"] == story(28)
    assert "truncated" in docs[19]["flags"] and docs[19]["body"] == story(19, 3000)
    assert docs[25]["lang"] == "bn" and docs[21]["content_hash"] is not None
    assert docs[11]["body"].startswith("a\x00b") and docs[22]["content_hash"] is not None
    assert docs[40]["title"] is None and docs[50]["ts"] == "2026-01-05 08:00:00"


# ---------------------------------------------------------------- B

def test_b_integer_epochs_in_any_unit(run_b):
    counts, docs, quarantine, _ = run_b
    assert_accounted(counts, docs, quarantine, len(B_ROWS))
    assert [q.raw_id for q in quarantine] == ["12a"] and json.loads(quarantine[0].record)["body"] == story(72)
    for i in (1, 2, 3, 4, 13):
        assert docs[i]["ts"] == "2023-11-14 22:13:20" and not docs[i]["flags"], i
    assert docs[5]["ts"] == "1970-01-01 00:00:00" and docs[6]["ts"] == "1938-04-24 22:13:20"
    assert docs[7]["ts"].startswith("2255-") and flag(docs[7], "implausible_published_at:9000000000000000000")
    assert docs[8]["ts"].startswith("4821-") and flag(docs[8], "implausible_published_at:")
    assert docs[9]["ts"] is None and flag(docs[9], "unparseable_published_at:-9223372036854775808")
    assert "no_published_at" in docs[10]["flags"]
    assert all(d["body"] == story(60 + i) for i, d in docs.items())


# ---------------------------------------------------------------- C

def test_c_timestamp_strings(run_c):
    counts, docs, quarantine, _ = run_c
    assert_accounted(counts, docs, quarantine, len(C_ROWS))
    for i, _, ts, prefix in C_ROWS:
        assert docs[i]["ts"] == ts, i
        assert (flag(docs[i], prefix) is not None) if prefix else not docs[i]["flags"], (i, docs[i]["flags"])
        assert docs[i]["body"] == story(80 + i)


# ---------------------------------------------------------------- schemas that stop the run (exit 2)

def _small(path: Path, **cols) -> str:
    base = {"id": pa.array([1], pa.int64()), "url": ["https://ex.com/s"], "body": ["text"],
            "published_at": ts_col([T]), "source": ["ex"]}
    base.update(cols)
    pq.write_table(pa.table({k: v for k, v in base.items() if v is not None}), path)
    return str(path)


def _schema_cases(d: Path):
    conflict = d / "conflict"
    conflict.mkdir()
    _small(conflict / "as_string.parquet", published_at=["2026-01-01"])
    _small(conflict / "as_epoch.parquet", published_at=pa.array([EPOCH_S], pa.int64()))
    yield "conflicting published_at types", str(conflict), ["published_at", "as_string.parquet", "as_epoch.parquet"]
    yield "missing url column", _small(d / "nourl.parquet", url=None), ["missing required column(s): url"]
    yield "no such input", str(d / "nowhere"), ["no such file or directory"]
    yield "body is a struct", _small(d / "struct.parquet", body=pa.array([{"text": "x"}])), ["'body'", "struct"]
    yield "boolean published_at", _small(d / "bool.parquet", published_at=[True]), ["published_at", "boolean"]


def test_bad_schemas_stop_with_one_line_and_exit_2(spark, tmp_path, conf_file):
    for name, src, words in _schema_cases(tmp_path):
        out = tmp_path / f"out_{len(name)}_{name.split()[0]}"
        code, _, err = run_cli(["run", "--input", src, "--output", str(out), "--no-postgres", "--conf", conf_file])
        assert code == 2, (name, err)
        line = err.strip()
        assert line.count("\n") == 0 and line.startswith("newsdedup: error:"), (name, err)
        for w in words:
            assert w in line, (name, w, line)
        assert not (out / "documents").exists(), name


def test_an_unreachable_postgres_stops_the_run_before_any_computation(spark, tmp_path, conf_file):
    out = tmp_path / "out"
    dsn = "host=127.0.0.1 port=1 user=nobody password=hunter2 dbname=x connect_timeout=3"
    code, _, err = run_cli(["run", "--input", _small(tmp_path / "ok.parquet"), "--output", str(out),
                            "--pg", dsn, "--conf", conf_file])
    assert code == 2 and err.count("\n") == 1 and "cannot connect to Postgres (host=127.0.0.1 port=1" in err
    assert "hunter2" not in err
    assert not (out / "documents").exists() and not (out / "_newsdedup.lock").exists()


def test_an_empty_snapshot_is_a_run_with_zero_rows(spark, tmp_path, conf_file):
    src = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"id": pa.array([], pa.int64()), "url": pa.array([], pa.string()),
                             "body": pa.array([], pa.string()), "published_at": ts_col([]),
                             "source": pa.array([], pa.string())}), src)
    counts, docs, quarantine, links = run_snapshot(spark, str(src), tmp_path / "out", conf_file)
    assert counts["input_rows"] == 0 and not docs and not quarantine and not links


# ---------------------------------------------------------------- configs that stop the run (exit 2, no Spark)

@pytest.mark.parametrize("yaml_text, named", [
    ("url: {tracking_params: 'utm_*'}", "url.tracking_params='utm_*': expected a list of strings"),
    ("url: {tracking_params: ['*']}", "url.tracking_params[0]"),
    ("simhash: {max_band_bucket: -1}", "simhash.max_band_bucket=-1"),
    ("input: {max_text_chars: -5}", "input.max_text_chars=-5"),
    ("input: {naive_timezone: Mars/Olympus}", "input.naive_timezone='Mars/Olympus'"),
    ("simhash: {bands: four}", "simhash.bands='four': expected an integer"),
    ("postgres: {listen: '127.0.0.1:99999'}", "postgres.listen='127.0.0.1:99999'"),
    ("postgres: {listen: 5433}", "postgres.listen=5433: expected a string"),
    ("input: {published_at_min: last year}", "input.published_at_min='last year'"),
    ("input: {published_at_min: '2020-01-01', published_at_max: '2000-01-01'}", "input.published_at_max='2000-01-01'"),
    ("lock: {heartbeat_s: 10, stale_after_s: 5}", "lock.stale_after_s=5"),
    ("lock: {heartbeat_s: 0}", "lock.heartbeat_s=0"),
    ("spark: {shuffle_partitions: 0}", "spark.shuffle_partitions=0"),
    ("semantic: {thresholds: {same_language: 2}}", "semantic.thresholds.same_language=2"),
    ("imput: {max_text_chars: 5}", "imput: unknown key"),
    ("- just\n- a list", "top level must be a mapping"),
    ("input: {max_text_chars: [", "not valid YAML"),
])
def test_bad_configs_stop_before_any_spark_work(tmp_path, yaml_text, named):
    conf = tmp_path / "bad.yaml"
    conf.write_text(yaml_text, encoding="utf-8")
    out = tmp_path / "out"
    code, _, err = run_cli(["run", "--input", str(tmp_path / "missing"), "--output", str(out), "--conf", str(conf)])
    assert code == 2 and named in err and err.count("\n") == 1, err
    assert not out.exists()


# ---------------------------------------------------------------- pure URL cases

@pytest.mark.parametrize("url, reason", [
    ("https://ex.com:99999/a", "invalid port '99999'"),
    ("https://ex.com:65536/a", "invalid port '65536'"),
    ("data:text/plain,hello world", "unsupported scheme 'data'"),
    ("mailto:someone@ex.com", "unsupported scheme 'mailto'"),
])
def test_url_reasons(url, reason):
    from newsdedup.stages.url import UrlError, UrlRules, normalize_url

    with pytest.raises(UrlError, match=reason):
        normalize_url(url, UrlRules((), frozenset()))
    assert normalize_url("https://ex.com:65535/a", UrlRules((), frozenset())).canonical == "https://ex.com:65535/a"
