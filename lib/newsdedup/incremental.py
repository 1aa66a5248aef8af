"""Incremental runs: a new slice deduplicated against everything already in the output.

A backfill runs in slices (a year at a time, ...). Each run:

1. reads the stored keys of the documents already in <output>/documents
   (url_hash, content_hash, simhash_w and mh_bands, lang, published_at; text
   only for the documents it reruns): nothing is fingerprinted again, and
   stage 4 reuses the stored vectors whose text is unchanged (semantic.vectors_for);
2. finds the documents the slice can change (`closure`, below) and runs the
   cascade over those only, so the link set it computes for them is exactly
   the one a single run over the whole archive would compute;
3. diffs that link set with the active links of the same documents, in one
   MERGE: links no longer computed are superseded (superseded_at,
   superseded_by_run stamped, never deleted), new ones inserted, and a link
   superseded earlier that is computed again is made active again (its stamp
   cleared) rather than written twice under the same key. A link computed
   again with another score (a cluster's best edge changes as members arrive)
   keeps its row and linked_at and takes the new score. Links of documents
   outside the closure get no action.

So a new document older than an existing canonical becomes the canonical: the
old links to the former canonical are superseded and the new links point to
the newcomer. Reverted links stay reverted (a revert is a person's decision).

Why the closure is exact
------------------------
Every relation the cascade reads is a property of a PAIR of documents,
whatever else the archive holds: same url_hash (stage 1); same content_hash
(stage 2); stage 3's "candidate and verified" (same language, within
max_hamming bits of simhash_w on a Manku table or sharing a MinHash band, and
passing verify's thresholds); stage 4's "same model, within the window, cosine
>= threshold, evidence agrees". Call R their union. What a full run links a
document to depends only on its connected component under R: the exact
groups, the stage-3 clusters and stage 4's earliest-canonical groups all lie
inside it, and so do the canonical (earliest by order_key), the scores and
via_id, and which member an earlier stage suppressed. So with A = the closure
under R of the slice over slice ∪ stored, a run over A gives A's documents the
links of a full run, and every document outside A keeps the links it has (by
induction, those of a full run over the stored archive, whose components
outside A are unchanged). The closure may be larger than needed (a superset
only costs time): it follows

- url_hash and content_hash equal to a frontier document's (key joins);
- a stage-3 bucket shared with a frontier document (candidates.bucket_rows:
  a Manku table within max_hamming bits, or a MinHash band) and the pair
  verified as stage 3 verifies it (verify.py; the stored documents' text is
  read for those ids only): R's stage-3 pairs themselves;
- with stage 4 on, a stored vector of the configured model_version within
  semantic.window_hours of a frontier vector with a cosine at or above the
  lowest threshold of any language pair (the evidence is not checked). The
  frontier's vectors are embedded first when missing, so stage 4 then reuses
  them. A document outside A without a vector is one stage 4 never compared
  in the earlier runs (stages 1-3 suppressed it, or it has no text, no date or
  an uncovered language) and its stages 1-3 component did not change, so stage
  4 does not compare it now either;
- every document of an active link touching the frontier, and the other
  members of that link's canonical (cheap insurance: it costs one join).

Each round takes the documents added by the previous one as its frontier and
stops when a round adds none (incremental.rounds, incremental.affected_documents
in the report).

Where it is not exact: a stage-3 bucket over simhash.max_band_bucket members is
cut into chunks of consecutive fingerprints, and which chunk a document falls
in depends on every member of the bucket; over A the bucket holds fewer
members than over the archive, so split buckets (flagged
simhash_bucket_split on their documents) may pair differently than a full run.
Stage 4 after a change of model_version: documents outside A have no vector of
the new version, so their pairs are not searched; rerun the archive
(input.incremental: archive) or backfill the vectors first. input.incremental:
archive runs the cascade over the whole archive as before (the benchmark's
baseline, and a way to converge).

Work: the closure reads the stored keys (no text) once and keeps them, with
their bucket rows, for its rounds; the stages, the link diff and the documents
MERGE see only A and the slice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Callable

from delta.tables import DeltaTable
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .clustering import cut_lineage
from .io import store
from .stages.simhash.candidates import MINHASH, bucket_rows, language_codes
from .stages.simhash.verify import pair_features, similarity, verified

if TYPE_CHECKING:
    from .config import Config, SimhashConfig

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

    # The slice's accepted documents plus the stored ones they do not replace. Not materialised:
    # read once per closure round (keys only) and once to cut out the affected documents.
    documents: DataFrame
    accepted: DataFrame          # the slice's documents that go on (to the stages and the documents table)
    collisions: DataFrame | None  # the slice's documents refused by the id-collision policy (id, url, ...)
    counts: dict[str, int]       # existing_documents, recrawled, id_collisions (absent on a first run)
    stored: bool = False         # whether the output held documents (an incremental run)


# Up to this many rows a frontier (or a slice's ids) is broadcast to the stored side's scan; above it
# (a first slice as large as the archive) the joins shuffle instead.
BROADCAST_ROWS = 200_000


def _small(df: DataFrame, n: int, limit: int = BROADCAST_ROWS) -> DataFrame:
    """df (n rows, or n documents) broadcast when n <= limit."""
    return F.broadcast(df) if n <= limit else df


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
    n_docs = docs.count()
    ids = _small(docs.select("id"), n_docs)
    # Materialised: the job later rewrites the documents table these rows come from.
    seen = cut_lineage(docs.select("id", "url_hash", "url").alias("n").join(
        stored.select("id", "url_hash", "url").join(ids, "id", "left_semi").alias("o"), "id").select(
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
    old = stored.join(_small(docs.select("id"), n_docs), "id", "left_anti").select(*docs.columns)
    counts["existing_documents"] = old.select("id").count()
    return Archive(docs.unionByName(old), docs, collisions, counts, stored=True)


# ---------------------------------------------------------------- the closure of a slice

def _max_hamming(sim_conf: "SimhashConfig") -> Column:
    """max_hamming of a bucket row's language, by its lang_code (candidates.language_codes)."""
    values = [sim_conf.languages[name].max_hamming for name in language_codes(sim_conf)]
    return F.element_at(F.array(*[F.lit(v) for v in values]), F.col("lang_code") + 1)


