"""16 `check --insert` clients at once against the loaded sample (real embedded Postgres, client
processes with a connection each): every client gets an answer per article, and Postgres ends
as one client sending the same articles would leave it (ops/check.py, "Concurrent writers").

The workload (newsdedup_lab.check_concurrent_bench): rounds of fresh stories and copies of sample
stories, each article sent by 3 clients and each story's copies by different clients, all clients
starting a round together."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from newsdedup.ops import check
from newsdedup.stages.base import Probe
from newsdedup_lab import check_concurrent_bench as cc

from conftest import SAMPLE, fresh_database

CLIENTS = 16
SECONDS = 20          # of rounds; the whole test (sample stored, server up) took 53-83 s on 2 shared cores


@pytest.fixture(scope="module")
def loaded_pair(conf, pg_server_dsn):
    """The sample stored in one database, and a copy of it (CREATE DATABASE ... TEMPLATE) for the
    sequential reference. Stored by one `check --insert` client, not by a job run: Spark would cost
    the test more than its concurrent part (the bench loads with the job)."""
    with fresh_database(pg_server_dsn) as dsn:
        assert all(v.error is None for v in cc.store_sample(conf, SAMPLE.with_suffix(".jsonl"), dsn))
        name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
        with fresh_database(pg_server_dsn) as copy_dsn:
            copy = psycopg.conninfo.conninfo_to_dict(copy_dsn)["dbname"]
            with psycopg.connect(pg_server_dsn, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE "{copy}"')
                conn.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{name}"')
            yield dsn, copy_dsn


def test_concurrent_writers_end_as_one_sequential_writer(loaded_pair, conf, tmp_path):
    dsn, seq_dsn = loaded_pair
    bases = cc.sample_bases(dsn, SAMPLE.with_suffix(".jsonl"))
    assert len(bases) >= 4
    round_of = lambda r: cc.make_round(r, bases, CLIENTS)  # noqa: E731

    result = cc.run_clients(cc.checkers(conf, dsn), CLIENTS, round_of, SECONDS, tmp_path / "clients")
    rounds = [round_of(r) for r in range(result.rounds)]
    summary = cc.latency_summary(result)
    print(summary)
    assert result.errors == []                                   # no client met an exception
    assert result.rounds >= 3, summary
    assert cc.verdict_problems(result, rounds, dsn) == []        # an answer per article, the one stored

    concurrent = cc.audit(dsn, rounds)
    assert concurrent["problems"] == []
    assert concurrent["stored"] == concurrent["articles"]

    # One client, the same articles round by round, against a copy of the same loaded sample.
    with check.Checker(conf, seq_dsn, insert=True, run_id="sequential") as one:
        answers = cc.sequential(one, rounds)
    assert all(v.error is None for v in answers)
    reference = cc.audit(seq_dsn, rounds)
    assert reference["problems"] == []
    # The same clusters; copies of sample stories have the same canonical and stage, whatever the order.
    assert concurrent["cluster_of"] == reference["cluster_of"]
    sample_ids = [i for r in rounds for s in r.stories if s.base is not None for i in s.ids]
    assert {i: concurrent["links_of"][i] for i in sample_ids} == {i: reference["links_of"][i] for i in sample_ids}
    # Racing made some clients wait (the claims) or answer "already stored": the race was there to lose.
    already = sum("already stored" in (v.get("error") or "") for c in result.clients for call in c["calls"]
                  for v in call["verdicts"])
    assert already > 0


def _article(i: int, url: str, body: str) -> dict:
    return {"id": i, "url": url, "title": "Launch capsizes in the Meghna", "body": body,
            "published_at": "2026-05-02T08:00:00+00:00", "source": "x", "lang": "en"}


BODY = ("A passenger launch capsized in the Meghna near Chandpur on Saturday evening after a sudden storm, "
        "the district administration said, and divers and coast guard boats searched through the night for "
        "at least a dozen people still missing while relatives waited on the bank for news of them.")


def test_a_deadlock_is_retried_and_when_retries_run_out_the_article_is_answered_with_why(pg_dsn, conf):
    """Another writer holds one of a batch's keys and then waits for a key the batch holds: Postgres
    breaks the cycle by aborting the batch (it waited first), which is retried and goes in; with a
    single attempt the article is answered from a lookup and says it was not stored."""
    for attempts, stored in ((3, True), (1, False)):
        a = _article(100 + attempts, f"https://deadlock.example/{attempts}", BODY + f" ({attempts})")
        checker = check.Checker(conf, pg_dsn, insert=True, max_attempts=attempts)
        keys = checker.claim_keys([Probe(k) for k in checker.preparer.rows([checker._input_row(a)])])
        low, high = keys[0], keys[-1]
        other = psycopg.connect(pg_dsn)
        other.execute("INSERT INTO check_claims VALUES (%s)", (high,))       # held, uncommitted

        def close_the_cycle():
            time.sleep(0.5)                          # the batch holds `low` and waits for `high` by now
            try:
                other.execute("INSERT INTO check_claims VALUES (%s)", (low,))   # waits for the batch
            except psycopg.errors.DeadlockDetected:
                other.rollback()
                return
            other.execute("DELETE FROM check_claims WHERE key = ANY(%s)", ([low, high],))
            other.commit()

        t = threading.Thread(target=close_the_cycle)
        t.start()
        (verdict,) = checker.check_many([a])
        t.join()
        other.close()
        checker.close()
        assert checker.stats.deadlocks >= 1
        ids = [r[0] for r in psycopg.connect(pg_dsn).execute("SELECT id FROM documents WHERE id = %s", (a["id"],))]
        if stored:
            assert verdict.error is None and ids == [a["id"]] and checker.stats.retries >= 1
        else:
            assert verdict.error.startswith("not inserted: deadlock detected on each of 1 attempts") and ids == []
            assert checker.stats.gave_up == 1 and "1 batch not inserted after 1 attempts" in check.gave_up_summary(checker)
        with psycopg.connect(pg_dsn) as conn:
            assert conn.execute("SELECT count(*) FROM check_claims").fetchone() == (0,)   # no claim outlives its batch


def test_stage_4_time_slots_meet_for_every_pair_within_the_window():
    """Stage 4 has no key: its claims are slots of window_hours, and any two articles it could pair
    (at most the window apart) must share one, whatever their offsets; far apart ones share none."""
    import random
    from datetime import datetime, timedelta, timezone
    from types import SimpleNamespace

    from newsdedup.stages.semantic.live import SemanticLookup

    window = timedelta(hours=48)
    lookup = SimpleNamespace(window=window)
    rng = random.Random(4)
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for _ in range(2000):
        a = t0 + timedelta(seconds=rng.randrange(10 ** 8))
        gap = timedelta(seconds=rng.randrange(int(window.total_seconds()) + 1))
        b = a + gap if rng.random() < 0.5 else a - gap
        ka, kb = SemanticLookup.claim_keys(lookup, [Probe({"id": 1, "published_at": a}),
                                                    Probe({"id": 2, "published_at": b.replace(tzinfo=None)})])
        assert set(ka) & set(kb), (a, b)
    far = SemanticLookup.claim_keys(lookup, [Probe({"id": 1, "published_at": t0}),
                                             Probe({"id": 2, "published_at": t0 + 3 * window}),
                                             Probe({"id": 3, "published_at": None})])
    assert not set(far[0]) & set(far[1]) and far[2] == []
