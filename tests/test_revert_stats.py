"""revert and stats on a real Delta table and a real Postgres (no job run: links are written directly)."""

from __future__ import annotations

from datetime import date, datetime, timezone

import psycopg
import pytest

from newsdedup import cli
from newsdedup.io import pg, store
from newsdedup.ops import revert, stats

DAY1 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
DAY2 = datetime(2026, 3, 2, 23, 30, tzinfo=timezone.utc)

LINKS = [  # duplicate, canonical, stage, score, linked_at, run
    (2, 1, "url", 1.0, DAY1, "r1"),
    (3, 1, "content", 1.0, DAY1, "r1"),
    (1, 10, "content", 1.0, DAY2, "r2"),          # 1 is later absorbed by 10: chains 2 -> 1 -> 10
    (4, 5, "simhash", 0.74, DAY1, "r1"),
    (6, 5, "simhash", 0.97, DAY1, "r1"),
    (7, 8, "semantic", 0.91, DAY2, "r2"),
    (9, 8, "semantic", 0.97, DAY2, "r2"),
    (11, 12, "semantic", 0.95, DAY1, "r1"),
]


@pytest.fixture
def setup(spark, pg_dsn, tmp_path):
    out = str(tmp_path / "out")
    rows = [(d, c, s, sc, ts, r, None, None, None) for d, c, s, sc, ts, r in LINKS]   # + via_id
    store.insert_links(spark, spark.createDataFrame(rows, store.LINKS_SCHEMA), store.table_path(out, "duplicate_links"))
    pg.load_links(store.read(spark, out, "duplicate_links"), pg_dsn, "load-1")
    return out, pg_dsn


def _delta_state(spark, out):
    return {(r.duplicate_id, r.canonical_id, r.stage): (r.reverted_at is not None, r.revert_reason)
            for r in store.read(spark, out, "duplicate_links").collect()}


def _pg_state(dsn):
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT duplicate_id, canonical_id, stage, reverted_at IS NOT NULL, revert_reason "
                            "FROM duplicate_links").fetchall()
    return {(d, c, s): (rv, why) for d, c, s, rv, why in rows}


def test_revert_below_score_in_both_stores_and_undo(spark, setup):
    out, dsn = setup
    sel = revert.Selection("semantic", below=0.96)
    assert revert.count_delta(spark, out, sel) == {"semantic": 2}
    result = revert.apply(spark, out, sel, dsn=dsn, reason="threshold too low")
    assert (result.delta, result.postgres) == (2, 2)
    delta, pgs = _delta_state(spark, out), _pg_state(dsn)
    assert delta == pgs
    assert delta[(7, 8, "semantic")] == (True, "threshold too low")
    assert delta[(11, 12, "semantic")] == (True, "threshold too low")
    assert delta[(9, 8, "semantic")] == (False, None)
    assert sum(rv for rv, _ in delta.values()) == 2
    assert store.read(spark, out, "duplicate_links").count() == len(LINKS)  # nothing deleted
    # a rerun matches nothing more
    again = revert.apply(spark, out, sel, dsn=dsn)
    assert (again.delta, again.postgres) == (0, 0)
    # undo restores exactly those links
    undone = revert.apply(spark, out, revert.Selection("semantic", below=0.96, undo=True), dsn=dsn)
    assert (undone.delta, undone.postgres) == (2, 2)
    assert not any(rv for rv, _ in _delta_state(spark, out).values())
    assert not any(rv for rv, _ in _pg_state(dsn).values())


def test_revert_by_run_only_touches_that_run(spark, setup):
    out, dsn = setup
    result = revert.apply(spark, out, revert.Selection("content", run_id="r2"), dsn=dsn)
    assert (result.delta, result.postgres) == (1, 1)
    assert _pg_state(dsn)[(1, 10, "content")][0] and not _pg_state(dsn)[(3, 1, "content")][0]


def test_failed_delta_update_rolls_postgres_back_and_rerun_converges(spark, setup, tmp_path):
    out, dsn = setup
    links_dir = tmp_path / "out" / "duplicate_links"
    hidden = tmp_path / "hidden"
    links_dir.rename(hidden)  # a real failure: the Delta table is not there
    with pytest.raises(Exception):
        revert.apply(spark, out, revert.Selection("simhash"), dsn=dsn)
    assert not any(rv for rv, _ in _pg_state(dsn).values())  # Postgres rolled back
    hidden.rename(links_dir)
    result = revert.apply(spark, out, revert.Selection("simhash"), dsn=dsn)
    assert (result.delta, result.postgres) == (2, 2)


