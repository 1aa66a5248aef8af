"""Property: whatever the rows, input_rows == documents + quarantined, and nothing crashes.

Hypothesis generates small snapshots (ids that repeat, are null or not numbers;
URLs, titles and bodies of arbitrary text or bytes; published_at as typed
timestamps of any year, int64 epochs of any size, or arbitrary strings) and
runs the cascade on each in the session's Spark. Every snapshot has rows (an
empty one proves nothing); the explicit examples make sure repeated ids, ids
that are not numbers, invalid UTF-8 and shared stories (links) are always in.
Few generated examples: each one is a Spark job on a shared machine.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from newsdedup.cascade import run_cascade
from newsdedup.io.input import read_input
from newsdedup.report import RunReport as Report

UTC = timezone.utc
STORIES = [" ".join(f"p{k}w{i}" for i in range(30)) for k in range(3)]
any_text = st.one_of(st.none(), st.text(max_size=40), st.binary(max_size=24), st.sampled_from(STORIES))
any_time = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC))
TIMES = {
    "timestamp": st.one_of(st.none(), any_time),
    "epoch": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.integers(-10**12, 10**13)),
    "string": st.one_of(st.none(), st.text(max_size=30), any_time.map(lambda t: t.isoformat())),
}


@st.composite
def snapshots(draw):
    kind = draw(st.sampled_from(sorted(TIMES)))
    row = st.tuples(st.one_of(st.none(), st.integers(-2, 12).map(str), st.sampled_from(["x1", "", " 3 ", "9" * 25])),
                    any_text, any_text, any_text, TIMES[kind], st.one_of(st.none(), st.sampled_from(["ex", "বাংলা"])))
    return kind, draw(st.lists(row, min_size=1, max_size=30))


def _text(values) -> pa.Array:
    raw = [v if v is None or isinstance(v, bytes) else v.encode("utf-8") for v in values]
    return pa.array(raw, type=pa.binary()).view(pa.string())


def write(path, kind, rows) -> str:
    cols = list(zip(*rows)) if rows else [[] for _ in range(6)]
    ts = {"timestamp": pa.timestamp("us", tz="UTC"), "epoch": pa.int64(), "string": pa.string()}[kind]
    pq.write_table(pa.table({"id": pa.array(cols[0], pa.string()), "url": _text(cols[1]), "title": _text(cols[2]),
                             "body": _text(cols[3]), "published_at": pa.array(cols[4], ts),
                             "source": pa.array(cols[5], pa.string())}), path)
    return str(path)


def _usable(raw):
    """The id a row keeps, stated here independently of io.input: an integer in int64's range, else None."""
    if raw is None:
        return None
    text = raw.strip()
    digits = text[1:] if text.startswith("-") else text
    if not digits.isdigit() or not -(2**63) <= int(text) < 2**63:
        return None
    return int(text)


T = datetime(2024, 5, 1, 8, tzinfo=UTC)
# Every way a row becomes a document or goes to quarantine, in one snapshot: ids repeated (twice and three
# times), null, not a number, out of range, padded; invalid UTF-8 text; the same story under several ids.
MIXED = [("1", "https://a.example/1", "T", STORIES[0], T, "ex"),
         ("1", "https://a.example/1b", b"\xff\xfe", STORIES[1], T, "ex"),
         (" 3 ", "https://a.example/3", "T", STORIES[0], None, "বাংলা"),
         ("4", b"https://a.example/\xe9", None, STORIES[0], T, None),
         ("5", None, "T", STORIES[2], T, "ex"),
         ("5", "https://a.example/5", "T", STORIES[2], None, "ex"),
         ("5", "https://a.example/5c", "", "", T, "ex"),
         (None, "https://a.example/n", "T", STORIES[1], T, "ex"),
         ("x1", "https://a.example/x", "T", STORIES[1], T, "ex"),
         ("9" * 25, "https://a.example/big", "T", STORIES[1], T, "ex"),
         ("", None, None, None, None, None),
         ("-2", "https://a.example/1", "T", STORIES[0], T, "ex")]


@settings(max_examples=4, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@example(snapshot=("timestamp", MIXED))
@example(snapshot=("string", [(i, u, t, b, None if p is None else p.isoformat(), s) for i, u, t, b, p, s in MIXED]
                   + [("7", "u", "t", "b", "not a date", None), ("8", "u", "t", "b", "", None)]))
@given(snapshot=snapshots())
def test_every_generated_row_is_a_document_or_quarantined(spark, conf, tmp_path_factory, snapshot):
    kind, rows = snapshot
    assert rows, "an empty snapshot proves nothing"
    path = write(tmp_path_factory.mktemp("prop") / "in.parquet", kind, rows)
    report = Report(run_id="property")
    result = run_cascade(spark, read_input(spark, path), conf, report)
    n_docs, n_quarantined = result.documents.count(), result.quarantine.count()
    assert report.counts["input_rows"] == len(rows) == n_docs + n_quarantined
    assert report.counts["documents"] == n_docs and report.counts["quarantined"] == n_quarantined
    ids = [_usable(r[0]) for r in rows]
    usable = Counter(i for i in ids if i is not None)
    # One document per usable id; every other row in quarantine, for the reason it has.
    assert sorted(r.id for r in result.documents.select("id").collect()) == sorted(usable)
    reasons = Counter(r.reason for r in result.quarantine.select("reason").collect())
    want = Counter({"id is null": sum(r[0] is None for r in rows),
                    "id is not an integer": sum(r[0] is not None and i is None for r, i in zip(rows, ids)),
                    "duplicate id": sum(n - 1 for n in usable.values())})
    assert reasons == +want
    # A link joins two documents of this snapshot, never one to itself.
    links = [(r.duplicate_id, r.canonical_id) for r in result.links.select("duplicate_id", "canonical_id").collect()]
    assert all(d != c and d in usable and c in usable for d, c in links)
    assert len({d for d, _ in links}) == len(links)
