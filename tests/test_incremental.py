"""Incremental runs: the sample as three slices ends with the active links of one run over the whole sample."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import psycopg
import pytest
from pyspark.sql import functions as F

from newsdedup import incremental, job
from newsdedup.io import store
from newsdedup.ops import revert

from conftest import SAMPLE

ORDER = (2, 1, 0)   # slices by id % 3; later slices bring older members of groups already stored


def keyset(rows):
    return {(r["duplicate_id"], r["canonical_id"], r["stage"], round(r["score"], 9)) for r in rows}


@pytest.fixture(scope="module")
def runs(spark, conf, module_pg_dsn, tmp_path_factory):
    root = tmp_path_factory.mktemp("incremental")
    full = job.run(spark, str(SAMPLE), str(root / "full"), conf, load_pg=False)
    dsn = module_pg_dsn
    articles = pd.read_parquet(SAMPLE)
    out = str(root / "slices")
    reports, rows_after = [], []
    for k in ORDER:
        path = root / f"slice{k}.parquet"
        articles[articles["id"] % 3 == k].to_parquet(path)
        reports.append(job.run(spark, str(path), out, conf, dsn=dsn))
        rows_after.append(store.read(spark, out, "duplicate_links").count())
    return root, out, dsn, full, reports, rows_after


def test_three_slices_end_with_the_active_links_of_one_run(runs, spark):
    root, out, _, full, reports, _ = runs
    whole = keyset(store.read(spark, str(root / "full"), "duplicate_links").collect())
    assert len(whole) == full.counts["links.total"] > 20
    assert keyset(store.active_links(spark, out).collect()) == whole
    assert store.read(spark, out, "documents").count() == full.counts["documents"]
    assert [r.counts.get("existing_documents", 0) for r in reports][1:] == [
        sum(r.counts["documents"] for r in reports[:1]), sum(r.counts["documents"] for r in reports[:2])]


def test_a_slice_reruns_only_the_documents_it_can_change(runs):
    """The cascade, the link diff and the Postgres load see the slice's closure, not the archive."""
    _, _, _, full, reports, _ = runs
    for r in reports[1:]:
        archive = r.counts["documents"] + r.counts["existing_documents"]
        assert r.counts["incremental.slice_documents"] == r.counts["documents"]
        assert r.counts["documents"] <= r.counts["incremental.affected_documents"] < archive
        assert r.counts["incremental.rounds"] >= 1
        assert r.counts["postgres.documents.staged"] < archive      # only what the run wrote (and url groups)
        assert "postgres.full_reload" not in r.counts
    # links.total and unique_documents stay the whole archive's: after the last slice, those of one run
    assert [reports[-1].counts[k] for k in ("links.total", "unique_documents")] == \
        [full.counts[k] for k in ("links.total", "unique_documents")]
    assert reports[-1].counts["links.total"] == sum(r.counts["links.new"] - r.counts["links.superseded"]
                                                    + r.counts["links.revived"] for r in reports)


def test_older_newcomers_supersede_links_which_are_never_deleted(runs, spark):
    _, out, _, _, reports, rows_after = runs
    links = store.read(spark, out, "duplicate_links")
    superseded = links.where(F.col("superseded_at").isNotNull()).collect()
    assert superseded, "slices bring older group members: some links must have been superseded"
    assert {r["superseded_by_run"] for r in superseded} <= {r.run_id for r in reports[1:]}
    assert sum(r.counts["links.superseded"] for r in reports) == len(superseded)
    assert rows_after == sorted(rows_after)                 # rows only ever added
    assert rows_after[-1] == links.count() == len(superseded) + store.active_links(spark, out).count()
    # One active link per duplicate, and every superseded duplicate has its replacement.
    active = store.active_links(spark, out)
    assert active.groupBy("duplicate_id").count().where("count > 1").count() == 0
    assert {r["duplicate_id"] for r in superseded} <= {r["duplicate_id"] for r in active.collect()} | \
        {r["canonical_id"] for r in active.collect()}


def test_postgres_holds_the_same_active_and_superseded_links(runs, spark):
    _, out, dsn, _, _, _ = runs
    with psycopg.connect(dsn) as c:
        pg_rows = c.execute("SELECT duplicate_id, canonical_id, stage, score, superseded_at IS NOT NULL "
                            "FROM duplicate_links").fetchall()
        docs = c.execute("SELECT count(*) FROM documents").fetchone()[0]
        active_view = c.execute("SELECT coalesce(sum(active), 0) FROM link_stats_daily").fetchone()[0]
    pg_active = {(d, c, s, round(x, 9)) for d, c, s, x, sup in pg_rows if not sup}
    assert pg_active == keyset(store.active_links(spark, out).collect())
    assert sum(1 for *_, sup in pg_rows if sup) == store.read(spark, out, "duplicate_links") \
        .where(F.col("superseded_at").isNotNull()).count()
    assert active_view == len(pg_active)
    assert docs == store.read(spark, out, "documents").count()


