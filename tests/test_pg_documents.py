"""The seeds' Postgres schema (documents + links) and the live `check` lookups, against a real PostgreSQL.

One job run over the bundled sample fills Delta and Postgres; the lookups are
checked against what that run decided.
"""

from __future__ import annotations

import json

import psycopg
import pytest
from pyspark.sql import functions as F

from newsdedup import cli, job
from newsdedup.io import pg, pg_documents, store
from newsdedup.ops import check
from newsdedup.stages.simhash import hamming

from conftest import SAMPLE


@pytest.fixture(scope="module")
def loaded(spark, conf, module_pg_dsn, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    dsn = module_pg_dsn
    report = job.run(spark, str(SAMPLE), str(out), conf, dsn=dsn)
    docs = {r["id"]: r.asDict() for r in store.read(spark, out, "documents").collect()}
    links = {r["duplicate_id"]: r.asDict() for r in store.active_links(spark, out).collect()}
    return str(out), dsn, report, docs, links


def sample_rows():
    with open(SAMPLE.with_suffix(".jsonl"), encoding="utf-8") as fh:
        return {r["id"]: r for r in map(json.loads, fh)}


def q(dsn, text, params=()):
    with psycopg.connect(dsn) as c:
        return c.execute(text, params).fetchall()


def test_documents_table_mirrors_delta_with_every_key(loaded):
    _, dsn, report, docs, _ = loaded
    rows = {r[0]: r for r in q(dsn, "SELECT id, content_hash, simhash, band_0, band_3, lang FROM documents")}
    assert set(rows) == set(docs) and report.counts["postgres.documents.inserted"] == len(docs)
    for i, (_, content, fp, b0, b3, lang) in rows.items():
        d = docs[i]
        assert (content, fp, b0, b3, lang) == (d["content_hash"], d["simhash"], d["band_0"], d["band_3"], d["lang"])


def test_url_hash_is_unique_and_held_by_the_url_groups_canonical(loaded):
    _, dsn, _, docs, links = loaded
    held = dict(q(dsn, "SELECT id, url_hash FROM documents"))
    url_links = [l for l in links.values() if l["stage"] == "url"]
    assert len(url_links) == 12
    for link in url_links:
        assert held[link["duplicate_id"]] is None
        assert held[link["canonical_id"]] == docs[link["duplicate_id"]]["url_hash"]
    # Every other document with a parseable URL keeps its own hash.
    others = [i for i, d in docs.items() if d["url_hash"] and i not in {l["duplicate_id"] for l in url_links}]
    assert all(held[i] == docs[i]["url_hash"] for i in others)


def test_schema_indexes_foreign_keys_and_one_active_link(loaded):
    _, dsn, _, _, _ = loaded
    idx = dict(q(dsn, "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('documents', 'duplicate_links')"))
    assert "UNIQUE" in idx["documents_url_hash_key"]
    assert "documents_content_hash_idx" in idx and "gin (sim_buckets)" in idx["documents_sim_buckets_gin"]
    # Inserted rows go straight into the index: no pending list for every lookup to scan.
    assert "fastupdate=off" in idx["documents_sim_buckets_gin"]
    assert not [name for name in idx if name.startswith("documents_band_")]   # the seed's lookup is gone
    one = idx["duplicate_links_one_active"]
    assert "UNIQUE" in one and "reverted_at IS NULL" in one and "superseded_at IS NULL" in one
    fks = {r[0] for r in q(dsn, "SELECT conname FROM pg_constraint WHERE contype = 'f' "
                                "AND conrelid = 'duplicate_links'::regclass")}
    assert fks == {"duplicate_links_duplicate_fk", "duplicate_links_canonical_fk"}
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        q(dsn, "INSERT INTO duplicate_links (duplicate_id, canonical_id, stage, linked_at, run_id) "
               "VALUES (987654321, 1, 'url', now(), 'x')")


def test_reload_is_idempotent(loaded, spark, conf):
    out, dsn, _, docs, _ = loaded
    before = q(dsn, "SELECT * FROM documents ORDER BY id")
    again = pg_documents.load_from_delta(spark, out, dsn, conf, "reload")
    assert again["inserted"] == 0 and again["updated"] == len(docs)
    assert q(dsn, "SELECT * FROM documents ORDER BY id") == before
    assert q(dsn, "SELECT count(*) FROM documents_staging") == [(0,)]


STAGE3 = "id, sim_buckets, shingles, nums, names, stage3_settings"


def _stage3_rows(rows) -> dict:
    return {r["id"]: (r["sim_buckets"], None if r["shingles"] is None else bytes(r["shingles"]), r["nums"],
                      r["names"], r["stage3_settings"]) for r in rows}


@pytest.fixture(scope="module")
def text_rows(loaded, spark, conf) -> dict:
    """The stage-3 columns of every stored document as derived from its stored text (no features given)."""
    return _stage3_rows(r.asDict() for r in pg_documents.rows_from_delta(spark, loaded[0], conf, None)[0].collect())


def test_the_load_takes_prepares_features_which_are_what_the_text_gives(loaded, text_rows):
    """The run's load derives no stage-3 column from the text again: it takes prepare's features, and
    every stored row holds the bytes that deriving them from the stored text gives."""
    _, dsn, report, docs, _ = loaded
    assert report.counts["postgres.documents.features_from_text"] == 0
    stored = _stage3_rows(dict(zip(STAGE3.split(", "), r)) for r in q(dsn, f"SELECT {STAGE3} FROM documents"))
    assert stored == text_rows and len(stored) == len(docs)
    assert sum(1 for v in stored.values() if v[1]) > len(docs) // 2


def test_a_row_with_carried_features_takes_them_and_the_others_derive_theirs(loaded, text_rows, spark, conf):
    out, _, _, docs, _ = loaded
    derived = text_rows
    one = min(i for i, v in derived.items() if v[1])
    carried = spark.createDataFrame([(one, b"\x07\x00\x00\x00", ["42"], ["Dhaka"])],
                                    "id long, shingles binary, nums array<string>, names array<string>")
    count = spark.sparkContext.accumulator(0)
    rows, _ = pg_documents.rows_from_delta(spark, out, conf, None, features=carried, derived=count)
    got = _stage3_rows(r.asDict() for r in rows.collect())
    assert got[one] == (derived[one][0], b"\x07\x00\x00\x00", ["42"], ["Dhaka"], derived[one][4])
    assert {i: v for i, v in got.items() if i != one} == {i: v for i, v in derived.items() if i != one}
    assert count.value == sum(1 for i, d in docs.items() if d["simhash_w"] is not None) - 1


# The Spark type of each load column (pg_documents.COLUMNS) that is not a string.
DOC_TYPES = {"id": "long", "simhash": "long", "simhash_w": "long", "published_at": "timestamp",
             **{f"band_{i}": "int" for i in range(4)}, "mh_bands": "array<long>", "sim_buckets": "array<long>",
             "shingles": "binary", "nums": "array<string>", "names": "array<string>", "embedding": "array<float>"}


def _doc_rows(spark, rows):
    cols = pg_documents.COLUMNS
    data = [tuple(r.get(c) for c in cols) for r in rows]
    return spark.createDataFrame(data, ", ".join(f"{c} {DOC_TYPES.get(c, 'string')}" for c in cols))


def test_the_binary_copy_stores_every_column_as_an_insert_of_the_same_values(spark, pg_dsn):
    """pg.stage_dataframe sends each value in its column's binary format (jsonb and vector by dumpers of
    the job's own): every staged column reads back as a plain INSERT of the same values stores it."""
    import datetime as dt

    import numpy as np

    from newsdedup.stages.semantic.embeddings import vector_literal

    utc = dt.timezone.utc
    full = {"id": -(2 ** 63) + 1, "url": "https://x.test/a?b=%E0%A6%95#f", "canonical_url": "https://x.test/a",
            "url_hash": "ab" * 32, "content_hash": "cd" * 32, "simhash": -(2 ** 63), "band_0": 0, "band_1": 65535,
            "band_2": -1, "band_3": 7, "published_at": dt.datetime(2024, 2, 29, 23, 59, 59, 123456, utc),
            "lang": "bn", "source": "ঢাকা ট্রিবিউন", "title": "সংসদে বাজেট \u201cpassed\u201d\x00 — ok", "run_id": "r1",
            "simhash_w": 2 ** 63 - 1, "mh_bands": [-5, 0, 2 ** 62], "sim_buckets": [1, -2],
            "shingles": b"\x00\x01\xff\x00", "nums": ["৫", "3.5"], "names": ["Dhaka", "ঢাকা"], "stage3_settings": "s1",
            "facts": '{"nums": ["৫"], "names": {"a": [1, null]}, "t": "q\\"x"}', "model_version": "m@1",
            "embedding": [0.1, -2.5e-08, 3.4e38, 0.0]}
    empty = {"id": 2, "mh_bands": [], "sim_buckets": [], "nums": [], "names": [], "shingles": b"", "facts": "{}"}
    rows = [full, empty, {"id": 3}]
    pg_documents.ensure_schema(pg_dsn, dim=4)
    cols = pg_documents.COLUMNS
    assert pg.stage_dataframe(_doc_rows(spark, rows), pg_dsn, "documents_staging", cols, "binary") == 3
    casts = {c: f"::{t}" for c, t in pg_documents._TYPES.items()}
    with psycopg.connect(pg_dsn) as conn:
        for r in rows:
            values = [r.get(c) for c in cols]
            values = [v.replace("\x00", "\ufffd") if isinstance(v, str) else v for v in values]
            emb = cols.index("embedding")
            if values[emb] is not None:   # the float4 values, in pgvector's text
                values[emb] = vector_literal(np.asarray(values[emb], np.float32))
            conn.execute(f"INSERT INTO documents_staging (load_id, {', '.join(cols)}) VALUES ('insert', "
                         + ", ".join(f"%s{casts.get(c, '')}" for c in cols) + ")", values)
    texts = ", ".join(f"{c}::text" for c in cols)
    got = {load: sorted(q(pg_dsn, f"SELECT {texts} FROM documents_staging WHERE load_id = %s", (load,)), key=str)
           for load in ("binary", "insert")}
    assert got["binary"] == got["insert"] and len(got["binary"]) == 3
    assert [v for v in got["binary"] if v[0] == str(full["id"])][0][cols.index("title")] == \
        "সংসদে বাজেট \u201cpassed\u201d\ufffd — ok"


@pytest.mark.parametrize("empty_first", [True, False])
def test_a_failed_load_leaves_the_previous_state(spark, pg_dsn, empty_first):
    good = [{"id": 1, "url_hash": "a", "content_hash": "c1"}, {"id": 2, "url_hash": "b"}]
    pg_documents.ensure_schema(pg_dsn)
    if not empty_first:
        pg_documents.load_documents(_doc_rows(spark, good), pg_dsn, "L1")
    before = q(pg_dsn, "SELECT id, url_hash FROM documents ORDER BY id")
    indexes = q(pg_dsn, "SELECT indexname FROM pg_indexes WHERE tablename = 'documents' ORDER BY 1")
    bad = [{"id": 3, "url_hash": "z"}, {"id": 4, "url_hash": "z"}]   # two holders of one url_hash
    with pytest.raises(psycopg.errors.UniqueViolation):
        pg_documents.load_documents(_doc_rows(spark, bad), pg_dsn, "L2")
    assert q(pg_dsn, "SELECT id, url_hash FROM documents ORDER BY id") == before
    # The bulk path dropped the indexes before inserting: the rollback brought them back.
    assert q(pg_dsn, "SELECT indexname FROM pg_indexes WHERE tablename = 'documents' ORDER BY 1") == indexes
    assert "documents_url_hash_key" in {r[0] for r in indexes}


def test_an_older_copy_of_a_url_takes_over_its_url_hash(spark, pg_dsn):
    pg_documents.load_documents(_doc_rows(spark, [{"id": 5, "url_hash": "u"}]), pg_dsn, "L1")
    moved = [{"id": 5, "url_hash": None}, {"id": 4, "url_hash": "u"}]   # 4 is older: now the group's first
    pg_documents.load_documents(_doc_rows(spark, moved), pg_dsn, "L2")
    assert q(pg_dsn, "SELECT id, url_hash FROM documents ORDER BY id") == [(4, "u"), (5, None)]


def test_a_slice_load_moves_url_hash_between_stored_documents_of_its_groups(spark, pg_dsn):
    """A slice stages only its own rows; its groups' stored documents get url_hash from url_groups: given
    up to an older newcomer, or taken back when a re-crawl dates the holder later."""
    import pyarrow as pa

    def groups(pairs):
        return pa.table({"id": [p[0] for p in pairs], "url_hash": [p[1] for p in pairs]},
                        schema=pg_documents.URL_GROUPS_ARROW)

    pg_documents.load_documents(_doc_rows(spark, [{"id": 4, "url_hash": "u"}, {"id": 5, "url_hash": None},
                                                  {"id": 9, "url_hash": "v"}]), pg_dsn, "L1")
    # 3, older than 4, takes u; 4 (stored, not staged) gives it up; 9 is in no group of the slice.
    pg_documents.load_documents(_doc_rows(spark, [{"id": 3, "url_hash": "u"}]), pg_dsn, "L2",
                                url_groups=groups([(4, None), (5, None)]))
    assert q(pg_dsn, "SELECT id, url_hash FROM documents ORDER BY id") == [(3, "u"), (4, None), (5, None), (9, "v")]
    # A re-crawl of 3 dated after 5: 5, stored and not staged, takes u back.
    pg_documents.load_documents(_doc_rows(spark, [{"id": 3, "url_hash": None}]), pg_dsn, "L3",
                                url_groups=groups([(4, None), (5, "u")]))
    assert q(pg_dsn, "SELECT id, url_hash FROM documents ORDER BY id") == [(3, None), (4, None), (5, "u"), (9, "v")]


def test_a_reload_without_vectors_keeps_the_vectors_an_earlier_load_gave(spark, pg_dsn):
    """A load of documents without vectors (stage 4 off, another model's rows not joined) upserts their keys
    and leaves each stored vector; a load with a vector replaces it."""
    first = [{"id": 1, "url_hash": "a", "title": "old", "model_version": "m@1", "embedding": [1.0, 0.0, 0.0]},
             {"id": 2, "url_hash": "b", "title": "two", "model_version": "m@1", "embedding": [0.0, 1.0, 0.0]}]
    assert pg_documents.load_documents(_doc_rows(spark, first), pg_dsn, "L1", dim=3)["inserted"] == 2
    second = [{"id": 1, "url_hash": "a", "title": "new"},
              {"id": 2, "url_hash": "b", "title": "two", "model_version": "m@1", "embedding": [0.0, 0.0, 1.0]},
              {"id": 3, "url_hash": "c", "title": "three"}]
    assert pg_documents.load_documents(_doc_rows(spark, second), pg_dsn, "L2", dim=3) == \
        {"staged": 3, "inserted": 1, "updated": 2}
    assert q(pg_dsn, "SELECT id, title, model_version, embedding::text FROM documents ORDER BY id") == \
        [(1, "new", "m@1", "[1,0,0]"), (2, "two", "m@1", "[0,0,1]"), (3, "three", None, None)]


# ---------------------------------------------------------------- check


def article(base: dict, **changes) -> dict:
    a = {k: base.get(k) for k in ("id", "url", "title", "body", "published_at", "source", "lang")}
    a.update(changes)
    return a


def test_check_finds_each_stage_and_nothing_for_a_new_article(loaded, conf):
    _, dsn, _, docs, links = loaded
    rows = sample_rows()
    checker = check.Checker(conf, dsn)
    url_link = next(l for l in links.values() if l["stage"] == "url")
    dup = rows[url_link["duplicate_id"]]
    v = checker.check(article(dup, id=900001, title="something else", body="entirely"))
    assert (v.canonical_id, v.stage, v.score) == (url_link["canonical_id"], "url", 1.0)

    canon = next(i for i, d in docs.items() if i not in links and d["content_hash"] and d["simhash"] is not None)
    v = checker.check(article(rows[canon], id=900002, url="https://fresh.example/a"))
    assert (v.canonical_id, v.stage) == (canon, "content")

    edited = article(rows[canon], id=900003, url="https://fresh.example/b", body=rows[canon]["body"] + " Updated.")
    k = checker.keys(edited)
    assert k["content_hash"] != docs[canon]["content_hash"]
    assert hamming(k["simhash"], docs[canon]["simhash"]) <= conf.simhash.language(k["lang"]).max_hamming
    v = checker.check(edited)
    assert (v.canonical_id, v.stage) == (canon, "simhash") and v.score >= 1 - 3 / 64

    new = checker.check({"id": 900004, "url": "https://fresh.example/c", "title": "Zebra crossing painted",
                         "body": "A zebra crossing was painted in front of the village school on Tuesday.",
                         "published_at": "2026-05-01T10:00:00Z", "source": "x", "lang": None})
    assert (new.canonical_id, new.stage, new.score) == (None, None, None)
    assert q(dsn, "SELECT count(*) FROM documents WHERE id > 900000") == [(0,)]   # no --insert: nothing written


def test_a_content_match_suppressed_at_stage_1_stands_aside(loaded, conf):
    """A document stage 1 linked never takes part in stage 2: its content twin resolves to a survivor."""
    _, dsn, _, docs, links = loaded
    rows = sample_rows()
    url_dups = [l for l in links.values() if l["stage"] == "url"]
    assert url_dups
    checker = check.Checker(conf, dsn)
    twins = 0
    for link in url_dups:
        survivors_same_text = [i for i, d in docs.items()
                               if d["content_hash"] == docs[link["duplicate_id"]]["content_hash"]
                               and links.get(i, {}).get("stage") != "url"]
        v = checker.check(article(rows[link["duplicate_id"]], id=900010, url="https://fresh.example/z"))
        assert v.canonical_id != link["duplicate_id"]
        if survivors_same_text:
            twins += 1
            # The survivor the batch run resolved that text to (itself, or its own content canonical).
            want = {links[i]["canonical_id"] if links.get(i, {}).get("stage") == "content" else i
                    for i in survivors_same_text}
            assert v.stage == "content" and v.canonical_id in want
    assert twins > 0, "the sample must hold a URL duplicate whose text a surviving document shares"


def test_a_batch_sees_its_own_variants_and_insert_survives_conflicts(loaded, conf, capsys, tmp_path):
    _, dsn, _, _, _ = loaded
    existing = sample_rows()[1]
    fresh = {"id": 910001, "url": "https://fresh.example/story?id=7", "title": "Ferry service resumes",
             "body": "Ferry service on the Padma resumed on Monday after three days of suspension due to fog.",
             "published_at": "2026-05-02T08:00:00", "source": "fresh.example", "lang": "en"}
    variant = {**fresh, "id": 910002, "url": "https://www.fresh.example/story?id=7&utm_source=fb",
               "body": "Completely rewritten text about something else for the second variant."}
    path = tmp_path / "batch.jsonl"
    batch = [existing, fresh, variant]
    path.write_text("\n".join(json.dumps(a) for a in batch) + "\n", encoding="utf-8")

    assert cli.main(["check", "--pg", dsn, "--input", str(path)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["id"] for o in out] == [1, 910001, 910002]
    assert out[1] == {"id": 910001, "canonical_id": None, "stage": None, "score": None}
    assert out[2] == {"id": 910002, "canonical_id": 910001, "stage": "url", "score": 1.0}

    assert cli.main(["check", "--pg", dsn, "--input", str(path), "--insert"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert "already stored" in out[0]["error"]           # id 1 is loaded: skipped, the batch goes on
    assert out[2]["canonical_id"] == 910001 and "error" not in out[2]
    assert q(dsn, "SELECT id, url_hash IS NOT NULL FROM documents WHERE id > 910000 ORDER BY id") == \
        [(910001, True), (910002, False)]
    assert q(dsn, "SELECT duplicate_id, canonical_id, stage FROM duplicate_links WHERE duplicate_id > 910000") == \
        [(910002, 910001, "url")]
    # Run again: everything is stored; the lookups now come from Postgres and nothing is inserted twice.
    assert cli.main(["check", "--pg", dsn, "--input", str(path), "--insert"]) == 0
    again = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert again[2]["canonical_id"] == 910001 and "already stored" in again[2]["error"]
    assert q(dsn, "SELECT count(*) FROM duplicate_links WHERE duplicate_id > 910000") == [(1,)]


def test_check_without_pg_or_output_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id": 1}\n')
    assert cli.main(["check", "--input", str(path)]) == 2
    assert "--pg" in capsys.readouterr().err


def test_stats_views_count_superseded_links_as_inactive(loaded):
    _, dsn, _, _, links = loaded
    some = next(iter(links.values()))
    active_before = q(dsn, "SELECT sum(active) FROM link_stats_daily")[0][0]
    with psycopg.connect(dsn) as c:
        c.execute("UPDATE duplicate_links SET superseded_at = now(), superseded_by_run = 'r' "
                  "WHERE duplicate_id = %s", (some["duplicate_id"],))
        assert c.execute("SELECT sum(active), sum(superseded) FROM link_stats_daily").fetchone() == \
            (active_before - 1, 1)
        assert c.execute("SELECT count(*) FROM document_canonical WHERE document_id = %s",
                         (some["duplicate_id"],)).fetchone()[0] == 0
        c.rollback()


def test_documents_from_delta_match_spark_group_first(loaded, spark):
    out, _, _, docs, _ = loaded
    rows = pg_documents.url_hash_of_group_first(store.read(spark, out, "documents"))
    holders = rows.where(F.col("url_hash").isNotNull()).groupBy("url_hash").count()
    assert holders.where("count > 1").count() == 0
    assert holders.count() == len({d["url_hash"] for d in docs.values() if d["url_hash"]})


def test_check_stage_4_finds_the_same_event_within_the_window(pg_dsn, conf):
    """The pgvector query: same model_version, within window_hours of published_at, cosine over threshold."""
    from datetime import timedelta

    from newsdedup.io.pg_vectors import vector_literal
    from newsdedup.stages.semantic import embeddings as emb
    from newsdedup.stages.semantic.live import facts_json

    from semantic_data import ARTICLES, SEM, T0, VERSION

    checker = check.Checker(conf.with_overrides({"semantic": SEM}), pg_dsn)
    model = emb.model_for(checker.conf.semantic)
    pg_documents.ensure_schema(pg_dsn, dim=emb.embedding_dim(model))
    stored = [(1, "metro_a", 0), (2, "derby", 1), (3, "flood", -100)]
    with psycopg.connect(pg_dsn) as c:
        for i, key, hours in stored:
            title, body = ARTICLES[key]
            vec = emb.encode(model, [f"{title}\n{body}"])[0]
            # facts as the documents load writes them: stage 4's evidence reads them too.
            facts = facts_json(f"{title}\n{body}", T0 + timedelta(hours=hours), checker.conf.semantic.evidence)
            c.execute("INSERT INTO documents (id, url_hash, published_at, lang, title, model_version, embedding, "
                      "facts) VALUES (%s, %s, %s, 'en', %s, %s, %s, %s)",
                      (i, f"u{i}", T0 + timedelta(hours=hours), title, VERSION, vector_literal(vec), facts))

    def incoming(i, key, hours):
        title, body = ARTICLES[key]
        return {"id": i, "url": f"https://other.example/{i}", "title": title, "body": body,
                "published_at": (T0 + timedelta(hours=hours)).isoformat(), "source": "other", "lang": "en"}

    near, late, unrelated = checker.check_batch([incoming(10, "metro_b", 4), incoming(11, "metro_a", 60),
                                                 incoming(12, "other_game", 2)])
    assert (near.canonical_id, near.stage) == (1, "semantic") and near.score >= SEM["thresholds"]["same_language"]
    assert late.canonical_id is None          # 60 h after metro_a (56 h after 10): outside the 48 h window
    assert unrelated.canonical_id is None


def _bangla(text: str | None) -> bool:
    return bool(text) and any("\u0980" <= ch <= "\u09ff" for ch in text)


def test_a_table_of_the_older_layout_is_upgraded_and_refilled_by_load(spark, conf, pg_dsn, tmp_path, capsys):
    """Postgres loaded by an older newsdedup (no stage-3 columns, the seed's band indexes) is
    upgraded by the schema and refilled by `newsdedup load`; then check finds a near-duplicate."""
    out = tmp_path / "out"
    job.run(spark, str(SAMPLE), str(out), conf, dsn=pg_dsn)
    with psycopg.connect(pg_dsn) as c:          # back to the older layout
        c.execute("DROP INDEX documents_sim_buckets_gin")
        c.execute("ALTER TABLE documents DROP COLUMN simhash_w, DROP COLUMN mh_bands, DROP COLUMN sim_buckets, "
                  "DROP COLUMN shingles, DROP COLUMN nums, DROP COLUMN names, DROP COLUMN facts")
        c.execute("CREATE INDEX documents_band_0_idx ON documents (band_0)")
    rows = sample_rows()
    original = next(r for r in rows.values() if r.get("body") and not _bangla(r["body"]) and len(r["body"]) > 600)
    words = original["body"].split(" ")
    words[10], words[11] = words[11], words[10]          # one swapped word pair: stage 3, not 2
    edited = {**original, "id": 999_001, "url": "https://elsewhere.example/copy", "body": " ".join(words)}
    assert cli.main(["load", "--output", str(out), "--pg", pg_dsn]) == 0
    capsys.readouterr()
    idx = dict(q(pg_dsn, "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'documents'"))
    assert "documents_sim_buckets_gin" in idx and "documents_band_0_idx" not in idx
    missing = q(pg_dsn, "SELECT count(*) FROM documents WHERE simhash_w IS NOT NULL AND (sim_buckets IS NULL "
                        "OR shingles IS NULL)")
    assert missing == [(0,)]
    verdict = check.Checker(conf, pg_dsn).check(edited)
    assert verdict.stage == "simhash" and verdict.canonical_id is not None


def test_check_insert_stores_what_a_later_lookup_needs(conf, pg_dsn):
    """--insert writes every lookup's columns: a later call (no batch memory) finds the edit in Postgres."""
    rows = sample_rows()
    original = next(r for r in rows.values() if _bangla(r.get("body")) and len(r["body"]) > 400)
    words = original["body"].split(" ")
    words[5], words[6] = words[6], words[5]
    edited = {**original, "id": 999_002, "url": "https://elsewhere.example/bn-copy", "body": " ".join(words)}
    with check.Checker(conf, pg_dsn, insert=True, run_id="first") as checker:
        assert checker.check(original).canonical_id is None
    stored = q(pg_dsn, "SELECT sim_buckets IS NOT NULL, length(shingles) > 0 FROM documents WHERE id = %s",
               (original["id"],))
    assert stored == [(True, True)]
    with check.Checker(conf, pg_dsn) as checker:
        verdict = checker.check(edited)
    assert (verdict.canonical_id, verdict.stage) == (original["id"], "simhash") and 0.6 <= verdict.score < 1.0
