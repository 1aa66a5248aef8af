"""The Postgres `documents` table: what every stage's live lookup reads (`newsdedup check`).

`documents` holds, per document: the URL and content hashes (stages 1 and 2);
stage 3's simhash_w, mh_bands and the columns stages.simhash.live computes
(sim_buckets under a GIN index, the shingle set as bytes, numbers and names);
published_at and lang; and, when stage 4 runs, the embedding with its
model_version under an HNSW cosine index and the facts its evidence rule reads.
The seed's simhash and band_<i> columns stay (nothing reads them any more; their
indexes are dropped by the schema upgrade). `duplicate_links` (io/pg.py) gets foreign keys to it and a
partial unique index: at most one active (not reverted, not superseded) link
per duplicate.

url_hash is unique. Stage 1 links every document sharing a normalised URL to
the earliest of them, so several documents do share a hash: only that earliest
document (the group's stage-1 canonical) carries url_hash here, the others
have NULL (their own hash stays in the Delta documents table and is
recomputable from `url` with stages.url.UrlKeys). The seed's lookup
`SELECT id FROM documents WHERE url_hash = $1` therefore returns the document a
new copy of that URL must link to.

Loads follow pg.py: executors COPY into the unlogged documents_staging under a
load id, then one transaction moves the rows. Into an empty table (the
backfill) the secondary indexes are dropped and built after the rows are in;
into a filled table rows are upserted with the indexes in place. DDL is
transactional in Postgres, so a load that fails leaves the previous state.
A slice's load (load_slice) stages the rows the run wrote as the job holds them,
and of the other stored documents of their URL groups sets only url_hash: no
stored text is read again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import pg, store
from .. import config
from .input import order_date
from ..stages.semantic.embeddings import ModelVersionMismatch, document_text
from ..stages.semantic.live import facts_json
from ..stages.simhash import live as simhash_live

if TYPE_CHECKING:
    from pyspark import Accumulator

    from ..config import Config

KEY_COLUMNS = ("id", "url", "canonical_url", "url_hash", "content_hash", "simhash",
               "band_0", "band_1", "band_2", "band_3", "published_at", "lang", "source", "title", "run_id",
               "simhash_w", "mh_bands")
# Computed for Postgres by the stages' live modules (not in the Delta documents table).
LIVE_COLUMNS = simhash_live.STORED + ("facts",)
VECTOR_COLUMNS = ("model_version", "embedding")
COLUMNS = KEY_COLUMNS + LIVE_COLUMNS + VECTOR_COLUMNS
_TYPES = {"id": "bigint", "simhash": "bigint", "published_at": "timestamptz", "embedding": "vector",
          **{f"band_{i}": "integer" for i in range(4)},
          "simhash_w": "bigint", "mh_bands": "bigint[]", "sim_buckets": "bigint[]", "shingles": "bytea",
          "nums": "text[]", "names": "text[]", "facts": "jsonb"}

HNSW_INDEX = "documents_embedding_hnsw"
# Built after a bulk load (CREATE INDEX over the filled table is much faster than row-wise upkeep).
SECONDARY_INDEXES = {
    "documents_url_hash_key": "CREATE UNIQUE INDEX IF NOT EXISTS documents_url_hash_key ON documents (url_hash)",
    "documents_content_hash_idx": "CREATE INDEX IF NOT EXISTS documents_content_hash_idx ON documents (content_hash)",
    # fastupdate off: `check --insert` would otherwise queue its rows in the GIN pending list, which
    # every stage-3 lookup then scans linearly until a vacuum (measured at 1M documents after 2,000
    # inserts: 2,000 bulk lookups/s fell to 312/s).
    "documents_sim_buckets_gin": "CREATE INDEX IF NOT EXISTS documents_sim_buckets_gin ON documents "
                                 "USING gin (sim_buckets) WITH (fastupdate = off)",
    "documents_published_at_idx": "CREATE INDEX IF NOT EXISTS documents_published_at_idx ON documents (published_at)",
}
OLD_INDEXES = tuple(f"documents_band_{i}_idx" for i in range(4))
HNSW_SQL = f"CREATE INDEX IF NOT EXISTS {HNSW_INDEX} ON documents USING hnsw (embedding vector_cosine_ops)"

ACTIVE = "reverted_at IS NULL AND superseded_at IS NULL"
LINK_CONSTRAINTS_SQL = f"""
DO $$ BEGIN
    IF to_regclass('duplicate_links_one_active') IS NULL THEN
        CREATE UNIQUE INDEX duplicate_links_one_active ON duplicate_links (duplicate_id) WHERE {ACTIVE};
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'duplicate_links_duplicate_fk'
                   AND conrelid = to_regclass('duplicate_links')) THEN
        ALTER TABLE duplicate_links ADD CONSTRAINT duplicate_links_duplicate_fk
            FOREIGN KEY (duplicate_id) REFERENCES documents (id);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'duplicate_links_canonical_fk'
                   AND conrelid = to_regclass('duplicate_links')) THEN
        ALTER TABLE duplicate_links ADD CONSTRAINT duplicate_links_canonical_fk
            FOREIGN KEY (canonical_id) REFERENCES documents (id);
    END IF;
