"""Every class of bad input in tests/bad_input_catalogue.py gets what docs/reliability.md says.

- Row classes: all in one snapshot (two files), run once through `job.run` (stages 1-3, Delta
  written, no Postgres, no stage 4); each class's test reads its rows' fate from that run.
- File classes (a file each, of column types that would change the whole snapshot's schema):
  each file conformed on its own, then all prepared together: `prepared` below, the cascade's
  prepare step, which decides every row's fate (document or quarantine; the stages after it
  read only keys and drop no row).
- Refusals: `newsdedup run` on each, exit 2, one line, nothing written.
- JSON lines: `newsdedup check --insert` on each, against the test Postgres.

The property test draws snapshots of several row and file classes (hypothesis) and checks, per
example, that every row ends where its class says, in documents or quarantine: 25 examples
here, 500 under the `soak` marker (deselected by default: `pytest -m soak` runs it).
"""

from __future__ import annotations

import json
import math
import os
import random
from collections import Counter
from dataclasses import replace
from functools import reduce
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bad_input_catalogue as cat
from cli_runner import run_cli
from newsdedup import job
from newsdedup.config import load_config
from newsdedup.io import store

SMALL = {"spark": {"shuffle_partitions": 2, "delta_snapshot_partitions": 1}, "semantic": {"enabled": False}}


@pytest.fixture(scope="module")
def lean_spark(spark):
    """The session, tuned for runs of a few rows while this module's prepare passes run: adaptive
    execution re-plans every stage (its cost, not the rows', dominated a pass of ~50 rows), and
    one shuffle partition is enough. Restored afterwards: the session is the suite's."""
    wanted = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1"}
    before = {k: spark.conf.get(k) for k in wanted}
    for k, v in wanted.items():
        spark.conf.set(k, v)
    yield spark
    for k, v in before.items():
        spark.conf.set(k, v)


@pytest.fixture(scope="module")
def cat_conf():
    return load_config(overrides={**SMALL, "input": cat.CATALOGUE_CONF})


# ---------------------------------------------------------------- keys: input rows to output rows

def spark_text(raw) -> str | None:
    """raw as Spark's cast to string writes it (the quarantine's raw_id)."""
    if raw is None or isinstance(raw, str):
        return raw
    if isinstance(raw, bool):
        return str(raw).lower()
    if isinstance(raw, float):
        if math.isnan(raw):
            return "NaN"
        if 1e-3 <= abs(raw) < 1e7:
            return repr(raw)
        mantissa, exponent = f"{raw:e}".split("e")   # Java's Double.toString: 1.0E30
        return f"{float(mantissa)!r}E{int(exponent)}"
    return str(raw)


def usable(raw) -> int | None:
    """The id a row keeps, stated independently of io.input: an integer in int64's range, else None."""
    if raw is None or isinstance(raw, bool):
        return None
    if isinstance(raw, float):
        return int(raw) if raw.is_integer() and -(2**63) <= raw < 2**63 else None
    text = str(raw).strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not (digits.isascii() and digits.isdigit()) or not -(2**63) <= int(text) < 2**63:
        return None
    return int(text)


def expected_key(raw, outcome: cat.Outcome):
    if outcome.kind == "processed" or outcome.reason == "duplicate id":
        return ("id", usable(raw))
    return ("raw", spark_text(raw))


def actual(docs: dict, quarantine: list) -> Counter:
    got = Counter((("id", i), "processed", None) for i in docs)
    for q in quarantine:
        key = ("id", usable(q.raw_id)) if q.reason == "duplicate id" else ("raw", q.raw_id)
        got[(key, "quarantined", q.reason)] += 1
    return got


def check_rows(expect: list[tuple[object, cat.Outcome]], docs: dict, quarantine: list, links=None) -> None:
    """Each (raw id, outcome) row's fate, in a run that may hold other rows (of other keys)."""
    want = Counter((expected_key(raw, o), o.kind, o.reason) for raw, o in expect)
    keys = {k for k, _, _ in want}
    got = Counter({k: n for k, n in actual(docs, quarantine).items() if k[0] in keys})
    assert got == want
    for raw, o in expect:
        if o.kind != "processed":
            continue
        doc = docs[usable(raw)]
        for prefix in o.flags:
            assert any(f.startswith(prefix) for f in doc["flags"] or ()), (raw, prefix, doc["flags"])
        if o.published_at is not None:
            assert (doc["ts"] or "") == o.published_at, (raw, doc["ts"])
        if o.url_error is not None:
            assert (doc["url_error"] or "").startswith(o.url_error), (raw, doc["url_error"])
        if o.linked is not None and links is not None:
            assert any(d == usable(raw) and s == o.linked for d, _, s in links), (raw, o.linked)


DOC_COLUMNS = ("id", "flags", "url_error", "cast(published_at as string) AS ts")


def doc_map(rows) -> dict:
    return {r["id"]: r.asDict() for r in rows}


# ---------------------------------------------------------------- the prepare step, on files of any schema

