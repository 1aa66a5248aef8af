"""A slice's closure reads its candidates' stored features from Postgres, only where Postgres holds them
for the same text and settings, and ends with the same links as when it derives them from the text.

The sample is stored without the stage-3 duplicates of a run over all of it (loaded into a real
Postgres); those duplicates then come as a slice, so its closure verifies pairs whose other side is
stored. A Postgres row whose content_hash or settings tag differs from what the run expects must not
be read (a re-crawl loaded late, a load made with other settings): that document is read as text.
"""

from __future__ import annotations

import shutil

import pandas as pd
import psycopg
import pytest

from newsdedup import job
from newsdedup.io import store

from conftest import SAMPLE, fresh_database


def keyset(rows):
    return {(r["duplicate_id"], r["canonical_id"], r["stage"], round(r["score"], 9)) for r in rows}


@pytest.fixture(scope="module")
def split(spark, conf, tmp_path_factory):
    """(root, the slice's path, the links of one run over the whole sample)."""
    root = tmp_path_factory.mktemp("closure_pg")
    job.run(spark, str(SAMPLE), str(root / "full"), conf, load_pg=False)
    links = store.read(spark, str(root / "full"), "duplicate_links").collect()
    near = {r["duplicate_id"] for r in links if r["stage"] == "simhash"}
    assert len(near) >= 3
    articles = pd.read_parquet(SAMPLE)
    articles[~articles["id"].isin(near)].to_parquet(root / "stored.parquet")
    articles[articles["id"].isin(near)].to_parquet(root / "slice.parquet")
    return root, str(root / "slice.parquet"), keyset(links)


def _stored(spark, conf, root, name, dsn):
    """The sample without the slice, stored in a fresh output (and loaded into dsn when given)."""
    out = str(root / name)
    shutil.rmtree(out, ignore_errors=True)
    job.run(spark, str(root / "stored.parquet"), out, conf, dsn=dsn, load_pg=dsn is not None)
    return out


def test_the_closure_reads_stored_features_from_postgres_and_links_as_from_text(spark, conf, split, pg_server_dsn):
    root, slice_path, whole = split
    by_text = _stored(spark, conf, root, "by_text", None)
    text_report = job.run(spark, slice_path, by_text, conf, load_pg=False)
    assert text_report.counts["incremental.features_from_text"] > 0
    assert text_report.counts["incremental.features_from_postgres"] == 0

    with fresh_database(pg_server_dsn) as dsn:
        by_pg = _stored(spark, conf, root, "by_pg", dsn)
        report = job.run(spark, slice_path, by_pg, conf, dsn=dsn)
    assert report.counts["incremental.features_from_postgres"] == text_report.counts["incremental.features_from_text"]
    assert report.counts["incremental.features_from_text"] == 0
    assert keyset(store.active_links(spark, by_pg).collect()) == keyset(store.active_links(spark, by_text).collect()) == whole


@pytest.mark.parametrize("stale", ["content_hash", "stage3_settings"])
def test_a_postgres_row_of_other_text_or_settings_is_not_read(spark, conf, split, pg_server_dsn, stale):
    root, slice_path, whole = split
    with fresh_database(pg_server_dsn) as dsn:
        out = _stored(spark, conf, root, f"stale_{stale}", dsn)
        with psycopg.connect(dsn) as c:   # every stored row looks made from other text / with other settings
            c.execute(f"UPDATE documents SET {stale} = 'other'")
        report = job.run(spark, slice_path, out, conf, dsn=dsn)
    assert report.counts["incremental.features_from_postgres"] == 0
    assert report.counts["incremental.features_from_text"] > 0
    assert keyset(store.active_links(spark, out).collect()) == whole


def test_the_features_verified_are_the_ones_read_from_postgres(spark, conf, split, pg_server_dsn):
    """Postgres's shingle sets emptied behind the run's back (the same text and settings tags): the
    slice's pairs to stored documents then fail verification, which shows the closure verified what it
    read from Postgres and did not read the stored text."""
    root, slice_path, whole = split
    with fresh_database(pg_server_dsn) as dsn:
        out = _stored(spark, conf, root, "emptied", dsn)
        with psycopg.connect(dsn) as c:
            c.execute("UPDATE documents SET shingles = '\\x'::bytea WHERE shingles IS NOT NULL")
        report = job.run(spark, slice_path, out, conf, dsn=dsn)
    assert report.counts["incremental.features_from_postgres"] > 0
    assert report.counts["incremental.features_from_text"] == 0
    near = {k for k in whole if k[2] == "simhash"}
    assert not near & keyset(store.active_links(spark, out).collect())