END $$;
"""


# `check --insert`'s claims (ops/check.py): a writer inserts the keys its articles can match on before
# it looks them up, and deletes them before it commits; a second writer inserting one of those keys
# waits on the unique index until the first has committed. Rows never outlive their transaction, so
# the table stays empty between batches; unlogged, since a claim means nothing after a crash.
CLAIMS_TABLE = "check_claims"
CLAIMS_SQL = f"CREATE UNLOGGED TABLE IF NOT EXISTS {CLAIMS_TABLE} (key bigint PRIMARY KEY);"


def _missing_index(name: str) -> str:
    return f"to_regclass('{name}') IS NULL"


def _columns_sql(table: str) -> str:
    # Also upgrades the vectors-only documents table of earlier versions (NOT NULL vector columns).
    parts = [pg.add_columns_once(table, [(c, _TYPES.get(c, "text"))]) for c in COLUMNS if c != "id"]
    parts += [pg.guarded(f"EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '{table}'::regclass "
                       f"AND attname = '{c}' AND attnotnull)", f"ALTER TABLE {table} ALTER COLUMN {c} DROP NOT NULL")
              for c in VECTOR_COLUMNS]
    return "\n".join(parts)


def schema_sql() -> str:
    return "\n".join([
        "CREATE EXTENSION IF NOT EXISTS vector;",
        "CREATE TABLE IF NOT EXISTS documents (id bigint PRIMARY KEY);",
        _columns_sql("documents"),
        "CREATE UNLOGGED TABLE IF NOT EXISTS documents_staging (load_id text NOT NULL, id bigint);",
        CLAIMS_SQL,
        _columns_sql("documents_staging"),
        pg.guarded(_missing_index("documents_staging_load_idx"),
                 "CREATE INDEX documents_staging_load_idx ON documents_staging (load_id)"),
        *[pg.guarded(_missing_index(name), ddl) for name, ddl in SECONDARY_INDEXES.items()],
        # A GIN index built before fastupdate was turned off: off, and its pending rows moved in.
        pg.guarded("EXISTS (SELECT 1 FROM pg_class WHERE oid = to_regclass('documents_sim_buckets_gin') AND "
                   "(reloptions IS NULL OR NOT 'fastupdate=off' = ANY(reloptions)))",
                   "ALTER INDEX documents_sim_buckets_gin SET (fastupdate = off); "
                   "PERFORM gin_clean_pending_list('documents_sim_buckets_gin')"),
        # The seed's band indexes served the old stage-3 lookup; nothing reads them now.
        *[pg.guarded(f"to_regclass('{name}') IS NOT NULL", f"DROP INDEX {name}") for name in OLD_INDEXES],
    ])


def table_dim(conn) -> int | None:
    """Dimension of documents.embedding; None while it is untyped (no vectors loaded yet) or absent."""
    row = conn.execute("SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('documents') "
                       "AND attname = 'embedding'").fetchone()
    return int(row[0]) if row and row[0] > 0 else None


def table_version(conn) -> str | None:
    row = conn.execute("SELECT model_version FROM documents WHERE model_version IS NOT NULL LIMIT 1").fetchone()
    return row[0] if row else None


def fix_dim(conn, dim: int) -> None:
    """Type documents.embedding as vector(dim) (HNSW needs a dimension); refuse another dimension."""
    if dim <= 0:
        raise ValueError(f"embedding dimension {dim}: must be positive")
    existing = table_dim(conn)
    if existing is not None and existing != dim:
        raise ModelVersionMismatch(
            f"Postgres documents.embedding is vector({existing}) but the vectors to load have {dim} "
            "dimensions: they come from another model; load them into a fresh table or database")
    if existing is None:
        conn.execute(f"ALTER TABLE documents ALTER COLUMN embedding TYPE vector({int(dim)})")
    conn.execute(pg.guarded(_missing_index(HNSW_INDEX), HNSW_SQL))


def ensure_schema(dsn: str, dim: int | None = None) -> None:
    """documents (+ staging, indexes); duplicate_links and its views; vector(dim) and HNSW when dim is known."""
    pg.ensure_schema(dsn)
    with pg.connect(dsn) as conn:
        conn.execute(schema_sql())
        if dim is not None:
            fix_dim(conn, int(dim))


# What `check` reads and writes: every documents column, the links' columns the lookups' join reads.
CHECK_COLUMNS = (*[("documents", c) for c in COLUMNS],
                 *[("duplicate_links", c) for c in (*pg.LINK_COLUMNS, *pg.SUPERSEDE_COLUMNS)])
# What `check --insert` needs besides.
INSERT_COLUMNS = ((CLAIMS_TABLE, "key"),)

MISSING_COLUMNS_SQL = """
SELECT x.tbl || '.' || x.col FROM unnest(%(tables)s::text[], %(columns)s::text[]) WITH ORDINALITY AS x(tbl, col, n)
WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = to_regclass(x.tbl) AND a.attname = x.col
                  AND NOT a.attisdropped)
