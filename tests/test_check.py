"""`newsdedup check` on an empty real PostgreSQL: a batch's articles matched against each other
(content, SimHash, vectors) without reading back its own inserts, bad JSONL lines, and the
per-article savepoint of --insert."""

from __future__ import annotations

import json
import sys
from datetime import timedelta

import psycopg
import pytest

from newsdedup import cli
from newsdedup.errors import UserError
from newsdedup.ops import check
from newsdedup.stages.content import normalize_text
from newsdedup.stages.simhash import hamming
from newsdedup.stages.simhash.reference import shingle_set

from semantic_data import ARTICLES, SEM, T0

BODY = ("Ferry service on the Padma resumed on Monday after three days of suspension due to dense fog, "
        "the inland water transport authority said, adding that launches and ferries would run on the "
        "usual timetable from the Mawa and Kathalbari terminals while passengers were asked to check "
        "the weather bulletins before setting out.")


def article(i, body=BODY, title="Ferry service resumes on the Padma", hours=0, url=None, lang="en"):
    return {"id": i, "url": url or f"https://outlet{i}.example/news/{i}", "title": title, "body": body,
            "published_at": (T0 + timedelta(hours=hours)).isoformat(), "source": f"outlet{i}", "lang": lang}


def q(dsn, text, params=()):
    with psycopg.connect(dsn) as c:
        return c.execute(text, params).fetchall()


def test_a_batch_matches_its_own_copies_by_content_and_simhash(pg_dsn, conf):
    checker = check.Checker(conf, pg_dsn)
    copy = article(2, url="https://elsewhere.example/ferry")
    edited = article(3, body=BODY + " (UNB)", url="https://third.example/ferry")   # an agency credit added
    other = article(4, body="Rivers in Sylhet rose above danger level on Tuesday, leaving thousands of families "
                            "stranded as the Surma kept swelling after heavy rain upstream in Meghalaya.",
                    title="Flood situation worsens in Sylhet")
    # The case under test occurs: the edit changes the content hash, not the set SimHash beyond the threshold.
    k1, k3 = checker.keys(article(1)), checker.keys(edited)
    assert k1["content_hash"] != k3["content_hash"] and k1["url_hash"] != k3["url_hash"]
    assert hamming(k1["simhash_w"], k3["simhash_w"]) <= conf.simhash.language("en").max_hamming

    verdicts = list(checker.check_batch([article(1), copy, edited, other]))
    assert [(v.id, v.canonical_id, v.stage) for v in verdicts] == \
        [(1, None, None), (2, 1, "content"), (3, 1, "simhash"), (4, None, None)]
    # Stage 3 scores on the batch's scale: the Jaccard of the two word 3-shingle sets (reference.py).
    a, b = (set(shingle_set(f"{normalize_text(t)}\n{normalize_text(x)}".casefold(), "word", 3).tolist())
            for t, x in (("Ferry service resumes on the Padma", BODY),
                         ("Ferry service resumes on the Padma", BODY + " (UNB)")))
    assert verdicts[1].score == 1.0 and verdicts[2].score == pytest.approx(len(a & b) / len(a | b), abs=1e-12)
    assert q(pg_dsn, "SELECT count(*) FROM documents") == [(0,)]          # without --insert nothing is written


def test_rounds_whose_keys_are_computed_ahead_answer_as_one_round(pg_dsn, conf):
    """Two articles a round: each round's keys are computed in the helper thread while the round before
    it is looked up. The verdicts are those of one round of all of them (copies of an earlier round's
    articles found in the call's memory), and an input that is not an article stops the call after the
    rounds before its own, as it does without the thread."""
    other = article(4, body="Rivers in Sylhet rose above danger level on Tuesday, leaving thousands of families "
                            "stranded as the Surma kept swelling after heavy rain upstream in Meghalaya.",
                    title="Flood situation worsens in Sylhet")
    articles = [article(1), other, article(2, url="https://elsewhere.example/ferry"),
                {**other, "id": 5, "url": "https://outlet4.example/news/4?utm_source=x"},
                article(3, body=BODY + " (UNB)", url="https://third.example/ferry"),
                article(6, title="Policy rate left unchanged", body="The central bank kept its policy rate "
                        "unchanged at its quarterly meeting, citing easing food prices and a stable exchange rate.")]
    whole = check.Checker(conf, pg_dsn, batch_size=len(articles)).check_many(articles)
    assert [(v.id, v.canonical_id, v.stage) for v in whole] == \
        [(1, None, None), (4, None, None), (2, 1, "content"), (5, 4, "url"), (3, 1, "simhash"), (6, None, None)]
    with check.Checker(conf, pg_dsn, batch_size=2) as checker:
        assert checker.check_many(articles) == whole
        assert checker._keys_pool is not None          # the rounds went through the helper thread
        answered = []
        with pytest.raises(UserError, match="article without an id"):
            for verdict in checker.check_batch(articles[:4] + [{"title": "no id"}] + articles[4:]):
                answered.append(verdict)
        assert answered == whole[:4]


