"""Postgres side: the embedded server, the schema, and idempotent bulk loads.

A load runs in two phases. Executors COPY their partitions into an unlogged
staging table tagged with a load id; then the driver moves the staged rows
into the target in one transaction (DISTINCT ON, then ON CONFLICT). A load
that dies in either phase leaves the target as it was, and running it again
with the same load id starts the staging over. While a load runs, its driver
holds a session advisory lock on its load id; the next load deletes the staged
rows of every load id whose lock nobody holds (failed or killed loads).

A connection or authentication failure is a `PostgresUnavailable` (a
UserError: one line, exit code 2) naming the server without the password.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

import numpy as np
import psycopg
from psycopg import sql
from psycopg.adapt import Dumper
from psycopg.pq import Format

LINK_COLUMNS = ("duplicate_id", "canonical_id", "stage", "score", "linked_at", "run_id",
                "reverted_at", "revert_reason", "via_id")
# Stamped when an incremental run replaces a link (incremental.py); loaded when the links carry them.
SUPERSEDE_COLUMNS = ("superseded_at", "superseded_by_run")

from ..errors import UserError
from . import dsn as dsn_text, failpoints
from ..stages import STAGE_NAMES

if TYPE_CHECKING:
    import pyarrow as pa

    from ..config import Config

_STAGE_LIST = ", ".join(f"'{s}'" for s in STAGE_NAMES)


def guarded(condition: str, ddl: str) -> str:
    """DDL run only when condition holds: a no-op ALTER or CREATE INDEX would still lock the table,
    and every load runs the schema."""
    return f"DO $$ BEGIN IF {condition} THEN {ddl}; END IF; END $$;"


def missing_column(table: str, column: str) -> str:
    return (f"NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '{table}'::regclass "
            f"AND attname = '{column}' AND NOT attisdropped)")


def add_columns_once(table: str, columns: Sequence[tuple[str, str]]) -> str:
    """Add (name, type) columns together, unless the first is already there (then all are)."""
    adds = ", ".join(f"ADD COLUMN {name} {kind}" for name, kind in columns)
    return guarded(missing_column(table, columns[0][0]), f"ALTER TABLE {table} {adds}")


# Stamped by incremental runs (incremental.py).
_SUPERSEDE = (("superseded_at", "timestamptz"), ("superseded_by_run", "text"))
# Added with the clustered stage 3: the neighbour through which a duplicate joined its
# cluster (null for exact stages).
_VIA = (("via_id", "bigint"),)

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
{add_columns_once("duplicate_links", _SUPERSEDE)}
{add_columns_once("duplicate_links", _VIA)}
CREATE INDEX IF NOT EXISTS duplicate_links_canonical_idx ON duplicate_links (canonical_id);
CREATE INDEX IF NOT EXISTS duplicate_links_stage_day_idx ON duplicate_links (stage, linked_at);
CREATE UNLOGGED TABLE IF NOT EXISTS duplicate_links_staging (
    load_id text NOT NULL,
    LIKE duplicate_links
);
{add_columns_once("duplicate_links_staging", _SUPERSEDE)}
{add_columns_once("duplicate_links_staging", _VIA)}
CREATE INDEX IF NOT EXISTS duplicate_links_staging_load_idx ON duplicate_links_staging (load_id);
"""

# Fixed score bins per stage for histograms, in steps of 0.02: simhash scores are the
# shingle-set Jaccard of a duplicate and its canonical, semantic scores are cosines.
SCORE_BIN_WIDTH = {"url": 1.0, "content": 1.0, "simhash": 0.02, "semantic": 0.02}


def score_bin_sql(score: str = "score", stage: str = "stage") -> str:
    """SQL (valid in Postgres and Spark) for the lower edge of a link's score bin.

    Widths are written in exponent form so that Spark reads them as doubles, not decimals.
    """
    width = "CASE " + " ".join(f"WHEN {stage} = '{s}' THEN {w:.17e}" for s, w in SCORE_BIN_WIDTH.items()) + " END"
    # The epsilon keeps exact edges (0.74 = 37 x 0.02) in their own bin despite float rounding.
    return f"(floor({score} / ({width}) + 1e-9) * ({width}))"


