"""`check --workers N`: read-only rounds spread over worker processes give one process's verdicts,
in input order, copies of articles in earlier rounds included (the lookups' memory); a bad line
mid-input stops the stream where one process stops it; --insert refuses workers."""

from __future__ import annotations

import json
import os
import re
import signal
from datetime import datetime, timedelta

import numpy as np
import psycopg
import pytest

from newsdedup import cli
from newsdedup.errors import UserError
from newsdedup.ops import check

from newsdedup_lab.check_bench import split_articles

ROUND = 16      # articles per round: the input below is ~12 rounds


@pytest.fixture(scope="module")
def archive(module_pg_dsn, conf):
    """150 synth articles stored by check --insert; the 150 others (with their copies and near copies
    at every stage) are the input."""
    known, incoming = split_articles(150, 7)
    with check.Checker(conf, module_pg_dsn, insert=True, run_id="archive") as checker:
        list(checker.check_batch(known))
    return module_pg_dsn, incoming


def with_copies(incoming: list[dict]) -> list[dict]:
    """Nine rounds of the input, then three rounds of copies, under new ids, of its first articles,
    one kind per round (so that each round is answered again for its own stage's reason): the same
    URL an hour earlier (stage 1: the copy holds the key first in its round, and is earlier than
    the remembered canonical), the same text at another URL (stage 2), the text with an agency
    credit added (stage 3). A copy links to an earlier round's article only through that round's
    memory."""
    head, copies = incoming[:9 * ROUND], []
    for kind in range(3):
        for i, a in enumerate(head[:ROUND]):
            copy = {**a, "id": 900_000 + kind * ROUND + i}
            if kind == 0:
                copy["published_at"] = (datetime.fromisoformat(a["published_at"]) - timedelta(hours=1)).isoformat()
            else:
                copy["url"] = f"https://copies.example/{kind}/{i}"
            if kind == 2:
                copy["body"] = (a.get("body") or "") + " (UNB)"
            copies.append(copy)
    return head + copies


def test_workers_give_the_verdicts_of_one_process_in_input_order(archive, conf):
    dsn, incoming = archive
    articles = with_copies(incoming)
    with check.Checker(conf, dsn, batch_size=ROUND) as one:
        expected = one.check_many(articles)
    with check.Checker(conf, dsn, batch_size=ROUND, workers=2) as spread:
        got = spread.check_many(articles)
        again = spread.check_many(articles)       # the same workers, a second call: a fresh memory
        stats = spread.stats
    assert got == expected and again == expected
    # The case under test occurs: copies answered from an earlier round's article (not from Postgres),
    # so some rounds were answered again here, and the others by the workers.
    first_ids = {a["id"] for a in incoming[:ROUND]}
    from_memory = [v for v in expected if v.id >= 900_000 and v.canonical_id in first_ids]
    assert {v.stage for v in from_memory} == {"url", "content", "simhash"} and len(from_memory) >= ROUND // 2
    assert stats.rounds_answered_here >= 2 * 3 and stats.rounds_by_workers > 0
    assert q(dsn, "SELECT count(*) FROM documents WHERE run_id <> 'archive'") == [(0,)]   # read-only


def q(dsn, text):
    with psycopg.connect(dsn) as c:
        return c.execute(text).fetchall()


def test_an_input_of_one_round_starts_no_worker(archive, conf):
    """A worker costs seconds to start: an input that fits one round (a full one included) is answered here."""
    dsn, incoming = archive
    with check.Checker(conf, dsn, batch_size=ROUND, workers=2) as checker:
        assert checker.check_many(incoming[:ROUND]) == check.Checker(conf, dsn, batch_size=ROUND).check_many(incoming[:ROUND])
        assert checker.check(incoming[0]).id == incoming[0]["id"]
        assert checker._pool is None and checker.worker_pids == {}