def test_postgres_missing_a_revert_converges_on_load(spark, setup):
    """The PG commit failing after the Delta update: Delta is ahead, the next load catches up."""
    out, dsn = setup
    revert.apply(spark, out, revert.Selection("url"), dsn=None)  # Delta only
    assert not _pg_state(dsn)[(2, 1, "url")][0]
    pg.load_links(store.read(spark, out, "duplicate_links"), dsn, "load-2")
    assert _pg_state(dsn)[(2, 1, "url")][0]
    assert _pg_state(dsn) == _delta_state(spark, out)


def test_stats_delta_and_postgres_agree(spark, setup):
    out, dsn = setup
    revert.apply(spark, out, revert.Selection("semantic", below=0.93), dsn=dsn)
    flt = stats.Filter()
    d_daily, d_hist = stats.delta_stats(spark, out, flt)
    p_daily, p_hist = stats.postgres_stats(dsn, flt)
    key = lambda r: (r["day"], r["stage"])  # noqa: E731
    assert [(key(r), r["active"], r["reverted"]) for r in d_daily] == \
           [(key(r), r["active"], r["reverted"]) for r in p_daily]
    assert [(key(r), round(r["bin_lower"], 6), r["active"], r["reverted"]) for r in d_hist] == \
           [(key(r), round(r["bin_lower"], 6), r["active"], r["reverted"]) for r in p_hist]
    sem2 = [r for r in d_daily if r["stage"] == "semantic" and r["day"] == date(2026, 3, 2)]
    assert (sem2[0]["active"], sem2[0]["reverted"]) == (1, 1)
    sim_bins = {round(r["bin_lower"], 2): r["active"] for r in d_hist if r["stage"] == "simhash"}
    assert sim_bins == {0.74: 1, 0.96: 1}  # Jaccard bins of 0.02; 0.74 is an exact edge
    sem_bins = sorted(round(r["bin_lower"], 2) for r in d_hist if r["stage"] == "semantic")
    assert sem_bins == [0.9, 0.94, 0.96]


def test_stats_filters(spark, setup):
    out, dsn = setup
    daily, _ = stats.delta_stats(spark, out, stats.Filter(stage="semantic", day=date(2026, 3, 2)))
    assert [(r["stage"], r["active"]) for r in daily] == [("semantic", 2)]
    daily, _ = stats.postgres_stats(dsn, stats.Filter(since=date(2026, 3, 2)))
    assert {r["stage"] for r in daily} == {"content", "semantic"}


def test_document_canonical_view_follows_active_links(spark, setup):
    out, dsn = setup
    with psycopg.connect(dsn) as conn:
        canon = dict(conn.execute("SELECT document_id, canonical_id FROM document_canonical").fetchall())
    assert canon[2] == 10 and canon[3] == 10 and canon[1] == 10 and canon[10] == 10
    assert canon[4] == 5 and canon[5] == 5
    revert.apply(spark, out, revert.Selection("content", run_id="r2"), dsn=dsn)
    with psycopg.connect(dsn) as conn:
        canon = dict(conn.execute("SELECT document_id, canonical_id FROM document_canonical").fetchall())
    assert canon[2] == 1 and canon[1] == 1 and 10 not in canon


def test_cli_revert_dry_run_and_stats(spark, setup, capsys):
    out, dsn = setup
    assert cli.main(["revert", "--output", out, "--pg", dsn, "--stage", "simhash", "--below", "0.96",
                     "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "simhash    1" in printed and "postgres 1" in printed
    assert not any(rv for rv, _ in _pg_state(dsn).values())
    assert cli.main(["revert", "--output", out, "--pg", dsn, "--stage", "simhash", "--below", "0.96",
                     "--reason", "too far"]) == 0
    assert _pg_state(dsn)[(4, 5, "simhash")] == (True, "too far")
    assert cli.main(["stats", "--output", out, "--stage", "simhash"]) == 0
    printed = capsys.readouterr().out
    assert "hamming 3" in printed and "hamming 1" in printed
    assert cli.main(["stats", "--source", "postgres", "--pg", dsn, "--day", "2026-03-02", "--json"]) == 0
    assert '"semantic"' in capsys.readouterr().out


def test_day_arguments():
    import argparse

    today = date(2026, 3, 2)
    assert cli._date("yesterday", today) == date(2026, 3, 1)
    assert cli._date("Today", today) == today
    assert cli._date("2026-02-28") == date(2026, 2, 28)
    with pytest.raises(argparse.ArgumentTypeError, match="YYYY-MM-DD"):
        cli._date("last week")
