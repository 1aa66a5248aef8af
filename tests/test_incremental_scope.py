"""An incremental run reruns the slice's closure: each pair relation brings in the stored documents it must.

Three stored documents are each related to one newcomer by one relation only (the same URL, the
same short text without a SimHash, a near-duplicate text), and an older newcomer takes each of
their clusters over. Four other stored documents (one stored link among them) are related to
nothing new. The slice's run must rerun exactly the six related documents and end with the links
of one run over everything; a closure that misses a relation leaves a stored document canonical
where the full run links it (drop the content-hash join in incremental.closure and this test fails).
"""

from __future__ import annotations

import random

import pandas as pd
import pytest

from newsdedup import job
from newsdedup.io import store

DAY1, DAY2 = pd.Timestamp("2024-05-01 06:00", tz="UTC"), pd.Timestamp("2024-05-02 06:00", tz="UTC")


def text(seed: int, words: int = 80) -> str:
    rng = random.Random(seed)
    return " ".join(f"w{rng.randrange(100_000)}" for _ in range(words)) + "."


def edited(body: str) -> str:
    words = body.split()
    words[10], words[50] = "changed", "edited"
    return " ".join(words)


def row(i, url, title, body, when):
    return {"id": i, "url": url, "title": title, "body": body, "published_at": when, "source": "s", "lang": "en"}


STORED = [
    row(10, "https://a.example/story-1", "Story one", text(1), DAY2),
    row(20, "https://a.example/short-2", "Rain stops play", "Match abandoned.", DAY2),
    row(30, "https://a.example/long-3", "Story three", text(3), DAY2),
    row(40, "https://b.example/4", "Unrelated four", text(4), DAY2),
    row(41, "https://b.example/5", "Unrelated five", text(5), DAY2),
    row(42, "https://b.example/6", "Unrelated six", text(6), DAY1),
    row(43, "https://b.example/7", "Unrelated six", edited(text(6)), DAY2),   # a stored link, 43 -> 42
]
NEW = [
    row(11, "https://a.example/story-1", "Story one, rewritten", text(11), DAY1),   # same URL
    row(21, "https://c.example/other-21", "Rain stops play", "Match abandoned.", DAY1),   # same short text
    row(31, "https://c.example/other-31", "Story three", edited(text(3)), DAY1),   # near-duplicate
]


def keyset(df):
    return {(r.duplicate_id, r.canonical_id, r.stage, round(r.score, 9)) for r in df.collect()}


def slice_files(root, stored: list[dict], new: list[dict]) -> dict[str, str]:
    """Parquet files of the stored rows, the new ones and both, under root: {"stored", "new", "all"}."""
    paths = {}
    for name, rows in (("stored", stored), ("new", new), ("all", stored + new)):
        paths[name] = str(root / f"{name}.parquet")
        pd.DataFrame(rows).astype({"published_at": "datetime64[us, UTC]"}).to_parquet(paths[name])
    return paths


@pytest.fixture(scope="module")
def outcome(spark, conf, tmp_path_factory):
    root = tmp_path_factory.mktemp("scope")
    paths = slice_files(root, STORED, NEW)
    full = job.run(spark, paths["all"], str(root / "full"), conf, load_pg=False)
    out = str(root / "slices")
    job.run(spark, paths["stored"], out, conf, load_pg=False)
    second = job.run(spark, paths["new"], out, conf, load_pg=False)
    return keyset(store.read(spark, str(root / "full"), "duplicate_links")), keyset(
        store.active_links(spark, out)), full, second


def test_each_relation_brings_in_its_stored_document_and_nothing_else(outcome):
    whole, active, full, second = outcome
    # Every relation links: 10 -> 11 (url), 20 -> 21 (content), 30 -> 31 (simhash), and 43 -> 42.
    assert {(d, c, s) for d, c, s, _ in whole} == {(10, 11, "url"), (20, 21, "content"), (30, 31, "simhash"),
                                                   (43, 42, "simhash")}
    assert active == whole
    assert second.counts["incremental.affected_documents"] == 6      # 11, 21, 31 and 10, 20, 30
    assert second.counts["existing_documents"] == len(STORED)
    assert [second.counts[k] for k in ("links.total", "unique_documents")] == \
        [full.counts[k] for k in ("links.total", "unique_documents")]


