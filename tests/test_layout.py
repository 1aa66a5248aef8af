"""Delta tables laid out for their readers (io/layout.py): a one-day query reads a fraction of the files.

Real Spark, real Delta. The files a query reads are the ones left after Delta skipped the others
by the min/max statistics of its log (DataFrame.inputFiles()).
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import functions as F

from newsdedup import job
from newsdedup.io import layout, store

DAYS = 30


def synthetic_documents(spark, ids: range, seed: int = 1, days: int = DAYS):
    """Documents spread over `days` days in no order of id (as an archive arrives), ~300 bytes each."""
    return (spark.range(ids.start, ids.stop, 1, 2)
            .select("id",
                    (F.lit(datetime(2024, 1, 1, tzinfo=timezone.utc)).cast("timestamp")
                     + F.make_dt_interval(F.lit(0), F.lit(0),
                                          (F.rand(seed) * days * 24 * 60).cast("int"))).alias("published_at"),
                    F.when(F.col("id") % 3 == 0, "bn").otherwise("en").alias("lang"),
                    F.sha2(F.col("id").cast("string"), 256).alias("content_hash"),
                    F.concat_ws(" ", *[F.sha2(F.concat(F.col("id"), F.lit(i)), 256) for i in range(4)]).alias("body")))


def one_day(df, day: date):
    return df.where((F.col("published_at") >= F.lit(day.isoformat()).cast("timestamp"))
                    & (F.col("published_at") < F.lit(date.fromordinal(day.toordinal() + 1).isoformat()).cast("timestamp")))


def test_a_one_day_query_reads_a_fraction_of_the_files_after_incremental_writes(spark, conf, tmp_path):
    """Three slices MERGEd into documents with the configured layout, OPTIMIZE after each (as a run does)."""
    path = str(tmp_path / "documents")
    cluster_by = conf.layout.table("documents").cluster_by
    for k, ids in enumerate((range(0, 1500), range(1500, 3000), range(3000, 4500))):
        docs = synthetic_documents(spark, ids, seed=k)
        assert layout.prepare_table(spark, path, "documents", docs.schema, cluster_by) is None
        store.merge_documents(spark, docs, path)
        before, after = layout.optimize(spark, path, 64 * 1024)   # ~1.3 MB of rows: about 20 files
        # The counts optimize reports (from OPTIMIZE's metrics) are the log's; each slice keeps the layout.
        assert layout.detail(spark, path) == (after, cluster_by) and after != before
    total = layout.detail(spark, path)[0]
    table = spark.read.format("delta").load(path)
    read = layout.files_read(one_day(table, date(2024, 1, 17)))
    # A day is 1/30 of the rows: clustered, it lies in one or two files of about twenty.
    assert read <= max(2, total // 5), f"one day read {read} of {total} files"
    assert table.count() == 4500 and total >= 10


def test_a_first_write_appends_and_later_writes_upsert_by_id(spark, conf, tmp_path):
    """documents: into the empty clustered table a run's first write is a plain append (a MERGE with
    nothing to match would copy its whole source aside first); once the table holds rows, writes
    upsert by id: a changed document replaces its row, a new one is added, none is doubled."""
    from delta.tables import DeltaTable

    path = str(tmp_path / "documents")
    first = synthetic_documents(spark, range(0, 300))
    layout.prepare_table(spark, path, "documents", first.schema, conf.layout.table("documents").cluster_by)
    assert store.is_empty(spark, path)
    store.merge_documents(spark, first, path)
    again = synthetic_documents(spark, range(200, 400)).withColumn("body", F.lit("changed"))
    store.merge_documents(spark, again, path)
    history = DeltaTable.forPath(spark, path).history().orderBy("version").select("operation").collect()
    assert [r[0] for r in history][-2:] == ["WRITE", "MERGE"]
    table = spark.read.format("delta").load(path)
    assert table.count() == 400 and table.select("id").distinct().count() == 400
    assert table.where(F.col("body") == "changed").count() == 200
    assert not store.is_empty(spark, path)


def test_an_unclustered_table_from_an_earlier_version_is_upgraded_in_place(spark, conf, tmp_path):
    path = str(tmp_path / "documents")
    docs = synthetic_documents(spark, range(0, 3000))
    docs.repartition(8).write.format("delta").save(path)          # as earlier versions wrote it
    old = spark.read.format("delta").load(path)
    files_before, clustered = layout.detail(spark, path)
    assert clustered == [] and layout.files_read(one_day(old, date(2024, 1, 9))) == files_before

    note = layout.prepare_table(spark, path, "documents", docs.schema, ["published_at"])
    assert note == ("layout: documents was unclustered, now clustered by published_at "
                    "(its rows are reclustered by the next OPTIMIZE)")
    assert layout.prepare_table(spark, path, "documents", docs.schema, ["published_at"]) is None  # idempotent
    layout.optimize(spark, path, 64 * 1024)
    table = spark.read.format("delta").load(path)
    total = layout.detail(spark, path)[0]
    assert table.count() == 3000 and total >= 8
    assert layout.files_read(one_day(table, date(2024, 1, 9))) <= max(2, total // 5)
    # Older readers' view: the upgrade changes the writer protocol only.
    from deltalake import DeltaTable

    assert DeltaTable(path).protocol().min_reader_version == 1
    assert len(DeltaTable(path).to_pandas(columns=["id"])) == 3000


def test_a_cluster_column_the_table_lacks_is_named(spark, tmp_path):
    docs = synthetic_documents(spark, range(0, 10))
    with pytest.raises(Exception, match=r"layout.documents.cluster_by: documents has no column publishd_at"):
        layout.prepare_table(spark, str(tmp_path / "d"), "documents", docs.schema, ["publishd_at"])


def test_a_log_left_without_a_commit_by_a_killed_create_does_not_block_the_next_run(spark, tmp_path):
    # What a run killed inside DeltaTable.create leaves: _delta_log with no commit in it.
    path = tmp_path / "links"
    (path / "_delta_log" / "_staged_commits").mkdir(parents=True)
    (path / "_delta_log" / ".00000000000000000000.json.1b2c.tmp").write_text("{")
    docs = synthetic_documents(spark, range(0, 10))
    assert layout.prepare_table(spark, str(path), "documents", docs.schema, ["published_at"]) is None
    assert layout.detail(spark, str(path)) == (0, ["published_at"])


def test_incremental_runs_keep_the_layout_and_upgrade_an_older_output(spark, conf, tmp_path):
    """Two job runs into one output: the first as an earlier version wrote it (no layout), the second upgrades."""
    from newsdedup_lab import synth

    articles, _ = synth.generate(240, seed=3)
    articles = articles.to_pandas()
    out = str(tmp_path / "out")
    old_conf = conf.with_overrides({"layout": {"documents": {"cluster_by": []},
                                               "duplicate_links": {"cluster_by": []},
                                               "optimize_after_run": False}})
    new_conf = conf.with_overrides({"layout": {"max_file_size": "16k"}})
    reports = []
    for k, c in ((0, old_conf), (1, new_conf)):
        path = tmp_path / f"slice{k}.parquet"
        articles[articles["id"] % 2 == k].to_parquet(path)
        reports.append(job.run(spark, str(path), out, c, load_pg=False))
    assert "files.documents.after" not in reports[0].counts
    assert any(n.startswith("layout: documents was unclustered") for n in reports[1].notes)
    for name in ("documents", "duplicate_links"):
        assert layout.detail(spark, store.table_path(out, name))[1] == conf.layout.table(name).cluster_by
        assert reports[1].counts[f"files.{name}.after"] == layout.detail(spark, store.table_path(out, name))[0]
    docs = store.read(spark, out, "documents")
    assert docs.count() == sum(r.counts["documents"] for r in reports) > 200
    total = reports[1].counts["files.documents.after"]
    day = pd.Timestamp(articles["published_at"].iloc[0]).date()
    read = layout.files_read(one_day(docs, day))
    assert total >= 10 and read <= max(2, total // 5), f"one day read {read} of {total} files"
    # Every file the tables hold, as a reader other than Spark sees it, is compressed with the
    # configured codec (spark.parquet_compression, zstd by default, a session setting).
    for name in ("documents", "duplicate_links"):
        assert _codecs(store.table_path(out, name)) == {conf.spark.parquet_compression.upper()}, name


def _codecs(path: str) -> set[str]:
    """The compression of every column chunk of the Delta table's live files (delta-rs, pyarrow)."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    return {meta.row_group(g).column(c).compression
            for uri in DeltaTable(path).file_uris()
            for meta in [pq.ParquetFile(uri.removeprefix("file://")).metadata]
            for g in range(meta.num_row_groups) for c in range(meta.num_columns)}


