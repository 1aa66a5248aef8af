"""migrate-urls against a real Postgres: dry run, apply, collisions, foreign keys."""

from __future__ import annotations

import psycopg
import pytest

from newsdedup import cli
from newsdedup.ops import migrate

ROWS = [
    (1, "https://www.prothomalo.com/a?utm_source=fb&ref=home", "prothomalo"),  # -> https://prothomalo.com/a
    (2, "https://prothomalo.com/a", "prothomalo"),                            # unchanged, collides with 1
    (3, "https://dailystar.net/news?id=7&from=home#top", "dailystar"),       # keeps id, drops from
    (4, "not a url", "dailystar"),                                            # malformed, untouched
    (5, None, "dailystar"),                                                   # null, untouched
    (6, "https://example.com/ok", None),                                      # already canonical
    (7, "HTTPS://Example.com:443/x/?fbclid=1", None),                         # -> https://example.com/x
]


def _setup(dsn: str, unique_url: bool = False) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(f"""
            CREATE TABLE docs (id bigint PRIMARY KEY, url text {'UNIQUE' if unique_url else ''}, src text);
            CREATE TABLE mentions (mention_id serial PRIMARY KEY,
                                   doc_id bigint NOT NULL REFERENCES docs (id));
        """)
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO docs VALUES (%s, %s, %s)", ROWS)
            cur.executemany("INSERT INTO mentions (doc_id) VALUES (%s)", [(r[0],) for r in ROWS])


def _urls(dsn: str) -> dict[int, str | None]:
    with psycopg.connect(dsn) as conn:
        return dict(conn.execute("SELECT id, url FROM docs").fetchall())


TARGET = migrate.Target("docs", source_column="src")


def test_dry_run_reports_and_changes_nothing(pg_dsn, conf):
    _setup(pg_dsn)
    before = _urls(pg_dsn)
    report = migrate.migrate(pg_dsn, TARGET, conf.url)
    assert _urls(pg_dsn) == before
    assert (report.rows, report.null_urls, report.malformed, report.changed) == (7, 1, 1, 3)
    assert report.malformed_examples[0][0] == 4
    assert report.collisions == [("https://prothomalo.com/a", [1, 2])]
    assert not report.applied
    # the temporary table went with the rolled-back transaction: a second dry run works, and
    # rows in different batches still see each other as collisions
    one_by_one = migrate.migrate(pg_dsn, TARGET, conf.url, batch_size=1)
    assert one_by_one.changed == 3 and one_by_one.collisions == report.collisions


def test_apply_updates_in_batches_keeps_ids_and_foreign_keys(pg_dsn, conf):
    _setup(pg_dsn)
    report = migrate.migrate(pg_dsn, TARGET, conf.url, apply=True, batch_size=2)
    assert report.applied and report.updated == 3
    after = _urls(pg_dsn)
    assert after == {1: "https://prothomalo.com/a", 2: "https://prothomalo.com/a",
                     3: "https://dailystar.net/news?id=7", 4: "not a url", 5: None,
                     6: "https://example.com/ok", 7: "https://example.com/x"}
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM mentions m JOIN docs d ON d.id = m.doc_id").fetchone()[0] == 7
        fk = conn.execute("SELECT convalidated FROM pg_constraint WHERE conrelid = 'mentions'::regclass "
                          "AND contype = 'f'").fetchall()
        assert fk == [(True,)]
    # a second apply is a no-op
    again = migrate.migrate(pg_dsn, TARGET, conf.url, apply=True)
    assert again.changed == 0 and again.updated == 0 and _urls(pg_dsn) == after


def test_unique_url_collision_refuses_then_skips(pg_dsn, conf):
    _setup(pg_dsn, unique_url=True)
    before = _urls(pg_dsn)
    with pytest.raises(migrate.MigrationError, match="unique index"):
        migrate.migrate(pg_dsn, TARGET, conf.url, apply=True)
    assert _urls(pg_dsn) == before
    report = migrate.migrate(pg_dsn, TARGET, conf.url, apply=True, skip_collisions=True)
    assert report.skipped_for_collision == 1 and report.updated == 2
    after = _urls(pg_dsn)
    assert after[1] == before[1] and after[2] == before[2]  # neither merged nor deleted
    assert after[7] == "https://example.com/x"


def test_cli_dry_run_and_apply(pg_dsn, capsys):
    _setup(pg_dsn)
    base = ["migrate-urls", "--pg", pg_dsn, "--table", "docs", "--source-column", "src"]
    assert cli.main(base) == 0
    out = capsys.readouterr().out
    assert "would change      3" in out and "dry run" in out and "collision  https://prothomalo.com/a" in out
    assert _urls(pg_dsn)[7].startswith("HTTPS://")
    assert cli.main(base + ["--apply"]) == 0
    assert _urls(pg_dsn)[7] == "https://example.com/x"


def test_cli_unknown_table_is_a_clean_error(pg_dsn, capsys):
    code = cli.main(["migrate-urls", "--pg", pg_dsn, "--table", "nope"])
    assert code == 2
    assert "nope" in capsys.readouterr().err