def test_a_batch_matches_its_own_same_event_reports_by_vector(pg_dsn, conf):
    checker = check.Checker(conf.with_overrides({"semantic": SEM}), pg_dsn)

    def report(i, key, hours):
        title, body = ARTICLES[key]
        return article(i, body=body, title=title, hours=hours)

    a, b, other, derby, late = checker.check_batch([report(1, "metro_a", 0), report(2, "metro_b", 4),
                                                    report(3, "flood", 1), report(4, "derby", 2),
                                                    report(5, "derby_other_outlet", 62)])
    assert [v.canonical_id for v in (a, other, derby)] == [None, None, None]
    assert (b.canonical_id, b.stage) == (1, "semantic") and b.score >= SEM["thresholds"]["same_language"]
    # The same game by another outlet links to the derby within the window (test_semantic), not 60 h later.
    assert late.canonical_id is None
    (near,) = list(check.Checker(checker.conf, pg_dsn).check_batch([report(4, "derby", 2),
                                                                   report(5, "derby_other_outlet", 5)]))[1:]
    assert (near.canonical_id, near.stage) == (4, "semantic")


def test_a_bad_jsonl_line_stops_the_batch_with_its_line_number_and_inserts_nothing(pg_dsn, tmp_path, capsys):
    path = tmp_path / "batch.jsonl"
    path.write_text(json.dumps(article(1)) + "\n\n" + '{"id": 2, "title": "cut off\n' + json.dumps(article(3)) + "\n",
                    encoding="utf-8")
    before = sys.getswitchinterval()
    assert cli.main(["check", "--pg", pg_dsn, "--input", str(path), "--insert"]) == 2
    assert sys.getswitchinterval() == before != check.SWITCH_INTERVAL_S   # check's interval ends with it
    out, err = capsys.readouterr()
    assert f"{path}:3: not a JSON object" in err
    assert [json.loads(line)["id"] for line in out.splitlines()] == [1]   # the lines before it were answered
    assert q(pg_dsn, "SELECT count(*) FROM documents") == [(0,)]          # the batch's transaction rolled back


def test_a_unique_violation_undoes_only_its_own_article(pg_dsn, conf):
    """A unique violation ON CONFLICT DO NOTHING cannot absorb (another table's key, written by a trigger,
    as a concurrent writer's would be): article 2's savepoint rolls back, 1 and 3 and 3's link still go in."""
    checker = check.Checker(conf, pg_dsn, insert=True, run_id="check-test")
    with psycopg.connect(pg_dsn) as c:
        c.execute("CREATE TABLE sources_seen (source text PRIMARY KEY)")
        c.execute("CREATE FUNCTION note_source() RETURNS trigger LANGUAGE plpgsql AS "
                  "$$ BEGIN INSERT INTO sources_seen VALUES (NEW.source); RETURN NEW; END $$")
        c.execute("CREATE TRIGGER documents_note_source BEFORE INSERT ON documents "
                  "FOR EACH ROW EXECUTE FUNCTION note_source()")
    clash = {**article(2, body="A completely different story about the new bridge over the Jamuna opening to "
                            "traffic next spring after two years of construction delays and cost overruns."), "source": "outlet1"}
    verdicts = list(checker.check_batch([article(1), clash, article(3, url="https://elsewhere.example/ferry")]))
    assert [(v.id, v.canonical_id, v.stage) for v in verdicts] == [(1, None, None), (2, None, None), (3, 1, "content")]
    assert verdicts[0].error is None and verdicts[2].error is None
    assert verdicts[1].error.startswith("not inserted: duplicate key value violates unique constraint")
    assert q(pg_dsn, "SELECT id FROM documents ORDER BY id") == [(1,), (3,)]
    assert q(pg_dsn, "SELECT source FROM sources_seen ORDER BY 1") == [("outlet1",), ("outlet3",)]       # article 2's row went with its savepoint
    assert q(pg_dsn, "SELECT duplicate_id, canonical_id, stage, run_id FROM duplicate_links") == \
        [(3, 1, "content", "check-test")]