def test_the_parquet_codec_defaults_to_zstd_and_is_a_session_default():
    """(An unknown codec is refused with the other bad values, tests/test_config.py.)"""
    from newsdedup.config import load_config
    from newsdedup.io.spark import session_defaults

    assert load_config().spark.parquet_compression == "zstd"
    snappy = load_config(overrides={"spark": {"parquet_compression": "snappy"}})
    assert session_defaults(snappy)["spark.sql.parquet.compression.codec"] == "snappy"


def test_the_layout_section_is_typed_and_checked():
    from newsdedup.config import ConfigError, load_config

    conf = load_config()
    assert conf.layout.table("documents").cluster_by == ["published_at"]
    assert conf.layout.table("duplicate_links").cluster_by == ["stage", "linked_at"]
    assert conf.layout.table("quarantine").cluster_by == [] and conf.layout.max_file_bytes == 8 << 20
    with pytest.raises(ConfigError, match=r"layout.max_file_size='lots': expected a positive size"):
        load_config(overrides={"layout": {"max_file_size": "lots"}})
    with pytest.raises(ConfigError, match=r"layout.documents.cluster_by=.*at most 4 columns"):
        load_config(overrides={"layout": {"documents": {"cluster_by": ["a", "b", "c", "d", "e"]}}})
    with pytest.raises(ConfigError, match=r"layout.duplicate_links.cluster_by=.*distinct"):
        load_config(overrides={"layout": {"duplicate_links": {"cluster_by": ["stage", "stage"]}}})


