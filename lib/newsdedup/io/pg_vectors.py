"""Embeddings in Postgres (pgvector): vectors into `documents`, its HNSW index, the seed query.

The documents table itself (every stage's keys and the vector columns) is
pg_documents'; this module loads vectors alone and runs the seed query.

Loads follow pg.py: executors COPY into an unlogged staging table under a load
id, then one transaction upserts the staged rows. The table holds one
model_version at a time; a load of another version is refused, because the
seed query would otherwise rank vectors of different models against each other.
"""

from __future__ import annotations

from typing import Any, Sequence

from psycopg import sql
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from . import pg, pg_documents
from ..stages.semantic.embeddings import ModelVersionMismatch, require_same_version, vector_literal

DOCUMENT_COLUMNS = ("id", "published_at", "lang", "source", "title", "canonical_url", "model_version", "embedding")
INDEX_NAME = pg_documents.HNSW_INDEX

# The query the product runs; $1 is the query vector (same model_version as the table).
SEED_QUERY = ("SELECT id, 1 - (embedding <=> $1) AS similarity FROM documents "
              "WHERE published_at > now() - interval '48 hours' ORDER BY embedding <=> $1 LIMIT 10")

MERGE_SQL = """
INSERT INTO documents ({cols})
SELECT DISTINCT ON (id) {cols} FROM documents_staging WHERE load_id = %(load_id)s ORDER BY id
ON CONFLICT (id) DO UPDATE SET {updates}
"""


def ensure_schema(dsn: str, dim: int) -> None:
    """The unified documents table (pg_documents) with embedding typed vector(dim) and its HNSW index."""
    pg_documents.ensure_schema(dsn, dim)


table_version = pg_documents.table_version


def load_documents(df: DataFrame, dsn: str, load_id: str) -> dict[str, Any]:
    """Idempotently upsert documents with embeddings (DOCUMENT_COLUMNS, embedding array<float>).

    Refuses a DataFrame mixing model versions, and a version other than the one
    already in the table. Returns staged/inserted/updated counts.
    """
    versions = [r[0] for r in df.select("model_version").distinct().limit(5).collect()]
    if not versions:
        return {"staged": 0, "inserted": 0, "updated": 0, "model_version": None}
    version = require_same_version(versions, "rows to load")
    dims = [r[0] for r in df.select(F.size("embedding")).distinct().limit(5).collect()]
    if len(dims) != 1:
        raise ValueError(f"embeddings of one model_version with different dimensions {sorted(dims)}")
    ensure_schema(dsn, int(dims[0]))
    with pg.hold_load_lock(dsn, load_id) as guard:   # failed loads' staging goes, running ones' stays
        pg.clean_stale_staging(guard, "documents_staging", load_id)
        with pg.connect(dsn) as conn:
            current = table_version(conn)
            if current is not None and current != version:
                raise ModelVersionMismatch(
                    f"Postgres documents hold model_version {current!r}, refusing to add {version!r}: "
                    "the seed query would compare vectors of different models")
            conn.execute("DELETE FROM documents_staging WHERE load_id = %s", (load_id,))
        staged = pg.stage_dataframe(df, dsn, "documents_staging", DOCUMENT_COLUMNS, load_id)
        cols = sql.SQL(", ").join(map(sql.Identifier, DOCUMENT_COLUMNS))
        updates = sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c))
                                     for c in DOCUMENT_COLUMNS if c != "id")
        with pg.connect(dsn) as conn:
            with conn.transaction():
                conn.execute("LOCK TABLE documents IN SHARE ROW EXCLUSIVE MODE")
                current = table_version(conn)  # again, under the lock: a concurrent load may have won
                if current is not None and current != version:
                    raise ModelVersionMismatch(f"Postgres documents switched to {current!r} during the load of {version!r}")
                before = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
                conn.execute(sql.SQL(MERGE_SQL).format(cols=cols, updates=updates), {"load_id": load_id})
                after = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
                conn.execute("DELETE FROM documents_staging WHERE load_id = %s", (load_id,))
    return {"staged": staged, "inserted": after - before, "updated": staged - (after - before),
            "model_version": version}


def _execute(verb: str, query_vector: Sequence[float]) -> sql.Composed:
    # EXECUTE is a utility statement: its argument must be a literal, not a bound parameter.
    return sql.SQL(verb + " seed_query({})").format(sql.Literal(vector_literal(query_vector)))


def nearest(dsn: str, query_vector: Sequence[float], model_version: str) -> list[tuple[int, float]]:
    """Run SEED_QUERY (as written, through PREPARE) for a vector of model_version."""
    with pg.connect(dsn) as conn:
        current = table_version(conn)
        if current is not None and current != model_version:
            raise ModelVersionMismatch(
                f"query vector is {model_version!r} but Postgres documents hold {current!r}")
        conn.execute(f"PREPARE seed_query(vector) AS {SEED_QUERY}")
        rows = conn.execute(_execute("EXECUTE", query_vector)).fetchall()
        return [(int(i), float(s)) for i, s in rows]


def seed_query_plan(dsn: str, query_vector: Sequence[float]) -> str:
    """EXPLAIN of SEED_QUERY with sequential and bitmap scans discouraged (shows whether the HNSW index
    can serve it: on a tiny table a bitmap scan of published_at plus a sort costs less)."""
    with pg.connect(dsn) as conn:
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        conn.execute(f"PREPARE seed_query(vector) AS {SEED_QUERY}")
        rows = conn.execute(_execute("EXPLAIN EXECUTE", query_vector)).fetchall()
        return "\n".join(r[0] for r in rows)