def key_neighbours(docs: DataFrame, frontier: DataFrame, key: str, n_frontier: int) -> DataFrame:
    """ids of docs sharing a non-null `key` with a document of frontier (docs' rows)."""
    values = frontier.where(F.col(key).isNotNull()).select(key).distinct()
    return docs.join(_small(values, n_frontier), key, "left_semi").select("id")


def bucket_neighbours(buckets: DataFrame, frontier: DataFrame, docs: DataFrame, conf: "Config",
                      n_frontier: int) -> DataFrame:
    """ids of the documents of `buckets` (bucket_rows of the archive) that stage 3 would link to a
    frontier document: they share a bucket (a MinHash band, or a Manku table within max_hamming
    bits: what candidate_pairs can pair) and the pair passes verification on the two documents'
    shingle sets, numbers and names (verify.py, features from docs' text, read for these ids only).

    Verifying here keeps the closure to real near-duplicates: unverified band-sharing chains
    through templated and same-topic families (14 rounds over 3% of a 200k archive, measured)."""
    sim_conf = conf.simhash
    mine = bucket_rows(frontier, sim_conf).select("bucket", F.col("id").alias("a"), F.col("fp").alias("f_fp"))
    # 35 rows per document with the default tables and bands: two longs each.
    rows = buckets.join(_small(mine, n_frontier, limit=50_000), "bucket").where(F.col("id") != F.col("a"))
    close = F.bit_count(F.col("fp").bitwiseXOR(F.col("f_fp"))) <= _max_hamming(sim_conf)
    names = F.array(*[F.lit(name) for name in language_codes(sim_conf)])
    pairs = cut_lineage(rows.where((F.col("found_by") == MINHASH) | close).select(
        "a", F.col("id").alias("b"), F.element_at(names, F.col("lang_code") + 1).alias("lang")).distinct())
    ids = pairs.select(F.col("a").alias("id")).unionByName(pairs.select(F.col("b").alias("id"))).distinct()
    feats = cut_lineage(pair_features(docs, ids, conf))
    return verified(similarity(pairs, feats, "a", "b"), sim_conf).select(F.col("b").alias("id"))


def link_neighbours(links: DataFrame, frontier_ids: DataFrame, n_frontier: int) -> DataFrame:
    """ids of both ends of every active link touching frontier_ids, and of every member of those links'
    canonicals (links: the active links)."""
    f = _small(frontier_ids, n_frontier)
    touching = (links.join(f.withColumnRenamed("id", "duplicate_id"), "duplicate_id", "left_semi")
                .unionByName(links.join(f.withColumnRenamed("id", "canonical_id"), "canonical_id", "left_semi")))
    canon = touching.select(F.col("canonical_id").alias("id")).distinct()
    members = links.join(canon.withColumnRenamed("id", "canonical_id"), "canonical_id", "left_semi")
    return (touching.select(F.col("duplicate_id").alias("id")).unionByName(canon)
            .unionByName(members.select(F.col("duplicate_id").alias("id"))))


