"""Ids across slices: another article under a stored id is never a silent replacement; a re-crawl updates."""

from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql import functions as F

from newsdedup import job
from newsdedup.io import store

from conftest import SAMPLE

ID = 5


@pytest.fixture(scope="module")
def first(spark, conf, tmp_path_factory):
    """The sample stored once; returns (root, articles, the stored row of ID)."""
    root = tmp_path_factory.mktemp("ids")
    job.run(spark, str(SAMPLE), str(root / "out"), conf, load_pg=False)
    articles = pd.read_parquet(SAMPLE)
    return root, articles


def slice_with(root, articles, name, **changes):
    row = articles[articles["id"] == ID].copy()
    for k, v in changes.items():
        row[k] = v
    path = root / f"{name}.parquet"
    row.to_parquet(path)
    return str(path)


def stored_row(spark, out):
    return store.read(spark, out, "documents").where(F.col("id") == ID).first()


def test_another_article_under_a_stored_id_is_quarantined_and_the_stored_one_kept(first, spark, conf, tmp_path):
    root, articles = first
    out = str(tmp_path / "out")
    job.run(spark, str(SAMPLE), out, conf, load_pg=False)
    before = stored_row(spark, out)
    path = slice_with(root, articles, "other", url="https://example.org/a-different-story",
                      title="A different story", body="Nothing like the stored article at all. " * 5)
    report = job.run(spark, path, out, conf, load_pg=False)
    assert (report.counts["id_collisions"], report.counts["recrawled"]) == (1, 0)
    assert (report.counts["documents"], report.counts["quarantined"], report.counts["input_rows"]) == (0, 1, 1)
    after = stored_row(spark, out)
    assert (after.url, after.title, after.body) == (before.url, before.title, before.body)
    q = store.read(spark, out, "quarantine").where(F.col("run_id") == report.run_id).collect()
    assert [(r.raw_id, r.reason.split(":")[0]) for r in q] == [(str(ID), "id_collision")]
    assert "a-different-story" in q[0].record


def test_with_policy_replace_the_newcomer_replaces_it(first, spark, conf, tmp_path):
    root, articles = first
    out = str(tmp_path / "out")
    job.run(spark, str(SAMPLE), out, conf, load_pg=False)
    path = slice_with(root, articles, "other2", url="https://example.org/another-story", title="Another story")
    report = job.run(spark, path, out, conf.with_overrides({"input": {"id_collision": "replace"}}), load_pg=False)
    assert report.counts["id_collisions"] == 1 and report.counts["documents"] == 1
    assert stored_row(spark, out).url == "https://example.org/another-story"


def test_a_recrawl_of_the_same_article_updates_it_and_history_keeps_the_old_row(first, spark, conf, tmp_path,
                                                                                monkeypatch):
    from delta.tables import DeltaTable

    root, articles = first
    out = str(tmp_path / "out")
    job.run(spark, str(SAMPLE), out, conf, load_pg=False)
    before = stored_row(spark, out)
    # The same canonical URL (a tracking parameter does not change it), a corrected title.
    url = before.url + ("&" if "?" in before.url else "?") + "utm_source=feed"
    recrawl = slice_with(root, articles, "recrawl", url=url, title="Corrected: " + before.title)
    path = store.table_path(out, "documents")
    version = DeltaTable.forPath(spark, path).history(1).first()["version"]
    opened = []
    real_for_path = DeltaTable.forPath

    def for_path(session, where, *args):   # a spy: Delta itself still opens every table
        opened.append(where)
        return real_for_path(session, where, *args)

    monkeypatch.setattr(DeltaTable, "forPath", for_path)
    report = job.run(spark, recrawl, out, conf, load_pg=False)
    assert (report.counts["recrawled"], report.counts["id_collisions"]) == (1, 0)
    # Nothing quarantined: no MERGE into the quarantine table (one of no rows cost 0.3-2 s a slice).
    assert report.counts["quarantined"] == 0 and store.table_path(out, "documents") in opened
    assert store.table_path(out, "quarantine") not in opened
    assert stored_row(spark, out).title == "Corrected: " + before.title
    old = spark.read.format("delta").option("versionAsOf", version).load(path).where(F.col("id") == ID).first()
    assert old.title == before.title