VIEWS_SQL = f"""
CREATE OR REPLACE VIEW link_stats_daily AS
SELECT (linked_at AT TIME ZONE 'UTC')::date AS day, stage,
       count(*) FILTER (WHERE reverted_at IS NULL AND superseded_at IS NULL) AS active,
       count(*) FILTER (WHERE reverted_at IS NOT NULL) AS reverted,
       min(score) AS min_score, avg(score) AS avg_score, max(score) AS max_score,
       count(*) FILTER (WHERE reverted_at IS NULL AND superseded_at IS NOT NULL) AS superseded
FROM duplicate_links GROUP BY 1, 2;

CREATE OR REPLACE VIEW link_score_histogram AS
SELECT (linked_at AT TIME ZONE 'UTC')::date AS day, stage, {score_bin_sql()} AS bin_lower,
       count(*) FILTER (WHERE reverted_at IS NULL AND superseded_at IS NULL) AS active,
       count(*) FILTER (WHERE reverted_at IS NOT NULL) AS reverted,
       count(*) FILTER (WHERE reverted_at IS NULL AND superseded_at IS NOT NULL) AS superseded
FROM duplicate_links GROUP BY 1, 2, 3;

-- Each document that takes part in an active link, with its ultimate canonical:
-- active links are followed until a document that is nobody's duplicate. Where a
-- document has several active links (from different runs), the newest wins.
CREATE OR REPLACE VIEW document_canonical AS
WITH RECURSIVE edge AS (
    SELECT DISTINCT ON (duplicate_id) duplicate_id, canonical_id, stage
    FROM duplicate_links WHERE reverted_at IS NULL AND superseded_at IS NULL
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

# Supersede stamps go first: the link that replaces one may only turn active once the old one is not.
# Then links that Delta made active again (an incremental run found them anew) lose their stamp,
# and take the score Delta holds (an incremental run may rescore a link it computes again).
SUPERSEDE_LINKS_SQL = ("""
UPDATE duplicate_links t SET superseded_at = s.superseded_at, superseded_by_run = s.superseded_by_run
FROM duplicate_links_staging s
WHERE s.load_id = %(load_id)s AND s.superseded_at IS NOT NULL AND t.superseded_at IS NULL
  AND (t.duplicate_id, t.canonical_id, t.stage) = (s.duplicate_id, s.canonical_id, s.stage)
""", """
UPDATE duplicate_links t SET superseded_at = NULL, superseded_by_run = NULL, score = s.score
FROM duplicate_links_staging s
WHERE s.load_id = %(load_id)s AND s.superseded_at IS NULL
  AND (t.superseded_at IS NOT NULL OR t.score IS DISTINCT FROM s.score)
  AND (t.duplicate_id, t.canonical_id, t.stage) = (s.duplicate_id, s.canonical_id, s.stage)