def test_a_bad_line_mid_input_stops_the_workers_where_one_process_stops(archive, tmp_path, capsys):
    dsn, incoming = archive
    path = tmp_path / "input.jsonl"
    lines = [json.dumps(a) for a in incoming[:3 * ROUND + 5]] + ['{"id": 7, "title": "cut off'] + \
            [json.dumps(a) for a in incoming[3 * ROUND + 5:]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stages_1_3 = tmp_path / "conf.yaml"
    stages_1_3.write_text("semantic: {enabled: false}\n", encoding="utf-8")
    outs = []
    for workers in ("1", "2"):
        assert cli.main(["check", "--conf", str(stages_1_3), "--pg", dsn, "--input", str(path),
                         "--batch-size", str(ROUND), "--workers", workers]) == 2
        out, err = capsys.readouterr()
        assert err.startswith(f"newsdedup: error: {path}:{3 * ROUND + 6}: not a JSON object (") and err.count("\n") == 1
        outs.append(out)
    assert [json.loads(x)["id"] for x in outs[1].splitlines()] == [a["id"] for a in incoming[:3 * ROUND + 5]]
    assert outs[1] == outs[0]


def test_a_killed_worker_stops_the_call_with_one_line(archive, conf):
    dsn, incoming = archive
    with check.Checker(conf, dsn, batch_size=ROUND, workers=2) as checker:
        stream = checker.check_batch(incoming)
        assert next(stream).id == incoming[0]["id"]
        for pid in checker.worker_pids:          # the worker that answered the first round
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(UserError, match="a check worker process ended abruptly"):
            list(stream)
        assert checker._pool is None and checker.check(incoming[1]).id == incoming[1]["id"]


@pytest.mark.parametrize("options,message", [
    ({"insert": True, "workers": 2}, "--workers > 1 is for read-only lookups"),
    ({"workers": 0}, "--workers must be a whole number of processes, 1 or more (got 0)"),
    ({"semantic": True, "workers": 2}, "--workers > 1 needs stage 4 off"),
])
def test_workers_are_refused_where_they_cannot_give_one_process_verdicts(archive, conf, options, message):
    dsn, _ = archive
    if options.pop("semantic", False):
        conf = conf.with_overrides({"semantic": {"enabled": True}})
    with pytest.raises(UserError, match=re.escape(message)):
        check.Checker(conf, dsn, **options)


def test_check_insert_with_workers_is_a_one_line_error(archive, tmp_path, capsys):
    dsn, incoming = archive
    path = tmp_path / "input.jsonl"
    path.write_text(json.dumps(incoming[0]) + "\n", encoding="utf-8")
    stages_1_3 = tmp_path / "conf.yaml"
    stages_1_3.write_text("semantic: {enabled: false}\n", encoding="utf-8")
    assert cli.main(["check", "--conf", str(stages_1_3), "--pg", dsn, "--input", str(path), "--insert",
                     "--workers", "2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("newsdedup: error: --workers > 1 is for read-only lookups") and err.count("\n") == 1
    assert q(dsn, "SELECT count(*) FROM documents WHERE run_id <> 'archive'") == [(0,)]


def test_a_remembered_canonical_later_than_the_rounds_own_changes_nothing(conf):
    """memory_meets' order tests, which the copies above do not reach apart: a shared key (or a verified
    stage-3 pair) whose remembered canonical is later than the one the round's probes link to leaves
    their answers as they are; an earlier one changes them."""
    from newsdedup.stages.base import ExactKeyLookup, order_of
    from newsdedup.stages.simhash.live import Memory, SimhashLookup, _Seen
    from newsdedup.stages.simhash.verify import Features

    early, late = order_of(datetime(2026, 1, 1), 5), order_of(datetime(2026, 1, 2), 7)
    exact = ExactKeyLookup("content", "content_hash")
    assert not exact.memory_meets({"k": (7, late)}, {"k": (5, early)}, {100})
    assert exact.memory_meets({"k": (5, early)}, {"k": (7, late)}, {100})
    assert exact.memory_meets({"k": (7, late)}, {"k": (100, early)}, {100})    # the round's probe held it: unlinked

    sim = SimhashLookup(conf)
    feats = Features(np.arange(300, dtype=np.int32), (), ())

    def memory_of(seen_id, canonical):
        seen = _Seen(seen_id, "en", 12345, [1] * 25, feats, canonical)
        return Memory({42: [seen]}, {seen_id: feats})

    assert not sim.memory_meets(memory_of(50, (7, late)), memory_of(100, (5, early)), {100})
    assert sim.memory_meets(memory_of(50, (5, early)), memory_of(100, (7, late)), {100})
    assert sim.memory_meets(memory_of(50, (7, late)), memory_of(100, (100, early)), {100})   # unlinked probe

    # One id twice in a round: the first text pairs with the remembered probe but fails verification,
    # the second passes it. Each is tested.
    other = Features(np.arange(5000, 5300, dtype=np.int32), (), ())
    first, second = (_Seen(100, "en", 12345, [1] * 25, f, (100, early)) for f in (other, feats))
    assert sim.memory_meets(memory_of(50, (7, late)), Memory({42: [first, second]}, {100: feats}), {100})
