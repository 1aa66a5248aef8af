"""Embeddings in real PostgreSQL 18 + pgvector: HNSW index, the seed query, idempotent and version-safe loads."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import psycopg
import pytest

from newsdedup.stages.semantic import embeddings as emb
from newsdedup.io import pg_vectors as pv

from semantic_data import SEM_CONF, VERSION, text

ISSUE_SEED_QUERY = ("SELECT id, 1 - (embedding <=> $1) AS similarity FROM documents WHERE published_at > "
                    "now() - interval '48 hours' ORDER BY embedding <=> $1 LIMIT 10")
ROWS = [(11, 1, "metro_a"), (12, 2, "derby"), (13, 3, "flood"), (14, 72, "metro_b")]  # id, hours ago, article


@pytest.fixture(scope="module")
def vectors():
    model = emb.model_for(SEM_CONF)
    keys = [k for _, _, k in ROWS] + ["metro_b"]
    return dict(zip(keys, emb.encode(model, [text(k) for k in keys])))


def frame(spark, vectors, version=VERSION, rows=ROWS):
    now = datetime.now(timezone.utc)
    data = [(i, now - timedelta(hours=h), "en", "outlet", key, f"https://x/{i}", version,
             [float(x) for x in vectors[key]]) for i, h, key in rows]
    return spark.createDataFrame(data, "id long, published_at timestamp, lang string, source string, title string, "
                                       "canonical_url string, model_version string, embedding array<float>")


def test_nearest_returns_what_the_issues_seed_query_returns(spark, pg_dsn, vectors):
    """The issue's query text, run as written (server-side $1), against what pv.nearest answers."""
    pv.load_documents(frame(spark, vectors), pg_dsn, "load-1")
    with psycopg.RawCursor(psycopg.connect(pg_dsn)) as cur:
        issue = [(int(i), float(s)) for i, s in
                 cur.execute(ISSUE_SEED_QUERY, [pv.vector_literal(vectors["metro_b"])]).fetchall()]
        cur.connection.close()
    assert sorted(i for i, _ in issue) == [11, 12, 13] and issue[0][0] == 11   # 14: 72 hours old
    got = pv.nearest(pg_dsn, vectors["metro_b"], VERSION)
    assert [i for i, _ in got] == [i for i, _ in issue]
    assert [s for _, s in got] == pytest.approx([s for _, s in issue], abs=1e-6)


def test_seed_query_returns_the_nearest_recent_document(spark, pg_dsn, vectors):
    loaded = pv.load_documents(frame(spark, vectors), pg_dsn, "load-1")
    assert loaded == {"staged": 4, "inserted": 4, "updated": 0, "model_version": VERSION}
    hits = pv.nearest(pg_dsn, vectors["metro_b"], VERSION)
    # 14 is metro_b itself (similarity 1) but 72 hours old: outside the seed query's window.
    assert hits[0][0] == 11 and 14 not in {i for i, _ in hits}
    assert hits[0][1] == pytest.approx(float(vectors["metro_a"] @ vectors["metro_b"]), abs=1e-4)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


def test_hnsw_cosine_index_exists_and_serves_the_seed_query(spark, pg_dsn, vectors):
    pv.load_documents(frame(spark, vectors), pg_dsn, "load-1")
    with psycopg.connect(pg_dsn) as c:
        (indexdef,) = c.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", (pv.INDEX_NAME,)).fetchone()
        typ = c.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                        "WHERE attrelid = 'documents'::regclass AND attname = 'embedding'").fetchone()[0]
    assert "USING hnsw" in indexdef and "vector_cosine_ops" in indexdef
    assert typ == "vector(384)"
    assert pv.INDEX_NAME in pv.seed_query_plan(pg_dsn, vectors["metro_b"])


def test_reloading_is_idempotent(spark, pg_dsn, vectors):
    pv.load_documents(frame(spark, vectors), pg_dsn, "load-1")
    again = pv.load_documents(frame(spark, vectors), pg_dsn, "load-1")
    assert again["inserted"] == 0 and again["updated"] == 4
    with psycopg.connect(pg_dsn) as c:
        assert c.execute("SELECT count(*) FROM documents").fetchone()[0] == 4
        assert c.execute("SELECT count(*) FROM documents_staging").fetchone()[0] == 0


def test_another_model_version_is_refused(spark, pg_dsn, vectors):
    pv.load_documents(frame(spark, vectors), pg_dsn, "load-1")
    with pytest.raises(emb.ModelVersionMismatch, match="refusing to add 'other@2'"):
        pv.load_documents(frame(spark, vectors, version="other@2", rows=ROWS[:1]), pg_dsn, "load-2")
    with pytest.raises(emb.ModelVersionMismatch, match="query vector is 'other@2'"):
        pv.nearest(pg_dsn, vectors["metro_b"], "other@2")
    short = {k: np.asarray(v[:8]) for k, v in vectors.items()}
    with pytest.raises(emb.ModelVersionMismatch, match="vector\\(384\\)"):
        pv.load_documents(frame(spark, short, rows=ROWS[:1]), pg_dsn, "load-3")
    with psycopg.connect(pg_dsn) as c:
        assert c.execute("SELECT DISTINCT model_version FROM documents").fetchall() == [(VERSION,)]


def test_job_with_stage_4_writes_links_vectors_and_postgres(spark, conf, pg_dsn, tmp_path):
    """The whole job with semantic.enabled: stage 4 links, Delta embeddings, Postgres documents."""
    from newsdedup import job
    from newsdedup.io import store

    from semantic_data import ARTICLES, SEM, T0

    def raw(i, key, url, hours):
        title, body = ARTICLES[key]
        return (i, url, title, body, T0 + timedelta(hours=hours), url.split("/")[2], "en")

    rows = [raw(1, "metro_a", "https://dailystar.example/metro", 0),
            raw(2, "metro_a", "https://dailystar.example/metro?utm_source=fb", 1),   # stage 1
            raw(3, "metro_b", "https://bdnews24.example/dhaka-metro", 4),           # stage 4
            raw(4, "derby", "https://bdnews24.example/derby", 2),
            raw(5, "other_game", "https://dailystar.example/kings", 20)]
    path = str(tmp_path / "in.parquet")
    spark.createDataFrame(rows, "id long, url string, title string, body string, published_at timestamp, "
                                "source string, lang string").write.parquet(path)
    out = str(tmp_path / "out")
    report = job.run(spark, path, out, conf.with_overrides({"semantic": SEM}), dsn=pg_dsn)
    links = {(r.duplicate_id, r.canonical_id, r.stage) for r in store.read(spark, out, "duplicate_links").collect()}
    assert links == {(2, 1, "url"), (3, 1, "semantic")}
    assert report.counts["links.semantic"] == 1 and report.counts["semantic.embedded"] == 4
    # Every document reaches Postgres documents (pg_documents); the 4 that stage 4 embedded carry vectors.
    assert report.counts["postgres.documents.inserted"] == 5 and report.counts["postgres.documents.vectors"] == 4
    with psycopg.connect(pg_dsn) as c:
        assert c.execute("SELECT stage FROM duplicate_links WHERE duplicate_id = 3").fetchone() == ("semantic",)
        assert c.execute("SELECT count(*), min(model_version) FROM documents "
                         "WHERE embedding IS NOT NULL").fetchone() == (4, VERSION)