# ------------------------------------------------------------------ reading stored text by date

DAY0 = pd.Timestamp("2024-03-01 06:00", tz="UTC")


def on_day(d: int) -> pd.Timestamp:
    return DAY0 + pd.Timedelta(days=d)


# Sixty stored articles, one a day, in files of a few days each (layout.max_file_size 4k). The slice is
# dated on the last two days, as a backfill's next slice would be: its own days alone name a few of
# the stored files, so the affected documents' rows are read by date (incremental.restrict). Two of
# its relations reach far back, and those rows must be read from their own days' files: an edited
# copy of day 2's article (stage 3) and day 10's article under its URL (stage 1).
DATED_STORED = [row(100 + d, f"https://d.example/day-{d}", f"Day {d}", text(1000 + d), on_day(d)) for d in range(60)]
DATED_NEW = [
    row(200, "https://e.example/copy-58", "Day 58", edited(text(1058)), on_day(59)),    # near, in the window
    row(201, "https://e.example/copy-2", "Day 2", edited(text(1002)), on_day(59)),      # near, day 2
    row(202, "https://d.example/day-10", "Day ten again", text(2010), on_day(58)),       # URL, day 10
    row(203, "https://e.example/new", "New", text(2011), on_day(59)),
]


@pytest.fixture(scope="module")
def dated(spark, conf, tmp_path_factory):
    root = tmp_path_factory.mktemp("dated")
    paths = slice_files(root, DATED_STORED, DATED_NEW)
    small = conf.with_overrides({"layout": {"max_file_size": "4k"}})
    job.run(spark, paths["all"], str(root / "full"), small, load_pg=False)
    out = str(root / "slices")
    job.run(spark, paths["stored"], out, small, load_pg=False)
    files = len(spark.read.format("delta").load(f"{out}/documents").inputFiles())
    second = job.run(spark, paths["new"], out, small, load_pg=False)
    return keyset(store.read(spark, str(root / "full"), "duplicate_links")), keyset(
        store.active_links(spark, out)), second, files


def test_a_slice_of_a_few_days_reads_stored_text_by_date_and_keeps_every_link(dated):
    whole, active, second, files = dated
    assert {(d, c, s) for d, c, s, _ in whole} == {(200, 158, "simhash"), (201, 102, "simhash"), (202, 110, "url")}
    assert files >= 8, f"the stored documents are {files} files: too few for a read by date to skip any"
    assert second.counts["incremental.read_by_date"] == 1
    assert active == whole


def test_a_pass_reads_the_slices_frontier_keys_from_the_slice_and_the_others_from_the_archive(spark):
    """frontier_keys: every frontier document's key row once, whichever side holds it; the slice's
    rows are read from the slice, so a slice row that the archive side lacks is still found there."""
    import numpy as np
    import pyarrow as pa

    from newsdedup.incremental import KEY_COLUMNS, frontier_keys

    def keys(ids, tag):
        return spark.createDataFrame(pa.table({
            "id": pa.array(ids, pa.int64()), "url_hash": [f"{tag}u{i}" for i in ids],
            "content_hash": [f"{tag}c{i}" for i in ids], "lang": ["en"] * len(ids),
            "simhash_w": pa.array(ids, pa.int64()), "mh_bands": [[i, -i] for i in ids]})).select(*KEY_COLUMNS)

    # The archive side deliberately lacks the slice's rows 1-3 and tags its rows: a frontier row of
    # the slice read from the archive would be missing; one of the archive read from the slice too.
    archive, slice_ = keys([4, 5, 6, 7], "a"), keys([1, 2, 3], "s")
    seed_ids = np.array([1, 2, 3], np.int64)
    got = frontier_keys(spark, archive, slice_, seed_ids, np.array([1, 3, 5, 6], np.int64)).to_pylist()
    assert sorted((r["id"], r["url_hash"], r["mh_bands"][1]) for r in got) == [
        (1, "su1", -1), (3, "su3", -3), (5, "au5", -5), (6, "au6", -6)]
    assert [r["id"] for r in frontier_keys(spark, archive, slice_, seed_ids,
                                           np.array([2], np.int64)).to_pylist()] == [2]
    assert sorted(r["id"] for r in frontier_keys(spark, archive, slice_, seed_ids,
                                                 np.array([4, 7], np.int64)).to_pylist()) == [4, 7]