ORDER BY x.n
"""


def missing_columns(conn, wanted=CHECK_COLUMNS) -> list[str]:
    """'table.column' of wanted that the database lacks (a missing table: all of its columns). Reads
    the catalogue only, so any role may ask."""
    return [r[0] for r in conn.execute(MISSING_COLUMNS_SQL, {"tables": [t for t, _ in wanted],
                                                             "columns": [c for _, c in wanted]}).fetchall()]


def denied_privileges(conn, wanted: Sequence[tuple[str, str]]) -> list[str]:
    """'PRIVILEGE on table' of wanted (table, privilege) pairs that the connected role does not hold."""
    return [f"{priv} on {table}" for table, priv in wanted
            if not conn.execute("SELECT has_table_privilege(%s, %s)", (table, priv)).fetchone()[0]]


def ensure_link_constraints(conn) -> None:
    """Foreign keys from duplicate_links to documents and one active link per duplicate."""
    conn.execute(LINK_CONSTRAINTS_SQL)


def _insert_sql(upsert: bool) -> sql.Composed:
    cols = sql.SQL(", ").join(map(sql.Identifier, COLUMNS))
    text = ("INSERT INTO documents ({cols}) SELECT DISTINCT ON (id) {cols} FROM documents_staging "
            "WHERE load_id = %(load_id)s ORDER BY id")
    if not upsert:
        return sql.SQL(text).format(cols=cols)
    keys = sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c))
                              for c in (*KEY_COLUMNS, *simhash_live.STORED) if c != "id")
    # A load without a vector (or facts: stage 4 off) for a document keeps what an earlier load gave it.
    vec = sql.SQL("facts = COALESCE(EXCLUDED.facts, documents.facts), "
                  "model_version = COALESCE(EXCLUDED.model_version, documents.model_version), "
                  "embedding = CASE WHEN EXCLUDED.embedding IS NULL THEN documents.embedding "
                  "ELSE EXCLUDED.embedding END")
    return sql.SQL(text + " ON CONFLICT (id) DO UPDATE SET {keys}, {vec}").format(cols=cols, keys=keys, vec=vec)


# Documents that lose the group's url_hash (an older copy of their URL arrived) release it first,
# so that the upsert below never meets the unique index half-way.
RELEASE_URL_HASH_SQL = """
UPDATE documents d SET url_hash = NULL
FROM documents_staging s
WHERE s.load_id = %(load_id)s AND s.id = d.id AND d.url_hash IS NOT NULL
  AND d.url_hash IS DISTINCT FROM s.url_hash