# ------------------------------------------------------------------ incremental clustering (cube policy)


def _commit(path: str) -> dict[str, list[dict]]:
    """The add and remove actions of the table's latest commit, read from its Delta log JSON."""
    import json
    from pathlib import Path

    log = sorted(Path(path, "_delta_log").glob("*.json"))[-1]
    actions: dict[str, list[dict]] = {"add": [], "remove": [], "commitInfo": []}
    for line in log.read_text().splitlines():
        action = json.loads(line)
        for kind in actions:
            if kind in action:
                actions[kind].append(action[kind])
    return actions


def _live_files(path: str) -> set[str]:
    """The table's live files, read by delta-rs (a reader independent of Spark's)."""
    from deltalake import DeltaTable

    return {p.rsplit("/", 1)[-1] for p in DeltaTable(path).file_uris()}


def test_cube_threshold_leaves_cubes_alone_until_there_are_too_many():
    """The pure policy: a new cube per OPTIMIZE, the smallest merged once the cubes pass the share."""
    C = layout.Cubes
    mb = 1 << 20
    big = C({"a": 1000 * mb}, {"a": 60}, unclustered_files=2, unclustered_bytes=20 * mb, other_files=0)
    # 60 + 2 files (16 MiB each) at 5%: 3 cubes allowed; a, and the new one: leave a alone.
    assert layout.cube_threshold(big, 16 * mb, 0.05) == 1
    three = C({"a": 1000 * mb, "b": 20 * mb, "c": 30 * mb}, {"a": 60, "b": 2, "c": 2}, 2, 20 * mb, 0)
    # a, b, c and the new one would be 4 of 66 files (> 3): b, the smallest, is merged with the new files.
    assert layout.cube_threshold(three, 16 * mb, 0.05) == 20 * mb + 1
    # Fewer files allowed (share 1%: 1 cube): everything, a included, is re-clustered.
    assert layout.cube_threshold(three, 16 * mb, 0.01) == 1000 * mb + 1
    # Nothing new and few enough cubes: no OPTIMIZE at all.
    assert layout.cube_threshold(C({"a": 1000 * mb}, {"a": 60}, 0, 0, 0), 16 * mb, 0.05) is None
    # A first OPTIMIZE (all files unclustered): one cube of everything.
    assert layout.cube_threshold(C({}, {}, 8, 1000 * mb, 0), 16 * mb, 0.05) == 1