""")


MIN_SERVER_VERSION = 140000   # the views use CYCLE (PostgreSQL 14)
# Advisory-lock namespace of running loads (first key of pg_advisory_lock(int, int)): "nd".
LOAD_LOCK_NS = 0x6E64


class PostgresUnavailable(UserError):
    """The server cannot be reached, refuses the role or password, or lacks what the job needs."""


def redact(dsn: str) -> str:
    """The DSN as it may be printed: host, port, user, database; never the password."""
    return dsn_text.describe(dsn)


# psycopg's error as a Spark task failure quotes it (an executor's COPY): its class and first line.
_QUOTED = re.compile(r"psycopg\.(?:errors\.)?(\w+(?:Error|Shutdown|Failure|Failed|Unavailable)\w*): ([^\n]+)")


def describe_failure(exc: BaseException) -> str | None:
    """One line for a server that went away under a command (killed, stopped, restarted, a lock
    timeout): psycopg's OperationalError in the driver, or in an executor's COPY, which reaches the
    driver as a Spark failure quoting it. None for anything else."""
    if isinstance(exc, psycopg.OperationalError):
        return f"Postgres: {one_line(exc)}"
    if isinstance(exc, psycopg.Error):
        return None
    m = _QUOTED.search(str(exc))
    if m is None or not hasattr(exc, "java_exception") and type(exc).__module__.split(".")[0] != "pyspark":
        return None
    return f"Postgres: {' '.join(m.group(2).split())} ({m.group(1)}, in a Spark task)"


_DENIED_IN_TASK = re.compile(r"psycopg\.errors\.InsufficientPrivilege: ([^\n]+)")


def describe_denied(exc: BaseException) -> str | None:
    """One line for a right the server refused the role, raised in the driver or quoted by a Spark
    task's failure (an executor's COPY). None for anything else."""
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        denied = exc.diag.message_primary or str(exc).splitlines()[0]
    else:
        found = _DENIED_IN_TASK.search(str(exc))
        if found is None:
            return None
        denied = found.group(1).strip()
    return (f"Postgres: {denied}: the role lacks a right this command needs "
            "(docs/postgres-roles.md lists each command's rights)")


def one_line(exc: BaseException) -> str:
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def embedded_dsn(pgdata: str | Path, listen: str | None = None, settings: dict | None = None) -> str:
    """Start (or reuse) the embedded PostgreSQL 18 + pgvector in pgdata and return its DSN (password included).

    The server is left running after this process exits, so the DSN stays usable
    from psql, notebooks and, with `postgres.listen`, executors on other machines. settings: server
    settings a server started here gets (postgres.embedded_settings).
    """
    from . import pg_embedded

    try:
        return pg_embedded.start(pgdata, listen, settings)
    except Exception as exc:  # noqa: BLE001 - initdb/pg_ctl failures, a busy port: all need a person
        raise PostgresUnavailable(f"the embedded Postgres in {pgdata} did not start: {one_line(exc)[:500]} "
                                  f"(its log: {Path(pgdata) / 'log'})") from None


def embedded_pgdata(conf: "Config", output: str | Path | None, dsn: str | None = None) -> Path | None:
    """The embedded server's data directory when no DSN is given anywhere, else None."""
    if dsn or os.environ.get("NEWSDEDUP_PG_DSN") or conf.postgres.dsn:
        return None
    from . import paths

    # The embedded server needs a local directory: an output on object storage has none to lend.
    local = output is not None and paths.is_local(str(output))
    pgdata = conf.postgres.embedded_dir or (Path(paths.local_path(str(output))) / "pgdata" if local else None)
    if pgdata is None:
        raise ValueError("no Postgres DSN given and no local output directory for the embedded server "
                         "(give --pg, NEWSDEDUP_PG_DSN or postgres.embedded_dir)")
    return Path(pgdata)


def resolve_dsn(conf: "Config", output: str | Path | None, dsn: str | None = None) -> str:
    pgdata = embedded_pgdata(conf, output, dsn)
    if pgdata is None:
        resolved = dsn or os.environ.get("NEWSDEDUP_PG_DSN") or conf.postgres.dsn
    else:
        resolved = embedded_dsn(pgdata, conf.postgres.listen, conf.postgres.embedded_settings)
    dsn_text.remember(resolved)
    return with_schema(resolved, conf.postgres.schema)


# What with_schema adds to a DSN's options; schema_of reads it back.
_SEARCH_PATH = "-c search_path={},public"


def with_schema(dsn: str, schema: str | None) -> str:
    """dsn whose sessions find (and create) newsdedup's tables in schema: its search_path, set at
    connection time, so every connection (the executors' COPY too) uses it. public stays on the
    path for pgvector's type. schema is a validated identifier (config.IDENTIFIER), quoted here."""
    if not schema or schema_of(dsn) == schema:   # resolved twice (job._load_postgres): once is enough
        return dsn
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    quoted = '"' + schema.replace('"', '""') + '"'
    info["options"] = " ".join(filter(None, [info.get("options"), _SEARCH_PATH.format(quoted)]))
    return psycopg.conninfo.make_conninfo(**info)


def schema_of(dsn: str) -> str | None:
    """The schema with_schema put into dsn; None when it put none."""
    try:
        options = psycopg.conninfo.conninfo_to_dict(dsn).get("options") or ""
    except psycopg.Error:
        return None
    m = re.search(r'-c search_path="((?:[^"]|"")+)",public\b', options)
    return m.group(1).replace('""', '"') if m else None


def create_schema_sql(schema: str) -> sql.Composed:
    return sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))


