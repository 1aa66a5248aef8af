"""Property: whatever the rows, input_rows == documents + quarantined, and nothing crashes.

Hypothesis generates small snapshots (ids that repeat, are null or not numbers;
URLs, titles and bodies of arbitrary text or bytes; published_at as typed
timestamps of any year, int64 epochs of any size, or arbitrary strings) and
runs the cascade on each in the session's Spark. Few examples: each one is a
Spark job on a shared machine.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
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
    return kind, draw(st.lists(row, max_size=30))


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


@settings(max_examples=3, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(snapshot=snapshots())
def test_every_generated_row_is_a_document_or_quarantined(spark, conf, tmp_path_factory, snapshot):
    kind, rows = snapshot
    path = write(tmp_path_factory.mktemp("prop") / "in.parquet", kind, rows)
    report = Report(run_id="property")
    result = run_cascade(spark, read_input(spark, path), conf, report)
    n_docs, n_quarantined = result.documents.count(), result.quarantine.count()
    assert report.counts["input_rows"] == len(rows) == n_docs + n_quarantined
    assert report.counts["documents"] == n_docs and report.counts["quarantined"] == n_quarantined
    usable = {int(r[0]) for r in rows if r[0] is not None and r[0].strip().lstrip("-").isdigit()
              and -(2**63) <= int(r[0]) < 2**63}
    assert {r.id for r in result.documents.select("id").collect()} == usable