@pytest.mark.parametrize("line,message", [("[1, 2]", "not a JSON object"), ('"just text"', "not a JSON object"),
                                          ('{"title": "no id"}', "article without an id")])
def test_a_json_line_that_is_not_an_article_is_a_clear_error(pg_dsn, tmp_path, capsys, line, message):
    path = tmp_path / "batch.jsonl"
    path.write_text(json.dumps(article(1)) + "\n" + line + "\n", encoding="utf-8")
    assert cli.main(["check", "--pg", pg_dsn, "--input", str(path), "--insert"]) == 2
    out, err = capsys.readouterr()
    assert message in err and err.count("\n") == 1
    assert [json.loads(x)["id"] for x in out.splitlines()] == [1]
    assert q(pg_dsn, "SELECT count(*) FROM documents") == [(0,)]


def test_the_checker_connection_plans_every_lookup_for_its_parameters(conf, pg_dsn):
    """A long-lived checker must not fall into a generic plan (stage 3's GIN lookup then becomes a
    scan of the whole table: 240 lookups/s fell to 6/s at 1M documents)."""
    with check.Checker(conf, pg_dsn) as checker:
        for i in range(12):                      # past psycopg's prepare threshold and Postgres' five custom plans
            checker.check(article(100 + i))
        conn = checker._connection()
        assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_custom_plan",)


def test_a_lookup_reads_the_links_of_the_documents_it_found_only(pg_dsn, conf):
    """The lookups read each found document's active link (stages.base.ACTIVE_LINK_JOINS). With
    statistics taken while duplicate_links was empty (a fresh database that check --insert then
    fills), a plain join was planned over the whole links table: a hash of every link, or at 1M
    documents a pass over every link for each found document (54 ms per bulk round). The fenced
    lateral reads the link of each found document and no other, whatever the statistics say."""
    from newsdedup.stages.base import ExactKeyLookup

    check.Checker(conf, pg_dsn, insert=True)                      # the schema
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        c.execute("ALTER TABLE duplicate_links SET (autovacuum_enabled = false)")   # the statistics stay stale
        c.execute("ANALYZE duplicate_links")
        # 20,000 documents in 10,000 pairs of one content hash, the second of each linked to the first.
        c.execute("INSERT INTO documents (id, content_hash, published_at) SELECT i, md5(((i - 1) % 10000)::text), "
                  "'2026-01-01'::timestamptz + i * interval '1 minute' FROM generate_series(1, 20000) i")
        c.execute("INSERT INTO duplicate_links (duplicate_id, canonical_id, stage, score, linked_at, run_id) "
                  "SELECT i, i - 10000, 'content', 1.0, now(), 't' FROM generate_series(10001, 20000) i")
    lookup = ExactKeyLookup("content", "content_hash")
    keys = [r[0] for r in q(pg_dsn, "SELECT content_hash FROM documents WHERE id BETWEEN 1 AND 10")]
    with psycopg.connect(pg_dsn) as c:
        found = c.execute(lookup.sql, {"keys": keys}).fetchall()
        plan = c.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + lookup.sql, {"keys": keys}).fetchone()[0][0]["Plan"]
    assert len(found) == 20 and sorted(r[4] for r in found if r[3] == "content") == list(range(1, 11))

    def link_rows_read(node):
        here = 0
        if node.get("Relation Name") == "duplicate_links":
            here = (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        return here + sum(link_rows_read(n) for n in node.get("Plans", ()))

    def join_filtered(node):
        return node.get("Rows Removed by Join Filter", 0) + sum(join_filtered(n) for n in node.get("Plans", ()))

    assert link_rows_read(plan) <= len(found) and join_filtered(plan) == 0