# ------------------------------------------------------------------ the documents write of a slice

def _documents_writes(spark, out: str) -> list[str]:
    """The operations that wrote rows into out's documents table, oldest first (OPTIMIZE left out)."""
    from delta.tables import DeltaTable

    history = DeltaTable.forPath(spark, f"{out}/documents").history().orderBy("version").collect()
    return [h.operation for h in history if h.operation in ("WRITE", "MERGE")]


def _stored_documents(spark, out: str) -> dict[int, str]:
    rows = store.read(spark, out, "documents").select("id", "title").collect()
    assert len(rows) == len({r.id for r in rows}), "an id is stored twice"
    return {r.id: r.title for r in rows}


def test_a_slice_of_new_ids_is_appended_and_one_that_brings_a_stored_id_merged(spark, conf, tmp_path):
    paths = slice_files(tmp_path, STORED, NEW)
    recrawl = str(tmp_path / "recrawl.parquet")
    pd.DataFrame([{**STORED[3], "title": "Unrelated four, corrected"}]).astype(
        {"published_at": "datetime64[us, UTC]"}).to_parquet(recrawl)
    out = str(tmp_path / "out")
    job.run(spark, paths["stored"], out, conf, load_pg=False)
    job.run(spark, paths["new"], out, conf, load_pg=False)
    # The new ids were appended (MERGE would have joined every stored id to find no match).
    assert _documents_writes(spark, out)[-1] == "WRITE"
    report = job.run(spark, recrawl, out, conf, load_pg=False)
    assert report.counts["recrawled"] == 1
    assert _documents_writes(spark, out)[-1] == "MERGE"   # the stored row is replaced, not written twice
    docs = _stored_documents(spark, out)
    assert len(docs) == len(STORED) + len(NEW) and docs[40] == "Unrelated four, corrected"


def test_a_slice_resumed_after_its_documents_were_appended_writes_them_once(spark, conf, tmp_path, monkeypatch):
    """A run that dies after its documents are appended, resumed: with_stored sees the run's own rows
    there, so the documents are merged this time, not appended a second time."""
    paths = slice_files(tmp_path, STORED, NEW)
    out = str(tmp_path / "out")
    job.run(spark, paths["stored"], out, conf, load_pg=False)
    real = store.insert_quarantine

    def dies(*args, **kwargs):
        raise RuntimeError("the driver died after the documents write")

    monkeypatch.setattr(store, "insert_quarantine", dies)
    with pytest.raises(RuntimeError, match="died after the documents write"):
        job.run(spark, paths["new"], out, conf, load_pg=False, run_id="slice-two")
    assert _documents_writes(spark, out)[-1] == "WRITE" and len(_stored_documents(spark, out)) == 10
    monkeypatch.setattr(store, "insert_quarantine", real)
    job.run(spark, None, out, conf, load_pg=False, resume="slice-two")
    assert sorted(_stored_documents(spark, out)) == sorted(r["id"] for r in STORED + NEW)
    full = str(tmp_path / "full")
    job.run(spark, paths["all"], full, conf, load_pg=False)
    assert keyset(store.active_links(spark, out)) == keyset(store.read(spark, full, "duplicate_links"))