def documents_rows(dsn):
    from newsdedup.io import pg_documents

    cols = ", ".join(c for c in pg_documents.COLUMNS if c != "embedding")
    with psycopg.connect(dsn) as c:
        return c.execute(f"SELECT {cols}, embedding::text FROM documents ORDER BY id").fetchall()


def test_postgres_documents_after_the_slices_are_those_of_one_load_from_delta(runs, spark, conf, pg_dsn):
    """Each slice loaded only its own rows (the job's, not read again from Delta) and brought the url_hash of
    its URL groups' stored documents up to date: Postgres ends with every column a whole load gives."""
    from newsdedup.io import pg_documents

    _, out, dsn, _, reports, _ = runs
    assert all(r.counts["postgres.documents.url_group_members"] >= 0 for r in reports[1:])
    assert sum(r.counts["postgres.documents.url_group_members"] for r in reports[1:]) > 0   # stored members met
    # Every slice's rows took prepare's stage-3 features (none derived from the text again), and they
    # are byte for byte what the whole load below derives from the text.
    assert [r.counts["postgres.documents.features_from_text"] for r in reports] == [0, 0, 0]
    pg_documents.load_from_delta(spark, out, pg_dsn, conf, "whole")
    got, whole = documents_rows(dsn), documents_rows(pg_dsn)
    assert len(got) == len(whole) == store.read(spark, out, "documents").count()
    assert sum(1 for r in whole if r[3] is not None) < len(whole)   # url groups: some rows without url_hash
    assert got == whole


def test_revert_and_stats_ignore_superseded_links(runs, spark):
    _, out, _, _, _, _ = runs
    active = store.active_links(spark, out).groupBy("stage").count().collect()
    for row in active:
        assert revert.count_delta(spark, out, revert.Selection(stage=row["stage"])) == {row["stage"]: row["count"]}
    from newsdedup.ops import stats

    daily, _ = stats.delta_stats(spark, out, stats.Filter())
    assert sum(r["active"] for r in daily) == sum(r["count"] for r in active)


def test_a_rerun_of_the_last_slice_changes_nothing(runs, spark, conf):
    root, out, dsn, _, _, rows_after = runs
    again = job.run(spark, str(root / f"slice{ORDER[-1]}.parquet"), out, conf, dsn=dsn)
    assert again.counts["links.new"] == again.counts["links.superseded"] == 0
    assert store.read(spark, out, "duplicate_links").count() == rows_after[-1]


def test_fingerprints_do_not_depend_on_the_rest_of_the_batch(spark, conf):
    """A SimHash is exact even when its batch holds a document without one (no float64 detour)."""
    from newsdedup import prepare
    from newsdedup.io.input import conform, split_invalid
    from newsdedup.stages.content import ContentKeys
    from newsdedup.stages.simhash import SimhashKeys

    from conftest import make_df

    body = "Rivers in Sylhet rose above danger level on Tuesday, leaving thousands of families stranded."
    raw = make_df(spark, [(1, "https://a.example/1", "Flood in Sylhet", body, None, "a", "en"),
                          (2, "https://a.example/2", "Headline only", "", None, "a", "en")]).coalesce(1)
    valid, _ = split_invalid(conform(raw, "UTC"))
    got = {r.id: r.simhash for r in prepare.fingerprint(valid, conf).collect()}
    cols = ContentKeys(conf.content, conf.input.max_text_chars).columns("Flood in Sylhet", body, None, "en", [])
    expected = SimhashKeys(conf.simhash).columns(cols["key"], "en", cols["has_body"])["simhash"]
    assert got == {1: expected, 2: None}


@pytest.mark.slow
def test_another_slice_order_in_one_job_ends_the_same(runs, spark, conf, tmp_path):
    """Oldest slice first, then the newest, as one multi-slice job (Delta only): the same active links
    again, each slice a run of its own, and OPTIMIZE once, after the last."""
    root, _, _, _, _, _ = runs
    out = str(tmp_path / "other_order")
    finished = []
    reports = job.run_slices(spark, [str(root / f"slice{k}.parquet") for k in (0, 2, 1)], out, conf,
                             load_pg=False, on_report=lambda path, report: finished.append(path))
    whole = keyset(store.read(spark, str(root / "full"), "duplicate_links").collect())
    assert keyset(store.active_links(spark, out).collect()) == whole
    assert finished == [str(root / f"slice{k}.parquet") for k in (0, 2, 1)]
    runs_table = store.read(spark, out, "runs").select("run_id", "input").collect()
    assert sorted((r["run_id"], r["input"]) for r in runs_table) == sorted(
        (r.run_id, p) for r, p in zip(reports, finished))
    assert len({r.run_id for r in reports}) == 3
    assert reports[1].counts["existing_documents"] == reports[0].counts["documents"]   # incremental
    assert ["optimize_delta" in r.seconds for r in reports] == [False, False, True]