def ensure_namespace(conn: psycopg.Connection, dsn: str) -> None:
    """The configured schema, created when missing. Otherwise nothing is run: CREATE SCHEMA IF NOT
    EXISTS still needs CREATE on the database, which a loader that owns only its schema lacks. A
    missing schema on the search_path would quietly put the tables into public."""
    schema = schema_of(dsn)
    if schema and conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None:
        conn.execute(create_schema_sql(schema))


def connect(dsn: str, autocommit: bool = False) -> psycopg.Connection:
    dsn_text.remember(dsn)
    try:
        return psycopg.connect(dsn, autocommit=autocommit)
    except (psycopg.OperationalError, psycopg.ProgrammingError) as exc:
        raise PostgresUnavailable(
            f"cannot connect to Postgres ({redact(dsn)}): {connect_failure(dsn, one_line(exc))}. Check the DSN "
            "(--pg, NEWSDEDUP_PG_DSN or postgres.dsn), that the server runs and that it accepts this role and password"
        ) from None


def connect_failure(dsn: str, message: str) -> str:
    """psycopg's message on a failed connection as it may be shown: it can quote the DSN, and with it
    the password (an invalid percent-encoding, a password with a space read as the next keyword)."""
    if dsn_text.has_unencoded_delimiter(dsn):
        return "the password holds an unencoded '@' or '/' (write them as %40 and %2F)"
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return ("the DSN is not valid: " + dsn_text.unparseable_reason(dsn_text.mask(message, dsn_text.passwords_in(dsn)))
                + " (in key=value form quote a password with spaces: password='...'; in a URI percent-encode it)")
    return dsn_text.mask(message, dsn_text.passwords_in(dsn))


LOADER_RIGHTS_SQL = """
SELECT current_user,
       coalesce(s.nspname, %(schema)s) AS schema,
       s.oid IS NOT NULL AS schema_exists,
       CASE WHEN s.oid IS NULL THEN has_database_privilege(current_database(), 'CREATE')
            ELSE has_schema_privilege(s.oid, 'CREATE') END AS may_create,
       (SELECT array_agg(c.relname || ':' || pg_get_userbyid(c.relowner) ORDER BY c.relname)
          FROM pg_class c
         WHERE c.relnamespace = s.oid AND c.relname = ANY(%(tables)s)
           AND NOT pg_has_role(current_user, c.relowner, 'USAGE')) AS not_owned
  FROM (SELECT 1) one
  LEFT JOIN pg_namespace s ON s.nspname = coalesce(%(schema)s, current_schema())
"""
# The objects a load creates, alters (ALTER needs ownership) or replaces.
LOADER_OWNS = ("documents", "duplicate_links", "link_stats_daily", "link_score_histogram")


def loader_refusal(conn: psycopg.Connection, dsn: str) -> str | None:
    """Why the connected role cannot do a loader's work in the DSN's schema (create its tables, alter
    them on an upgrade, replace the views), or None when it can. Reads the catalogue only, so it is
    asked before any computation: a lookup role given to `run` fails in a second, not after the job."""
    role, schema, exists, may_create, not_owned = conn.execute(
        LOADER_RIGHTS_SQL, {"schema": schema_of(dsn), "tables": list(LOADER_OWNS)}).fetchone()
    if not may_create:
        where = f"schema {schema}" if exists else f"the database (schema {schema} does not exist yet)"
        return f"role {role!r} may not create in {where}"
    if not_owned:
        named = ", ".join(f"{t.split(':')[0]} (owner {t.split(':')[1]!r})" for t in not_owned)
        return f"role {role!r} does not own {named}"
    return None


def check_dsn(dsn: str, need_vector: bool = False, loader: bool = False) -> str:
    """Connect once before any computation: server version, for stage 4 pgvector, and with loader the
    rights a load needs (loader_refusal). Returns the version."""
    with connect(dsn, autocommit=True) as conn:
        version = int(conn.execute("SHOW server_version_num").fetchone()[0])
        if version < MIN_SERVER_VERSION:
            raise PostgresUnavailable(f"Postgres ({redact(dsn)}) is version {version // 10000}; "
                                      f"newsdedup needs {MIN_SERVER_VERSION // 10000} or later")
        if need_vector and not conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
            raise PostgresUnavailable(f"Postgres ({redact(dsn)}) has no pgvector extension, which stage 4 "
                                      "(semantic.enabled) needs: install pgvector or use the embedded server")
        if loader:
            why = loader_refusal(conn, dsn)
            if why:
                raise PostgresUnavailable(
                    f"Postgres ({redact(dsn)}): {why}; run, load and revert need the loader role, which owns "
                    "newsdedup's schema and tables (docs/postgres-roles.md)")
    return f"{version // 10000}.{version % 10000}"