def prepared(spark, conf, inputs: list[str]) -> tuple[dict, list]:
    """(documents by id, quarantine rows) of the cascade's prepare step over the inputs.

    Each input is read and conformed on its own (their column types need not reconcile: a
    published_at of type string in one, int64 in another), then split and fingerprinted
    together, as run_cascade's prepare step does (cascade.run_cascade, prepare_step)."""
    from newsdedup import cascade, prepare
    from newsdedup.io.input import conform, open_input, plausible_range, split_invalid

    read_conf = replace(conf.input, verify="footers")   # damaged files are test_input_files' business
    frames = [conform(open_input(spark, p, read_conf).frame, conf.input.naive_timezone, plausible_range(conf.input))
              for p in inputs]
    valid, invalid = split_invalid(reduce(lambda a, b: a.unionByName(b), frames))
    keys = prepare.fingerprint(valid, conf)
    # One Spark job for both (on a few rows the jobs, not the rows, cost the time).
    docs = keys.where("prepare_error is null").selectExpr(
        *DOC_COLUMNS, "CAST(NULL AS string) AS raw_id", "CAST(NULL AS string) AS reason", "CAST(NULL AS string) AS record")
    quarantine = cascade._quarantine(invalid, keys.where("prepare_error is not null")).selectExpr(
        "CAST(NULL AS bigint) AS id", "CAST(NULL AS array<string>) AS flags", "CAST(NULL AS string) AS url_error",
        "CAST(NULL AS string) AS ts", "raw_id", "reason", "record")
    rows = docs.unionByName(quarantine).collect()
    return doc_map(r for r in rows if r["reason"] is None), [r for r in rows if r["reason"] is not None]


# ---------------------------------------------------------------- row classes: one run

BIG_BODY_CLASS = "body_50_mb"


def catalogue_rows() -> list[tuple[cat.RowClass, list[cat.Row]]]:
    return [(rc, rc.rows((i + 1) * 1000, random.Random(i), big=True)) for i, rc in enumerate(cat.ROW_CLASSES)]


@pytest.fixture(scope="module")
def row_run(spark, cat_conf, tmp_path_factory):
    base = tmp_path_factory.mktemp("catalogue")
    per_class = catalogue_rows()
    cat.write_rows(base / "in", [r for _, rows in per_class for r in rows])
    out = str(base / "out")
    report = job.run(spark, str(base / "in"), out, cat_conf, load_pg=False)
    docs = doc_map(store.read(spark, out, "documents").selectExpr(*DOC_COLUMNS, "length(body) AS body_len").collect())
    quarantine = store.read(spark, out, "quarantine").collect()
    links = {(r.duplicate_id, r.canonical_id, r.stage) for r in store.read(spark, out, "duplicate_links").collect()}
    return {rc.name: rows for rc, rows in per_class}, report, docs, quarantine, links


def test_every_row_of_the_catalogue_run_is_accounted_for(row_run):
    per_class, report, docs, quarantine, _ = row_run
    n = sum(len(rows) for rows in per_class.values())
    assert report.counts["input_rows"] == n == len(docs) + len(quarantine)
    assert report.counts["documents"] == len(docs) and report.counts["quarantined"] == len(quarantine)


@pytest.mark.parametrize("name", [rc.name for rc in cat.ROW_CLASSES])
def test_row_class(row_run, name):
    per_class, _, docs, quarantine, links = row_run
    check_rows([(r.id, r.expect) for r in per_class[name]], docs, quarantine, links)
    if name == BIG_BODY_CLASS:   # stored whole, hashed truncated
        (row,) = per_class[name]
        assert docs[int(row.id)]["body_len"] == cat.FIFTY_MB


# ---------------------------------------------------------------- file classes: one prepare pass

@pytest.fixture(scope="module")
def file_run(lean_spark, cat_conf, tmp_path_factory):
    spark = lean_spark
    d = tmp_path_factory.mktemp("catalogue_files")
    expect, inputs = {}, []
    for i, fc in enumerate(cat.FILE_CLASSES):
        path = d / f"{fc.name}.parquet"
        expect[fc.name] = fc.write(path, (i + 1) * 1000, random.Random(i))
        inputs.append(str(path))
    return expect, *prepared(spark, cat_conf, inputs)


@pytest.mark.parametrize("name", [fc.name for fc in cat.FILE_CLASSES])
def test_file_class(file_run, name):
    expect, docs, quarantine = file_run
    check_rows(expect[name], docs, quarantine)


# ---------------------------------------------------------------- refusals