def test_a_failed_slice_leaves_the_slices_before_it_and_says_how_to_go_on(runs, spark, conf, tmp_path):
    root, _, _, _, _, _ = runs
    out, first, missing, last = (str(tmp_path / "out"), str(root / "slice2.parquet"),
                                 str(tmp_path / "no_such_slice.parquet"), str(root / "slice1.parquet"))
    with pytest.raises(job.SliceFailed) as err:
        job.run_slices(spark, [first, missing, last], out, conf, load_pg=False)
    message = str(err.value)
    assert message.startswith(f"slice 2 of 3 ({missing}): ")
    # The missing slice failed before its run was recorded: nothing to resume, submit it and the rest again.
    assert message.splitlines()[-1].startswith("slices 1-1 are written (runs ")
    assert message.endswith(f"go on with: newsdedup run --input {missing} {last}")
    stored = store.read(spark, out, "documents").count()
    assert stored == pd.read_parquet(first).shape[0]


# ---------------------------------------------------------------- write_links, link by link

T1, T2, T3 = (datetime(2026, 5, d, 12) for d in (1, 2, 3))


def computed(spark, rows):
    return spark.createDataFrame(rows, "duplicate_id long, canonical_id long, stage string, score double")


def stored(spark, path):
    return {(r.duplicate_id, r.canonical_id, r.stage): r.asDict() for r in spark.read.format("delta").load(path).collect()}


def test_a_superseded_link_computed_again_is_revived_in_its_own_row(spark, tmp_path):
    path = str(tmp_path / "duplicate_links")
    both = [(2, 1, "url", 1.0), (3, 1, "simhash", 0.95)]
    assert incremental.write_links(spark, computed(spark, both), path, "r1", T1)["new"] == 2
    assert incremental.write_links(spark, computed(spark, both[:1]), path, "r2", T2) == \
        {"new": 0, "superseded": 1, "revived": 0, "rescored": 0}
    row = stored(spark, path)[3, 1, "simhash"]
    assert (row["superseded_at"], row["superseded_by_run"]) == (T2, "r2")
    assert incremental.write_links(spark, computed(spark, both), path, "r3", T3) == \
        {"new": 0, "superseded": 0, "revived": 1, "rescored": 0}
    rows = stored(spark, path)
    assert len(rows) == 2                                          # revived, not written a second time
    row = rows[3, 1, "simhash"]
    assert (row["superseded_at"], row["superseded_by_run"]) == (None, None)
    assert (row["linked_at"], row["run_id"], row["score"]) == (T1, "r1", 0.95)


def test_a_link_computed_again_with_another_score_keeps_its_row_and_linked_at(spark, tmp_path):
    path = str(tmp_path / "duplicate_links")
    incremental.write_links(spark, computed(spark, [(2, 1, "url", 1.0), (3, 1, "simhash", 0.95)]), path, "r1", T1)
    counts = incremental.write_links(spark, computed(spark, [(2, 1, "url", 1.0), (3, 1, "simhash", 0.97)]),
                                     path, "r2", T2)
    assert counts == {"new": 0, "superseded": 0, "revived": 0, "rescored": 1}
    rows = stored(spark, path)
    assert len(rows) == 2
    assert {k: (r["score"], r["linked_at"], r["run_id"], r["superseded_at"]) for k, r in rows.items()} == \
        {(2, 1, "url"): (1.0, T1, "r1", None), (3, 1, "simhash"): (0.97, T1, "r1", None)}


@pytest.mark.parametrize("score", [0.95, 0.97])
def test_a_reverted_link_stays_reverted_when_the_next_run_computes_it_again(spark, tmp_path, score):
    out = str(tmp_path / "out")
    path = store.table_path(out, "duplicate_links")
    links = [(2, 1, "url", 1.0), (3, 1, "simhash", 0.95)]
    incremental.write_links(spark, computed(spark, links), path, "r1", T1)
    assert revert.apply(spark, out, revert.Selection("simhash"), dsn=None, reason="wrong", now=T2).delta == 1
    again = incremental.write_links(spark, computed(spark, [links[0], (3, 1, "simhash", score)]), path, "r2", T3)
    assert again == {"new": 0, "superseded": 0, "revived": 0, "rescored": 0}
    rows = stored(spark, path)
    assert len(rows) == 2
    row = rows[3, 1, "simhash"]
    assert (row["reverted_at"], row["revert_reason"], row["superseded_at"], row["score"]) == (T2, "wrong", None, 0.95)
    assert {(r.duplicate_id, r.canonical_id) for r in store.active_links(spark, out).collect()} == {(2, 1)}