def clean_stale_staging(conn: psycopg.Connection, table: str, current: str) -> int:
    """Delete the staged rows of loads that are not running (no session holds their advisory lock)."""
    stale = 0
    for (load_id,) in conn.execute(sql.SQL("SELECT DISTINCT load_id FROM {} WHERE load_id <> %s").format(
            sql.Identifier(table)), (current,)).fetchall():
        if conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (LOAD_LOCK_NS, load_id)).fetchone()[0]:
            try:
                stale += conn.execute(sql.SQL("DELETE FROM {} WHERE load_id = %s").format(sql.Identifier(table)),
                                      (load_id,)).rowcount
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (LOAD_LOCK_NS, load_id))
    return stale


def hold_load_lock(dsn: str, load_id: str) -> psycopg.Connection:
    """A connection holding the advisory lock of a running load; closing it (or dying) releases it."""
    guard = connect(dsn, autocommit=True)
    guard.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (LOAD_LOCK_NS, load_id))
    return guard


def ensure_schema(dsn: str) -> None:
    with connect(dsn) as conn:
        ensure_namespace(conn, dsn)
        conn.execute(SCHEMA_SQL)
        conn.execute(VIEWS_SQL)


# Postgres text cannot hold U+0000 (psycopg refuses the whole COPY or INSERT): a NUL in a title,
# URL or source is written to Postgres as U+FFFD. The Delta tables keep the text as it came.
NUL_SUBSTITUTE = "\ufffd"


def pg_text(value: Any) -> Any:
    """value as a Postgres text column can hold it (NUL replaced); anything else as it is."""
    return value.replace("\x00", NUL_SUBSTITUTE) if isinstance(value, str) and "\x00" in value else value


def bigint_array(values: Iterable[int]) -> str:
    """A list of integers as the text of a Postgres array literal, for a parameter cast ::bigint[] or ::int[].
    psycopg dumps a Python list element by element (14 ms for the ~5,000 bucket codes of one bulk
    round of check, measured); joined here, the server parses it in C (0.6 ms). Integers only:
    their text needs no quoting."""
    return "{" + ",".join(map(str, map(int, values))) + "}"


# ---------------------------------------------------------------- the executors' COPY

# Binary COPY: each value goes in its column's own wire format, so the server parses no text (205,971
# documents rows of a 1M load: COPY text from Spark rows 21.0-24.4 s, binary from Arrow batches 8.6-9.6 s).
# A value's format follows the staging column's type (column_types), not its Python type; two types
# need a dumper of their own: jsonb, whose psycopg dumper would encode the job's JSON text as a JSON
# string, and pgvector's vector, which psycopg does not know.

class JsonTextBinaryDumper(Dumper):
    """jsonb in the binary format (version 1, then the text) from JSON text, used as it is."""

    format = Format.BINARY
    oid = psycopg.postgres.types["jsonb"].oid

    def dump(self, obj: str) -> bytes:
        return b"\x01" + obj.encode()


class VectorBinaryDumper(Dumper):
    """pgvector's binary format (dimension, a zero, big-endian float4 values) from a list of floats.
    Bound to the database's vector oid (an extension type has none fixed) by vector_dumper."""

    format = Format.BINARY

    def dump(self, obj: Sequence[float]) -> bytes:
        return struct.pack("!hh", len(obj), 0) + np.asarray(obj, ">f4").tobytes()


def vector_dumper(oid: int) -> type[Dumper]:
    return type("BoundVectorBinaryDumper", (VectorBinaryDumper,), {"oid": oid})


def column_types(conn: psycopg.Connection, table: str, columns: Sequence[str]) -> dict[str, tuple[int, str]]:
    """Each of columns' type in table: (oid, the type's own name without its schema), from the catalog."""
    rows = conn.execute(
        "SELECT a.attname, a.atttypid::int, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped", (table,)).fetchall()
    found = {name: (oid, type_name) for name, oid, type_name in rows}
    missing = [c for c in columns if c not in found]
    if missing:
        raise ValueError(f"{table} has no column {', '.join(missing)}")
    return {c: found[c] for c in columns}


