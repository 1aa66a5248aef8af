"""Incremental runs: a new slice deduplicated against everything already in the output.

A backfill runs in slices (a year at a time, ...). Each run:

1. reads the stored keys of the documents already in <output>/documents
   (url_hash, content_hash, simhash and bands, lang, published_at, text for
   stage 4): nothing is fingerprinted again, and stage 4 reuses the stored
   vectors whose text is unchanged (semantic.vectors_for);
2. runs the cascade over stored ∪ new documents (a new document with an id
   already stored replaces the stored one), so the link set it computes is
   exactly the one a single run over the whole archive would compute;
3. diffs that link set with the active links in Delta, in one MERGE: links no
   longer computed are superseded (superseded_at, superseded_by_run stamped,
   never deleted), new ones inserted, and a link superseded earlier that is
   computed again is made active again (its stamp cleared) rather than
   written twice under the same key. A link computed again with another
   score (a cluster's best edge changes as members arrive) keeps its row and
   linked_at and takes the new score.

So a new document older than an existing canonical becomes the canonical: the
old links to the former canonical are superseded and the new links point to
the newcomer. Reverted links stay reverted (a revert is a person's decision).

The work is the whole archive's join each time; restricting it to the
connected components that touch new documents would be the next optimisation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .clustering import cut_lineage
from .io import store

SUPERSEDE_FIELDS = (T.StructField("superseded_at", T.TimestampType(), True),
                    T.StructField("superseded_by_run", T.StringType(), True))
TABLE_SCHEMA = T.StructType(list(store.LINKS_SCHEMA.fields) + list(SUPERSEDE_FIELDS))

# What write_links does to each link, decided once per link (link_actions) and read by both the
# counts and the MERGE. A link that needs nothing (active and unchanged, reverted, or already
# superseded and not computed) gets no action and is not in the MERGE's source at all.
INSERT, SUPERSEDE, REVIVE, RESCORE = "insert", "supersede", "revive", "rescore"
ACTIONS = (INSERT, SUPERSEDE, REVIVE, RESCORE)
# The run report's names for them (links.new, links.superseded, ...).
REPORTED_AS = {INSERT: "new", SUPERSEDE: "superseded", REVIVE: "revived", RESCORE: "rescored"}


@dataclass
class Archive:
    """What a run deduplicates: its slice against the documents already stored."""

    documents: DataFrame         # the slice's accepted documents plus the stored ones they do not replace
    accepted: DataFrame          # the slice's documents that go on (to the stages and the documents table)
    collisions: DataFrame | None  # the slice's documents refused by the id-collision policy (id, url, ...)
    counts: dict[str, int]       # existing_documents, recrawled, id_collisions (absent on a first run)


def same_article(new_url_hash: Column, old_url_hash: Column, new_url: Column, old_url: Column) -> Column:
    """One article seen twice: the same canonical URL (url_hash), or, where neither URL could be
    normalised, the same stored URL string."""
    return (new_url_hash == old_url_hash) | (new_url_hash.isNull() & old_url_hash.isNull() & new_url.eqNullSafe(old_url))


def with_stored(spark: SparkSession, docs: DataFrame, output: str | None,
                id_collision: str = "quarantine") -> Archive:
    """The archive for this run: docs against the stored documents of output (same columns).

    A document of docs whose id is already stored is a re-crawl when it is the same article
    (same_article): it replaces the stored row (Delta's history keeps the old one). Otherwise
    another article reuses the id, and id_collision decides: "quarantine" keeps the stored one
    and hands the newcomer back in `collisions`; "replace" lets it replace the stored one.
    """
    path = store.table_path(output, "documents") if output else None
    if path is None or not store.exists(spark, path):
        return Archive(docs, docs, None, {})
    stored = store.read(spark, output, "documents")
    missing = [c for c in docs.columns if c not in stored.columns]
    if missing:
        raise ValueError(f"{path} lacks columns {missing}: written by an older version; rerun the whole archive")
    # Materialised: the job later rewrites the documents table these rows come from.
    seen = cut_lineage(docs.select("id", "url_hash", "url").alias("n").join(
        stored.select("id", "url_hash", "url").alias("o"), "id").select(
        "id", same_article(F.col("n.url_hash"), F.col("o.url_hash"), F.col("n.url"), F.col("o.url"))
        .alias("same")))
    row = seen.agg(F.sum(F.col("same").cast("int")).alias("same"),
                   F.sum((~F.col("same")).cast("int")).alias("other")).first()
    counts = {"recrawled": int(row["same"] or 0), "id_collisions": int(row["other"] or 0)}
    collisions = None
    if id_collision == "quarantine" and counts["id_collisions"]:
        refused = seen.where(~F.col("same")).select("id")
        collisions = docs.join(refused, "id", "left_semi")
        docs = docs.join(refused, "id", "left_anti")
    old = cut_lineage(stored.join(docs.select("id"), "id", "left_anti").select(*docs.columns))
    counts["existing_documents"] = old.count()
    return Archive(docs.unionByName(old), docs, collisions, counts)


def ensure_supersede_columns(spark: SparkSession, path: str) -> None:
    """Add superseded_at / superseded_by_run (and via_id) to a links table written before they existed."""
    have = set(spark.read.format("delta").load(path).columns)
    todo = [f for f in (*SUPERSEDE_FIELDS, store.LINKS_SCHEMA["via_id"]) if f.name not in have]
    if todo:
        cols = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in todo)
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({cols})")


def link_actions(computed: DataFrame, table: DataFrame) -> DataFrame:
    """One row per link that must change: the link key, the computed score and via_id, and its action.

    computed: the links this run computed (key, score, via_id), one row per key.
    table: the links table as it is (every row, reverted and superseded ones included).

    - insert:    computed, not in the table;
    - revive:    computed, in the table superseded (and not reverted);
    - rescore:   computed, active in the table with another score (via_id follows the score);
    - supersede: active in the table, not computed any more.
    A reverted link is a person's decision: whether computed or not, it gets no action.
    """
    key = list(store.LINK_KEY)
    t = table.select(*key, F.col("score").alias("t_score"),
                     F.col("reverted_at").isNotNull().alias("t_reverted"),
                     F.col("superseded_at").isNotNull().alias("t_superseded"), F.lit(True).alias("t_exists"))
    c = computed.select(*key, "score", "via_id", F.lit(True).alias("c_exists"))
    both = c.join(t, key, "full_outer")
    in_table, is_computed = F.coalesce("t_exists", F.lit(False)), F.coalesce("c_exists", F.lit(False))
    active = in_table & ~F.col("t_reverted") & ~F.col("t_superseded")
    action = (F.when(is_computed & ~in_table, INSERT)
              .when(is_computed & in_table & ~F.col("t_reverted") & F.col("t_superseded"), REVIVE)
              .when(is_computed & active & ~F.col("score").eqNullSafe(F.col("t_score")), RESCORE)
              .when(~is_computed & active, SUPERSEDE))
    return both.select(*key, "score", "via_id", action.alias("action")).where(F.col("action").isNotNull())


def write_links(spark: SparkSession, computed: DataFrame, path: str, run_id: str, now: datetime) -> dict[str, int]:
    """Make the active links of the table at path equal `computed` (duplicate_id, canonical_id, stage, score).

    Each link's action is decided once (link_actions), materialised, counted, and applied in one
    Delta MERGE whose clauses read the action column. Returns the count of each action.
    """
    key = list(store.LINK_KEY)
    # via_id: the neighbour of a clustered link (stages 3 and 4); exact stages have none.
    via = F.col("via_id").cast("long") if "via_id" in computed.columns else F.lit(None).cast("long")
    computed = computed.select(*key, F.col("score").cast("double"), via.alias("via_id")).dropDuplicates(key)
    if not store.exists(spark, path):   # a first run: an empty table, so every link is an insert
        spark.createDataFrame([], TABLE_SCHEMA).write.format("delta").save(path)
    ensure_supersede_columns(spark, path)
    table = DeltaTable.forPath(spark, path)
    # Materialised: the counts and the MERGE read the same actions, computed once from the table as
    # it was before the MERGE changes it.
    actions = cut_lineage(link_actions(computed, table.toDF()))
    found = {r["action"]: int(r["n"]) for r in actions.groupBy("action").agg(F.count("*").alias("n")).collect()}
    counts = {a: found.get(a, 0) for a in ACTIONS}   # zeros included: "none revived" is a finding
    ts = F.lit(now).cast("timestamp")
    cond = " AND ".join(f"t.{k} = s.{k}" for k in key)
    (table.alias("t").merge(actions.alias("s"), cond)
     .whenMatchedUpdate(condition=f"s.action = '{SUPERSEDE}'",
                        set={"superseded_at": ts, "superseded_by_run": F.lit(run_id)})
     .whenMatchedUpdate(condition=f"s.action IN ('{REVIVE}', '{RESCORE}')",
                        set={"superseded_at": F.lit(None).cast("timestamp"),
                             "superseded_by_run": F.lit(None).cast("string"), "score": F.col("s.score"),
                             "via_id": F.col("s.via_id")})
     .whenNotMatchedInsert(condition=f"s.action = '{INSERT}'", values={
         **{k: F.col(f"s.{k}") for k in key}, "score": F.col("s.score"), "via_id": F.col("s.via_id"), "linked_at": ts,
         "run_id": F.lit(run_id), "reverted_at": F.lit(None).cast("timestamp"),
         "revert_reason": F.lit(None).cast("string"), "superseded_at": F.lit(None).cast("timestamp"),
         "superseded_by_run": F.lit(None).cast("string")})
     .execute())
    return {REPORTED_AS[a]: n for a, n in counts.items()}