Near = Callable[[DataFrame], DataFrame]   # frontier documents (archive rows) -> ids stage 4 may pair them with


def closure(docs: DataFrame, seeds: DataFrame, conf: "Config", links: DataFrame | None,
            near: Near | None = None) -> tuple[DataFrame, list[int]]:
    """The ids of docs reachable from seeds' ids under the pair relations (module docstring), materialised,
    and the documents each round added (the seeds first).

    docs: the archive's rows (at least id, url_hash, content_hash, lang, simhash_w, mh_bands, and what
    `near` reads). links: the active links (None: none stored). near: stage 4's neighbours, when on.
    """
    sim_conf = conf.simhash
    affected = cut_lineage(seeds.select("id").distinct())
    frontier, sizes = affected, [affected.count()]
    # The stored side, read once and kept for every round (rounds are many and mostly small): the
    # keys, and the bucket rows without the columns the join does not read.
    keys = docs.select("id", "url_hash", "content_hash", "lang", "simhash_w", "mh_bands").persist(
        StorageLevel.MEMORY_AND_DISK)
    buckets = bucket_rows(keys, sim_conf).select("bucket", "found_by", "lang_code", "fp", "id").persist(
        StorageLevel.MEMORY_AND_DISK)
    while sizes[-1]:
        n = sizes[-1]
        rows = keys.join(_small(frontier, n), "id", "left_semi")
        found = [key_neighbours(keys, rows, "url_hash", n), key_neighbours(keys, rows, "content_hash", n),
                 bucket_neighbours(buckets, rows, docs, conf, n)]
        if links is not None:
            found.append(link_neighbours(links, frontier, n))
        if near is not None:
            found.append(near(docs.join(_small(frontier, n), "id", "left_semi")))
        union = found[0]
        for more in found[1:]:
            union = union.unionByName(more)
        frontier = cut_lineage(union.distinct().join(_small(affected, sum(sizes)), "id", "left_anti"))
        sizes.append(frontier.count())
        if sizes[-1]:
            affected = cut_lineage(affected.unionByName(frontier))
    keys.unpersist()
    buckets.unpersist()
    if len(sizes) > 1:
        sizes.pop()   # the round that added nothing
    return affected, sizes


def restrict(archive: DataFrame, affected: DataFrame, n_affected: int) -> DataFrame:
    """The archive's rows of the affected documents, materialised (the stages read them several times)."""
    return cut_lineage(archive.join(_small(affected, n_affected), "id", "left_semi"))


def active_outside(spark: SparkSession, path: str, affected: DataFrame, n_affected: int) -> int:
    """Active links whose duplicate is not affected: the ones this run leaves as they are."""
    if not store.exists(spark, path):
        return 0
    links = spark.read.format("delta").load(path)
    return links.where(store.is_active(links)).join(_small(affected, n_affected).withColumnRenamed(
        "id", "duplicate_id"), "duplicate_id", "left_anti").count()


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
    table: the links table as it is (every row, reverted and superseded ones included), or the part
    of it this run computed links for (write_links' scope).

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


def write_links(spark: SparkSession, computed: DataFrame, path: str, run_id: str, now: datetime,
                scope: DataFrame | None = None, changed: list | None = None) -> dict[str, int]:
    """Make the active links of the table at path equal `computed` (duplicate_id, canonical_id, stage, score).

    scope: the ids the run computed links for (closure); only links whose duplicate is among them
    are compared, so the others get no action. None: the whole table (a run over the archive).
    Each link's action is decided once (link_actions), materialised, counted, and applied in one
    Delta MERGE whose clauses read the action column. Returns the count of each action; when
    `changed` is a list, the materialised actions (link key, action) are appended to it (what
    Postgres must load).
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
    rows = table.toDF()
    if scope is not None:   # every link touching the scope has its duplicate in it (closure)
        rows = rows.join(scope.select(F.col("id").alias("duplicate_id")), "duplicate_id", "left_semi")
    actions = cut_lineage(link_actions(computed, rows))
    if changed is not None:
        changed.append(actions)
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
