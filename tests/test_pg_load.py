"""Postgres loads: idempotent reruns, variants in one batch, retried partitions, failure midway + resume.

Connections run as in production: psycopg without autocommit (explicit
transactions). Failures are real database errors, not mocks.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from newsdedup import cli
from newsdedup.io import pg, store

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)


def _links(spark, rows):
    return spark.createDataFrame(rows, store.LINKS_SCHEMA)


def _row(d, c, stage="content", ts=T0, run="r1", reverted=None, why=None, score=1.0):
    return (d, c, stage, score, ts, run, reverted, why, None)   # via_id: none for these links


def _target(dsn):
    with psycopg.connect(dsn) as conn:
        return sorted(conn.execute(
            "SELECT duplicate_id, canonical_id, stage, score, linked_at, run_id, reverted_at, revert_reason "
            "FROM duplicate_links").fetchall())


def _staged(dsn, load_id):
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT count(*) FROM duplicate_links_staging WHERE load_id = %s",
                            (load_id,)).fetchone()[0]


def test_variants_of_one_key_in_a_batch_load_without_unique_abort(spark, pg_dsn):
    later = T0 + timedelta(hours=1)
    df = _links(spark, [_row(2, 1), _row(2, 1, ts=later, run="r2"),   # same key twice
                        _row(3, 1, stage="url"), _row(3, 1, stage="content")])  # same pair, two stages
    result = pg.load_links(df, pg_dsn, "L1")
    assert result == {"staged": 4, "inserted": 3, "skipped": 1}
    rows = _target(pg_dsn)
    assert len(rows) == 3
    assert [r for r in rows if r[:3] == (2, 1, "content")][0][5] == "r1"  # the earliest variant wins
    assert _staged(pg_dsn, "L1") == 0


def test_retried_partitions_and_reruns_do_not_duplicate(spark, pg_dsn):
    df = _links(spark, [_row(i + 2, 1) for i in range(6)]).repartition(3)
    retried = df.unionByName(df.limit(2))  # the rows of a task that ran twice land in staging twice
    first = pg.load_links(retried, pg_dsn, "L1")
    assert first["staged"] == 8 and first["inserted"] == 6
    snapshot = _target(pg_dsn)
    again = pg.load_links(df, pg_dsn, "L2")
    assert again["inserted"] == 0 and _target(pg_dsn) == snapshot


def test_a_later_revert_reaches_postgres_but_never_unreverts(spark, pg_dsn):
    pg.load_links(_links(spark, [_row(2, 1), _row(3, 1)]), pg_dsn, "L1")
    pg.load_links(_links(spark, [_row(2, 1, reverted=T0, why="bad")]), pg_dsn, "L2")
    rows = {r[:2]: r for r in _target(pg_dsn)}
    assert rows[(2, 1)][6] is not None and rows[(2, 1)][7] == "bad"
    pg.load_links(_links(spark, [_row(2, 1)]), pg_dsn, "L3")  # an older copy without the revert
    assert {r[:2]: r for r in _target(pg_dsn)}[(2, 1)][7] == "bad"


def test_constraint_violation_midway_leaves_target_intact(spark, pg_dsn):
    pg.load_links(_links(spark, [_row(2, 1)]), pg_dsn, "L1")
    before = _target(pg_dsn)
    bad = _links(spark, [_row(3, 1), _row(4, 4)])  # 4 -> 4 violates CHECK (duplicate_id <> canonical_id)
    with pytest.raises(psycopg.errors.CheckViolation):
        pg.load_links(bad, pg_dsn, "L2")
    assert _target(pg_dsn) == before            # the good row of the batch did not slip in either
    assert _staged(pg_dsn, "L2") == 2           # staging kept for inspection; a rerun restages


def _hold_lock(dsn):
    """Lock the existing link 2 -> 1 in an open transaction: a merge that touches it must wait."""
    conn = psycopg.connect(dsn)
    assert conn.execute("SELECT 1 FROM duplicate_links WHERE duplicate_id = 2 FOR UPDATE").fetchall()
    return conn


def test_load_failing_in_the_merge_transaction_resumes_with_the_same_load_id(spark, pg_dsn, tmp_path, capsys):
    out = str(tmp_path / "out")
    path = store.table_path(out, "duplicate_links")
    store.insert_links(spark, _links(spark, [_row(2, 1), _row(3, 1)]), path)
    assert cli.main(["load", "--output", out, "--pg", pg_dsn, "--load-id", "L1"]) == 0
    before = _target(pg_dsn)
    store.insert_links(spark, _links(spark, [_row(5, 4, run="r2"), _row(6, 4, run="r2")]), path)

    locker = _hold_lock(pg_dsn)
    impatient = psycopg.conninfo.make_conninfo(pg_dsn, options="-c lock_timeout=300")
    try:
        with pytest.raises(psycopg.errors.LockNotAvailable):
            pg.load_links(store.read(spark, out, "duplicate_links"), impatient, "L2")
        assert _target(pg_dsn) == before
    finally:
        locker.close()
    assert _staged(pg_dsn, "L2") == 4

    assert cli.main(["load", "--output", out, "--pg", pg_dsn, "--load-id", "L2"]) == 0
    assert "inserted=2" in capsys.readouterr().out
    after = _target(pg_dsn)
    assert len(after) == 4 and set(before) <= set(after)
    assert _staged(pg_dsn, "L2") == 0


def test_killed_connection_during_merge_leaves_target_intact(spark, pg_dsn):
    pg.load_links(_links(spark, [_row(2, 1)]), pg_dsn, "L1")
    before = _target(pg_dsn)
    locker = _hold_lock(pg_dsn)
    errors: list[BaseException] = []

    def load():
        try:
            pg.load_links(_links(spark, [_row(2, 1), _row(3, 1), _row(4, 1)]), pg_dsn, "L2")
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            errors.append(exc)

    worker = threading.Thread(target=load)
    worker.start()
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            killed = False
            while worker.is_alive() and not killed:  # wait until the merge blocks on the lock, then kill it
                pids = admin.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                                     "AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO duplicate_links%'"
                                     ).fetchall()
                if pids:
                    killed = admin.execute("SELECT pg_terminate_backend(%s)", (pids[0][0],)).fetchone()[0]
                worker.join(0.1)
            assert killed, f"the merge never blocked: {errors}"
        worker.join(60)
    finally:
        locker.close()
    assert errors and isinstance(errors[0], psycopg.OperationalError)
    assert _target(pg_dsn) == before
    pg.load_links(_links(spark, [_row(3, 1), _row(4, 1)]), pg_dsn, "L2")  # the rerun converges
    assert len(_target(pg_dsn)) == 3