@pytest.fixture(scope="module")
def conf_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("catconf") / "catalogue.yaml"
    path.write_text(json.dumps({**SMALL, "input": {**cat.CATALOGUE_CONF, "max_line_bytes": cat.JSONL_LIMIT}}),
                    encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("name", [r.name for r in cat.REFUSALS])
def test_refused_in_one_line(spark, tmp_path, conf_file, name):
    rc = next(r for r in cat.REFUSALS if r.name == name)
    out = tmp_path / "out"
    code, _, err = run_cli(["run", "--input", rc.build(tmp_path), "--output", str(out), "--no-postgres",
                            "--conf", conf_file])
    assert code == 2 and err.count("\n") == 1 and err.startswith("newsdedup: error: "), err
    for part in rc.message:
        assert part in err, (part, err)
    assert not (out / "documents").exists()


# ---------------------------------------------------------------- JSON lines: newsdedup check

@pytest.mark.parametrize("name", [j.name for j in cat.JSONL_CLASSES])
def test_jsonl_class(pg_dsn, tmp_path, conf_file, name):
    jc = next(j for j in cat.JSONL_CLASSES if j.name == name)
    src = tmp_path / "in.jsonl"
    src.write_bytes(jc.data)
    code, stdout, err = run_cli(["check", "--pg", pg_dsn, "--insert", "--input", str(src), "--conf", conf_file])
    lines = [json.loads(line) for line in stdout.splitlines()]
    answered = [v["id"] for v in lines if "refused" not in v]
    assert answered == list(jc.answered), (stdout, err)
    # A stream that stops at a bad line rolls back the batch it cut short (test_check): its articles
    # are answered and say they were not stored. Otherwise each one was inserted.
    not_stored = "not inserted: the input stopped at a bad line after it"
    assert all(v.get("error") == (not_stored if jc.error else None) for v in lines if "refused" not in v), stdout
    assert [v.get("id") for v in lines if "refused" in v] == list(jc.too_long)
    if jc.titles:
        import psycopg

        with psycopg.connect(pg_dsn) as conn:
            stored = dict(conn.execute("SELECT id, title FROM documents").fetchall())
        assert [(i, stored.get(i)) for i, _ in jc.titles] == list(jc.titles)
    if jc.error:
        assert code == 2 and err.count("\n") == 1 and err.startswith("newsdedup: error: "), err
        for part in jc.error:
            assert part in err, (part, err)
    else:
        assert code == 0 and (not err or err.startswith("newsdedup: check: ")), err


# ---------------------------------------------------------------- property: draws from every class

DRAWABLE = [*cat.ROW_CLASSES, *cat.FILE_CLASSES]


@st.composite
def snapshots(draw):
    picks = draw(st.lists(st.sampled_from(DRAWABLE), min_size=1, max_size=5))
    return [(c, draw(st.integers(0, 2**32 - 1))) for c in picks]


def check_snapshot(spark, conf, d: Path, picks) -> None:
    rows, expect, inputs = [], [], []
    for slot, (c, seed) in enumerate(picks):
        base, rng = (slot + 1) * 1000, random.Random(seed)
        if isinstance(c, cat.RowClass):
            made = c.rows(base, rng, big=False)
            rows += made
            expect += [(r.id, r.expect) for r in made]
        else:
            path = d / f"{slot}.parquet"
            expect += c.write(path, base, rng)
            inputs.append(str(path))
    # The row files one by one: a directory costs a listing job (the catalogue's run reads one).
    inputs += [str(p) for p in cat.write_rows(d / "rows", rows)] if rows else []
    docs, quarantine = prepared(spark, conf, inputs)
    assert len(docs) + len(quarantine) == len(expect)   # every input row: a document or quarantined
    check_rows(expect, docs, quarantine)


PROPERTY = dict(deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


@settings(max_examples=25, **PROPERTY)
@given(picks=snapshots())
def test_every_drawn_row_is_a_document_or_quarantined(lean_spark, cat_conf, tmp_path_factory, picks):
    check_snapshot(lean_spark, cat_conf, tmp_path_factory.mktemp("prop"), picks)


# NEWSDEDUP_SOAK_EXAMPLES: fewer (or more) examples for a soak on a busy machine.
@pytest.mark.soak
@settings(max_examples=int(os.environ.get("NEWSDEDUP_SOAK_EXAMPLES", "500")), **{**PROPERTY, "derandomize": False})
@given(picks=snapshots())
def test_soak_every_drawn_row_is_a_document_or_quarantined(lean_spark, cat_conf, tmp_path_factory, picks):
    check_snapshot(lean_spark, cat_conf, tmp_path_factory.mktemp("soak"), picks)


def test_nul_in_text_reaches_postgres_as_replacement_character(spark, pg_dsn):
    """The batch load's COPY (pg.stage_dataframe): Postgres text cannot hold U+0000, and one title
    with a NUL failed the whole load (psycopg.DataError)."""
    import psycopg

    from newsdedup.io import pg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (load_id text, id bigint, title text)")
    df = spark.createDataFrame([(1, "a\x00b"), (2, "plain")], "id long, title string")
    assert pg.stage_dataframe(df, pg_dsn, "t", ["id", "title"], "L") == 2
    with psycopg.connect(pg_dsn) as conn:
        got = dict(conn.execute("SELECT id, title FROM t").fetchall())
    assert got == {1: "a\ufffdb", 2: "plain"}


def test_docs_list_every_class():
    """docs/reliability.md is the catalogue's table: a class added here must be documented there."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "reliability.md").read_text(encoding="utf-8")
    names = [c.name for c in [*cat.ROW_CLASSES, *cat.FILE_CLASSES, *cat.REFUSALS, *cat.JSONL_CLASSES]]
    assert len(names) == len(set(names)) >= 40
    assert [n for n in names if f"`{n}`" not in doc] == []