def copy_batches(conn: psycopg.Connection, table: str, columns: Sequence[str], types: dict[str, tuple[int, str]],
                 batches: Iterable["pa.RecordBatch"], prefix: Sequence[Any] = ()) -> int:
    """COPY the rows of the Arrow batches into table in the binary format; returns the row count.
    columns: table's columns to fill, the first len(prefix) from prefix on every row, the others
    from the batches' columns of those names; types: column_types of table for columns."""
    for oid, type_name in types.values():
        if type_name == "vector":
            conn.adapters.register_dumper(None, vector_dumper(oid))
    conn.adapters.register_dumper(None, JsonTextBinaryDumper)
    n = 0
    body = columns[len(prefix):]
    with conn.cursor() as cur:
        stmt = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
            sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns)))
        with cur.copy(stmt) as cp:
            cp.set_types([types[c][0] for c in columns])
            for batch in batches:
                values = [batch.column(c).to_pylist() for c in body]
                for row in zip(*values):
                    cp.write_row((*prefix, *row))
                n += batch.num_rows
    return n


def stage_dataframe(df, dsn: str, table: str, columns: Sequence[str], load_id: str) -> int:
    """COPY a Spark DataFrame into a staging table from the executors, partition by partition, as
    Arrow batches in the binary format (copy_batches); returns the row count."""
    from pyspark.sql import functions as F

    cols = list(columns)
    spark_types = dict(df.dtypes)
    with connect(dsn) as conn:
        types = column_types(conn, table, ["load_id", *cols])

    def load(batches: Iterator["pa.RecordBatch"]) -> Iterator["pa.RecordBatch"]:
        import pyarrow as pa

        with connect(dsn) as conn:
            n = copy_batches(conn, table, ["load_id", *cols], types, batches, prefix=(load_id,))
        yield pa.record_batch({"n": pa.array([n], pa.int64())})

    # NULs replaced in Spark, not per value in the COPY loop (see pg_text).
    select = [F.regexp_replace(c, "\\x00", NUL_SUBSTITUTE).alias(c) if spark_types[c] == "string" else F.col(c)
              for c in cols]
    counts = df.select(*select).mapInArrow(load, "n long").collect()
    staged = int(sum(r["n"] for r in counts))
    failpoints.pause(f"staged:{table}")   # staged, nothing merged: where tests/test_faults.py strikes
    return staged


def load_links(links_df, dsn: str, load_id: str) -> dict[str, int]:
    """Idempotently load a DataFrame of links; returns staged, inserted and skipped counts."""
    ensure_schema(dsn)
    if "via_id" not in links_df.columns:   # links written before via_id existed
        from pyspark.sql import functions as F
        links_df = links_df.withColumn("via_id", F.lit(None).cast("long"))
    with hold_load_lock(dsn, load_id) as guard:
        stale = clean_stale_staging(guard, "duplicate_links_staging", load_id)
        # A retried load starts its staging from scratch.
        guard.execute("DELETE FROM duplicate_links_staging WHERE load_id = %s", (load_id,))
        columns = LINK_COLUMNS + tuple(c for c in SUPERSEDE_COLUMNS if c in links_df.columns)
        staged = stage_dataframe(links_df, dsn, "duplicate_links_staging", columns, load_id)
        cols = sql.SQL(", ").join(map(sql.Identifier, columns))
        with connect(dsn) as conn:
            with conn.transaction():
                before = conn.execute("SELECT count(*) FROM duplicate_links").fetchone()[0]
                if len(columns) > len(LINK_COLUMNS):
                    for stmt in SUPERSEDE_LINKS_SQL:
                        conn.execute(stmt, {"load_id": load_id})
                conn.execute(sql.SQL(MERGE_LINKS_SQL).format(cols=cols), {"load_id": load_id})
                after = conn.execute("SELECT count(*) FROM duplicate_links").fetchone()[0]
                conn.execute("DELETE FROM duplicate_links_staging WHERE load_id = %s", (load_id,))
    result = {"staged": staged, "inserted": after - before, "skipped": staged - (after - before)}
    if stale:
        result["stale_staging_removed"] = stale
    return result