"""


# A slice's load (rows_of_slice) stages only its own documents; the other stored documents of their URL
# groups get url_hash as the group's order now gives it: released before the upsert (with the staged
# rows' releases), taken after it, so that no statement meets the unique index half-way.
RELEASE_GROUPS_SQL = """
UPDATE documents d SET url_hash = NULL
FROM unnest(%(ids)s::bigint[], %(hashes)s::text[]) AS g(id, url_hash)
WHERE g.id = d.id AND d.url_hash IS NOT NULL AND d.url_hash IS DISTINCT FROM g.url_hash
"""
TAKE_GROUPS_SQL = """
UPDATE documents d SET url_hash = g.url_hash
FROM unnest(%(ids)s::bigint[], %(hashes)s::text[]) AS g(id, url_hash)
WHERE g.id = d.id AND g.url_hash IS NOT NULL AND d.url_hash IS DISTINCT FROM g.url_hash
"""


def _merge(conn, load_id: str, url_groups: pa.Table | None = None) -> dict[str, int]:
    conn.execute("LOCK TABLE documents IN SHARE ROW EXCLUSIVE MODE")
    params = {"load_id": load_id}
    staged_versions = [r[0] for r in conn.execute(
        "SELECT DISTINCT model_version FROM documents_staging WHERE load_id = %(load_id)s "
        "AND model_version IS NOT NULL LIMIT 3", params).fetchall()]
    # Only a load that brings vectors asks which model the table holds (without vectors that query is a
    # scan of the whole table: 0.4-0.6 s at 1M).
    current = table_version(conn) if staged_versions else None
    if len(staged_versions) > 1 or (staged_versions and current not in (None, staged_versions[0])):
        raise ModelVersionMismatch(f"Postgres documents hold model_version {current!r}, refusing to add "
                                   f"{staged_versions}: the seed query would compare vectors of different models")
    before = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
    if before == 0:
        # Backfill: rows first, indexes after (all in this transaction).
        hnsw = table_dim(conn) is not None
        for name in (*SECONDARY_INDEXES, *([HNSW_INDEX] if hnsw else [])):
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(_insert_sql(upsert=False), params)
        for ddl in (*SECONDARY_INDEXES.values(), *([HNSW_SQL] if hnsw else [])):
            conn.execute(ddl)
    else:
        groups = {"ids": [], "hashes": []} if url_groups is None else {
            "ids": url_groups["id"].to_pylist(), "hashes": url_groups["url_hash"].to_pylist()}
        conn.execute(RELEASE_URL_HASH_SQL, params)
        if groups["ids"]:
            conn.execute(RELEASE_GROUPS_SQL, groups)
        conn.execute(_insert_sql(upsert=True), params)
        if groups["ids"]:
            conn.execute(TAKE_GROUPS_SQL, groups)
    after = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
    staged = conn.execute("SELECT count(DISTINCT id) FROM documents_staging WHERE load_id = %(load_id)s",
                          params).fetchone()[0]
    conn.execute("DELETE FROM documents_staging WHERE load_id = %(load_id)s", params)
    ensure_link_constraints(conn)
    return {"inserted": after - before, "updated": staged - (after - before)}


def load_documents(df: DataFrame, dsn: str, load_id: str, dim: int | None = None,
                   url_groups: pa.Table | None = None) -> dict[str, int]:
    """Idempotently load a DataFrame with COLUMNS (embedding array<float> or null), and give the
    stored documents of url_groups (id, url_hash; rows_of_slice) their url_hash.

    Returns staged (rows copied), inserted and updated counts.
    """
    ensure_schema(dsn, dim)
    with pg.connect(dsn) as conn:  # a retried load starts its staging from scratch
        conn.execute("DELETE FROM documents_staging WHERE load_id = %s", (load_id,))
    staged = pg.stage_dataframe(df, dsn, "documents_staging", COLUMNS, load_id)
    with pg.connect(dsn) as conn:
        with conn.transaction():
            counts = _merge(conn, load_id, url_groups)
    return {"staged": staged, **counts}


# The batch's closure (incremental.closure) reads the verification features of its candidate pairs'
# stored documents from here, by primary key, instead of scanning every stored text; only from rows
# made from the same text (the same content_hash and language) with the same settings
# (stage3_settings), so that a row loaded before a re-crawl, or with other settings, is never read.
# The documents it does not find here are read as text, as without Postgres.
VERIFICATION_SQL = """
SELECT d.id, d.shingles, d.nums, d.names
FROM unnest(%(ids)s::bigint[], %(hashes)s::text[], %(langs)s::text[]) AS s(id, content_hash, lang)
JOIN documents d ON d.id = s.id AND d.content_hash = s.content_hash AND COALESCE(d.lang, 'default') = s.lang
WHERE d.stage3_settings = %(settings)s AND d.shingles IS NOT NULL
"""
VERIFICATION_ARROW = pa.schema([("id", pa.int64()), ("shingles", pa.binary()), ("nums", pa.list_(pa.string())),
                                ("names", pa.list_(pa.string()))])


def verification_features(dsn: str, conf: "Config"):
    """A function from the wanted documents (Arrow: id, content_hash, lang with null as 'default') to
    the verification features Postgres holds for them (VERIFICATION_ARROW, prepare's carried form:
    the shingle set as little-endian int32 bytes), for the rows that pass VERIFICATION_SQL's tests.
    Nothing where the documents table or its stage-3 columns are missing (never loaded, an older schema)."""
    settings = config.settings_digest(conf)
    needed = [("documents", c) for c in ("content_hash", "lang", *simhash_live.STORED)]

    def fetch(wanted: pa.Table) -> pa.Table:
        if not wanted.num_rows:
            return VERIFICATION_ARROW.empty_table()
        with pg.connect(dsn) as conn:
            if missing_columns(conn, needed):
                return VERIFICATION_ARROW.empty_table()
            rows = conn.execute(VERIFICATION_SQL, {
                "ids": wanted["id"].to_pylist(), "hashes": wanted["content_hash"].to_pylist(),
                "langs": wanted["lang"].to_pylist(), "settings": settings}).fetchall()
        return pa.table({"id": [r[0] for r in rows], "shingles": [bytes(r[1]) for r in rows],
                         "nums": [r[2] for r in rows], "names": [r[3] for r in rows]}, schema=VERIFICATION_ARROW)

    return fetch


def url_hash_of_group_first(docs: DataFrame) -> DataFrame:
    """url_hash kept only on the earliest document of each url_hash (the stage-1 canonical), else null."""
    from ..clustering import order_key

    w = Window.partitionBy("url_hash").orderBy(order_key())
    first = F.row_number().over(w) == 1
    return docs.withColumn("url_hash", F.when(F.col("url_hash").isNotNull() & first, F.col("url_hash")))


def with_live_columns(docs: DataFrame, conf: "Config", facts: bool, features: DataFrame | None = None,
                      derived: "Accumulator | None" = None) -> DataFrame:
    """docs (KEY_COLUMNS plus body and fact_date) with LIVE_COLUMNS added and body, fact_date dropped.

    One Arrow pass per partition: stage 3's columns from stages.simhash.live.stored_batch, and
    (facts) stage 4's facts of each document's text and order date, as the batch computes them.
    features: prepare's verification features (id plus prepare.VERIFY_COLUMNS) of this run's documents
    (CascadeResult.features), which stage 3's columns take instead of deriving them from the text
    again; documents without a row there derive them, and add their number to derived."""
    stage3, schema3 = simhash_live.stored_batch(conf)
    in_schema = docs.select(*KEY_COLUMNS).schema
    carried = []
    if features is not None:
        names = simhash_live.CARRIED_COLUMNS
        docs = docs.join(features.select("id", F.lit(True).alias(simhash_live.CARRIED),
                                         *[F.col(c).alias(names[c]) for c in names]), "id", "left")
        carried = [simhash_live.CARRIED, *names.values()]
    out_schema = T.StructType([*in_schema.fields, *[T.StructField(f.name, _SPARK_TYPES[f.name]) for f in schema3
                                                     if f.name != "id"], T.StructField("facts", T.StringType())])
    sem = conf.semantic

    def run(batches):
        for batch in batches:
            added = stage3(batch)
            if derived is not None:
                derived.add(len(simhash_live.rows_to_derive(batch)))
            cols = {name: batch.column(name) for name in KEY_COLUMNS}
            cols.update({name: added.column(name) for name in simhash_live.STORED})
            if facts:
                texts = [document_text(t, b, sem.max_chars) for t, b in
                         zip(batch.column("title").to_pylist(), batch.column("body").to_pylist())]
                cols["facts"] = pa.array([facts_json(t, d, sem.evidence) if t else None for t, d in
                                          zip(texts, batch.column("fact_date").to_pylist())], pa.string())
            else:
                cols["facts"] = pa.nulls(batch.num_rows, pa.string())
            yield pa.RecordBatch.from_pydict(cols)

    return docs.select(*KEY_COLUMNS, "body", "fact_date", *carried).mapInArrow(run, out_schema)


_SPARK_TYPES = {"sim_buckets": T.ArrayType(T.LongType()), "shingles": T.BinaryType(),
                "nums": T.ArrayType(T.StringType()), "names": T.ArrayType(T.StringType()),
                "stage3_settings": T.StringType()}


def rows_from_delta(spark: SparkSession, output: str, conf: "Config", model_version: str | None,
                    ids: DataFrame | None = None, features: DataFrame | None = None,
                    derived: "Accumulator | None" = None) -> tuple[DataFrame, int | None]:
    """The documents Delta table as COLUMNS, with the live lookups' columns (and the vectors of
    model_version when given); and the vector dim.

    ids: only these documents, and the others of their url_hash groups (url_hash_of_group_first
    needs the whole group: a newcomer older than the group's first takes url_hash from it).
    features, derived: with_live_columns's."""
    stored = store.read(spark, output, "documents")
    if ids is not None:
        # Which rows, from the ids and URL hashes alone; then one read of those rows. Reading whole rows
        # for the ids and again for their groups decoded every stored text twice (and shuffled
        # whole rows to drop repeats).
        keys = stored.select("id", "url_hash")
        mine = keys.join(ids.select("id"), "id", "left_semi")
        wanted = mine.select("id").unionByName(url_group_members(keys, mine).select("id")).distinct()
        stored = stored.join(wanted, "id", "left_semi")
    docs = url_hash_of_group_first(stored).select(*KEY_COLUMNS, "body", order_date().alias("fact_date"))
    return _with_vectors(spark, output, with_live_columns(docs, conf, facts=model_version is not None,
                                                          features=features, derived=derived), model_version)


def _with_vectors(spark: SparkSession, output: str, docs: DataFrame,
                  model_version: str | None) -> tuple[DataFrame, int | None]:
    """docs (KEY_COLUMNS + LIVE_COLUMNS) as COLUMNS: with the stored vectors of model_version
    (array<float>), or none; and their dimension."""
    emb_path = store.table_path(output, "embeddings")
    dim = None
    if model_version is not None and store.exists(spark, emb_path):
        vectors = (store.read(spark, output, "embeddings").where(F.col("model_version") == model_version)
                   .select("id", "model_version", "embedding"))
        first = vectors.select(F.size("embedding")).limit(1).collect()
        dim = int(first[0][0]) if first else None
        docs = docs.join(vectors, "id", "left")
    else:
        docs = docs.select("*", F.lit(None).cast("string").alias("model_version"),
                           F.lit(None).cast("array<float>").alias("embedding"))
    return docs.select(*COLUMNS), dim


URL_GROUPS_ARROW = pa.schema([("id", pa.int64()), ("url_hash", pa.string())])


def url_group_members(rows: DataFrame, docs: DataFrame) -> DataFrame:
    """The rows that share a url_hash with one of docs (docs' own rows among them, where rows hold them)."""
    groups = docs.where(F.col("url_hash").isNotNull()).select("url_hash").distinct()
    return rows.join(groups, "url_hash", "left_semi")


def held_url_hashes(keys: DataFrame, docs: DataFrame) -> pa.Table:
    """(id, url_hash as Postgres holds it) for every document of the URL groups of docs, from keys:
    rows (id, url_hash, published_at) that hold every member of those groups, docs among them."""
    held = url_hash_of_group_first(url_group_members(keys.select("id", "url_hash", "published_at"), docs))
    return held.select("id", "url_hash").toArrow().cast(URL_GROUPS_ARROW)


@dataclass(frozen=True)
class SliceRows:
    """What a slice's run holds that its Postgres load takes instead of reading the documents table
    again. documents: the slice's rows as the run wrote them there. archive: the archive's rows its
    stages saw (CascadeResult.scope_rows), as they were before that write; the closure reaches every
    stored document that shares a url_hash with the slice (incremental.round_hits), so every member
    of the slice's URL groups is among them, with the same id, url_hash and published_at."""

    documents: DataFrame
    archive: DataFrame


def rows_of_slice(spark: SparkSession, output: str, conf: "Config", model_version: str | None,
                  slice_rows: SliceRows, features: DataFrame | None = None,
                  derived: "Accumulator | None" = None) -> tuple[DataFrame, pa.Table, int | None]:
    """What a slice's load needs, without reading the stored texts again: the slice's documents
    (slice_rows.documents) as COLUMNS, their url_hash as Postgres holds it; the (id, url_hash) of
    the other stored documents of their URL groups (a newcomer older than a group's first takes
    url_hash from it, a re-crawl dated later may hand it back), from slice_rows.archive; the vector dim.

    The stored documents' other columns are unchanged by the run, so their Postgres rows stay.
    features, derived: with_live_columns's."""
    from ..clustering import cut_lineage

    docs = cut_lineage(slice_rows.documents.select(*KEY_COLUMNS, "body", order_date().alias("fact_date")))
    # From the archive rows the run holds: reading the documents table's keys for the groups was a
    # scan of the whole table (1M documents: 1.9 s of a 52 s slice).
    groups = held_url_hashes(slice_rows.archive, docs)
    held = spark.createDataFrame(groups.rename_columns(["id", "_held"]))
    docs = docs.join(held, "id", "left").withColumn("url_hash", F.col("_held")).select(*KEY_COLUMNS, "body",
                                                                                        "fact_date")
    others = groups.filter(pc.invert(pc.is_in(groups["id"], value_set=docs.select("id").toArrow()["id"])))
    rows, dim = _with_vectors(spark, output, with_live_columns(docs, conf, facts=model_version is not None,
                                                               features=features, derived=derived), model_version)
    return rows, others, dim


def _model_version(conf: "Config") -> str | None:
    """The version of the vectors a load takes (stage 4's configured model); None with stage 4 off."""
    if not conf.semantic.enabled:
        return None
    from ..stages.semantic.embeddings import resolve

    return resolve(conf.semantic, with_thresholds=False).version


def _with_vector_count(dsn: str, counts: dict[str, Any], model_version: str | None) -> dict[str, Any]:
    """counts plus vectors (the documents holding a vector after the load) when the load takes
    vectors (model_version: stage 4 on). Without stage 4 the count is left out: it is a scan of the
    whole table (1M documents: 0.7 s) for a figure that load cannot change."""
    if model_version is None:
        return counts
    with pg.connect(dsn) as conn:
        counts["vectors"] = conn.execute("SELECT count(*) FROM documents WHERE embedding IS NOT NULL").fetchone()[0]
    return counts


def _from_text(counts: dict[str, Any], derived: "Accumulator") -> dict[str, Any]:
    """counts plus features_from_text: the loaded documents whose stage-3 columns were derived from
    their text, not taken from prepare's (with_live_columns; a retried task counts its rows again)."""
    return {**counts, "features_from_text": derived.value}


def load_from_delta(spark: SparkSession, output: str, dsn: str, conf: "Config", load_id: str,
                    ids: DataFrame | None = None, features: DataFrame | None = None) -> dict[str, Any]:
    """Load <output>/documents (and the vectors of the configured model) into Postgres documents.

    ids: load only these documents (and their url_hash groups, rows_from_delta); None: all.
    features: prepare's verification features of the run's documents (with_live_columns).
    Counts as load_documents's, plus features_from_text (_from_text) and vectors (_with_vector_count)."""
    version = _model_version(conf)
    derived = spark.sparkContext.accumulator(0)
    rows, dim = rows_from_delta(spark, output, conf, version, ids, features, derived)
    return _with_vector_count(dsn, _from_text(load_documents(rows, dsn, load_id, dim), derived), version)


def load_slice(spark: SparkSession, output: str, dsn: str, conf: "Config", load_id: str,
               slice_rows: SliceRows, features: DataFrame | None = None) -> dict[str, Any]:
    """Load the documents a slice wrote (slice_rows: the job's rows, as written to the documents table,
    already there) and the url_hash of their URL groups' stored documents (rows_of_slice): what
    load_from_delta with their ids loads, without reading the stored texts again. Counts as
    load_documents's, plus url_group_members (the stored documents of their URL groups, whose
    url_hash it brought up to date), features_from_text (_from_text) and vectors (_with_vector_count)."""
    version = _model_version(conf)
    derived = spark.sparkContext.accumulator(0)
    rows, groups, dim = rows_of_slice(spark, output, conf, version, slice_rows, features, derived)
    counts = _from_text(load_documents(rows, dsn, load_id, dim, groups), derived)
    return _with_vector_count(dsn, {**counts, "url_group_members": groups.num_rows}, version)