def test_a_small_run_clusters_its_own_files_and_leaves_the_stable_cubes_alone(spark, conf, tmp_path):
    """OPTIMIZE as the job runs it (optimize_tables, conf layout) after a large first run and four small ones.

    The Delta log's remove actions of each later OPTIMIZE name only files of the small runs (their
    MERGE output, and the small cubes merged when the cubes pass max_read_share), never a file of
    the first run's cube; a one-day query reads at most 5% of the files."""
    out = str(tmp_path / "out")
    path = store.table_path(out, "documents")
    # ~75 files of the first run (zstd files: the hex bodies compress to about half)
    lconf = conf.with_overrides({"layout": {"max_file_size": "8k"}}).layout
    cluster_by = lconf.table("documents").cluster_by
    slices = [range(0, 4000)] + [range(4000 + 100 * k, 4100 + 100 * k) for k in range(4)]
    first_cube: set[str] = set()
    for k, ids in enumerate(slices):
        docs = synthetic_documents(spark, ids, seed=k, days=365)   # a day: ~3 KB, within one file of a cube
        layout.prepare_table(spark, path, "documents", docs.schema, cluster_by)
        store.merge_documents(spark, docs, path)
        merged = {a["path"] for a in _commit(path)["add"]}          # this run's MERGE output
        report = layout.optimize_tables(spark, out, lconf)
        actions = _commit(path)
        removed = {r["path"] for r in actions["remove"]}
        assert actions["commitInfo"][0]["operation"] == "OPTIMIZE"
        if k == 0:
            first_cube = {a["path"] for a in actions["add"]}
            assert len(first_cube) >= 60
            continue
        assert merged <= removed, "the run's own files are clustered"
        assert not removed & first_cube, f"run {k} rewrote {len(removed & first_cube)} files of the first run's cube"
        assert first_cube <= _live_files(path)
        cubes = layout.cubes(spark, path)
        total = report.counts["files.documents.after"]
        assert cubes.unclustered_files == 0 and len(cubes.sizes) <= max(1, int(lconf.max_read_share * total))
    assert len(layout.cubes(spark, path).sizes) >= 2   # the later runs did form cubes of their own
    table = spark.read.format("delta").load(path)
    assert table.count() == 4400
    total = layout.detail(spark, path)[0]
    reads = [layout.files_read(one_day(table, date.fromordinal(date(2024, 1, 1).toordinal() + d)))
             for d in range(0, 365, 12)]
    assert max(reads) <= 0.05 * total, f"one day read up to {max(reads)} of {total} files ({reads})"


def test_a_table_of_one_small_file_is_not_rewritten_and_more_files_are_compacted(spark, tmp_path):
    """OPTIMIZE would rewrite a one-file table that fits in one file as the same one file: skipped.
    A second file, or one file above max_file_bytes, is optimized as before."""
    path = str(tmp_path / "documents")
    docs = synthetic_documents(spark, range(0, 300))
    layout.prepare_table(spark, path, "documents", docs.schema, ["published_at"])
    docs.coalesce(1).write.format("delta").mode("append").save(path)
    commits = len(list(Path(path, "_delta_log").glob("*.json")))
    assert layout.optimize(spark, path, 16 << 20, 0.04) == (1, 1)
    assert len(list(Path(path, "_delta_log").glob("*.json"))) == commits, "a one-file table was rewritten"

    synthetic_documents(spark, range(300, 400)).coalesce(1).write.format("delta").mode("append").save(path)
    assert layout.optimize(spark, path, 16 << 20, 0.04) == (2, 1)
    assert _commit(path)["commitInfo"][0]["operation"] == "OPTIMIZE"
    assert layout.cubes(spark, path).unclustered_files == 0

    big = str(tmp_path / "big")
    layout.prepare_table(spark, big, "documents", docs.schema, ["published_at"])
    docs.coalesce(1).write.format("delta").mode("append").save(big)    # ~100 KB
    before, after = layout.optimize(spark, big, 16 * 1024, 0.04)
    assert (before, _commit(big)["commitInfo"][0]["operation"]) == (1, "OPTIMIZE") and after > 1
    assert spark.read.format("delta").load(big).count() == 300
