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

from datetime import datetime
from typing import TYPE_CHECKING

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .clustering import cut_lineage
from .io import store

if TYPE_CHECKING:
    from .job import Report

SUPERSEDE_FIELDS = (T.StructField("superseded_at", T.TimestampType(), True),
                    T.StructField("superseded_by_run", T.StringType(), True))


def with_existing(spark: SparkSession, docs: DataFrame, output: str | None, report: "Report") -> DataFrame:
    """docs plus the stored documents of output that docs does not replace (same columns)."""
    path = store.table_path(output, "documents") if output else None
    if path is None or not store.exists(spark, path):
        return docs
    stored = store.read(spark, output, "documents")
    missing = [c for c in docs.columns if c not in stored.columns]
    if missing:
        raise ValueError(f"{path} lacks columns {missing}: written by an older version; rerun the whole archive")
    # Materialised: the job later rewrites the documents table these rows come from.
    old = cut_lineage(stored.join(docs.select("id"), "id", "left_anti").select(*docs.columns))
    report.counts["existing_documents"] = old.count()
    return docs.unionByName(old)


def ensure_supersede_columns(spark: SparkSession, path: str) -> None:
    """Add superseded_at / superseded_by_run (and via_id) to a links table written before they existed."""
    have = set(spark.read.format("delta").load(path).columns)
    todo = [f for f in (*SUPERSEDE_FIELDS, store.LINKS_SCHEMA["via_id"]) if f.name not in have]
    if todo:
        cols = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in todo)
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({cols})")


TABLE_SCHEMA = T.StructType(list(store.LINKS_SCHEMA.fields) + list(SUPERSEDE_FIELDS))


def _empty_table(spark: SparkSession, path: str) -> None:
    spark.createDataFrame([], TABLE_SCHEMA).write.format("delta").save(path)


def write_links(spark: SparkSession, computed: DataFrame, path: str, run_id: str, now: datetime) -> dict[str, int]:
    """Make the active links of the table at path equal `computed` (duplicate_id, canonical_id, stage, score).

    One Delta MERGE: new links inserted, active links not computed any more
    superseded, superseded links computed again revived. Returns the counts.
    """
    key = list(store.LINK_KEY)
    # via_id: the neighbour of a clustered link (stages 3 and 4); exact stages have none.
    via = F.col("via_id").cast("long") if "via_id" in computed.columns else F.lit(None).cast("long")
    computed = computed.select(*key, F.col("score").cast("double"), via.alias("via_id")).dropDuplicates(key)
    ts = F.lit(now).cast("timestamp")
    if not store.exists(spark, path):
        # A first run: every link is new, so one append replaces the MERGE and its four counting
        # passes, and the links are counted in the table they were written to (computed only once).
        _empty_table(spark, path)
        fresh = {"score": F.col("score"), "linked_at": ts, "run_id": F.lit(run_id), "via_id": F.col("via_id")}
        computed.select(*[fresh.get(f.name, F.col(f.name) if f.name in key else F.lit(None)).cast(f.dataType)
                          .alias(f.name) for f in TABLE_SCHEMA.fields]).write.format("delta").mode("append").save(path)
        return {"new": spark.read.format("delta").load(path).count(), "superseded": 0, "revived": 0, "rescored": 0}
    computed = cut_lineage(computed)   # read by the counts and the MERGE below
    ensure_supersede_columns(spark, path)
    table = DeltaTable.forPath(spark, path)
    current = table.toDF()
    active = current.where(F.col("reverted_at").isNull() & F.col("superseded_at").isNull())
    gone = active.join(computed, key, "left_anti").select(*key, F.lit(None).cast("double").alias("score"),
                                                          F.lit(None).cast("long").alias("via_id"),
                                                          F.lit("supersede").alias("action"))
    source = cut_lineage(computed.withColumn("action", F.lit("keep")).unionByName(gone))
    counts = {
        "new": source.where("action = 'keep'").join(current, key, "left_anti").count(),
        "superseded": source.where("action = 'supersede'").count(),
        "revived": source.where("action = 'keep'").join(
            current.where(F.col("superseded_at").isNotNull() & F.col("reverted_at").isNull()), key, "left_semi").count(),
        "rescored": source.where("action = 'keep'").alias("s").join(
            active.alias("t"), key).where(~F.col("s.score").eqNullSafe(F.col("t.score"))).count(),
    }
    cond = " AND ".join(f"t.{k} = s.{k}" for k in key)
    (table.alias("t").merge(source.alias("s"), cond)
     .whenMatchedUpdate(condition="s.action = 'supersede' AND t.reverted_at IS NULL AND t.superseded_at IS NULL",
                        set={"superseded_at": ts, "superseded_by_run": F.lit(run_id)})
     .whenMatchedUpdate(condition="s.action = 'keep' AND t.reverted_at IS NULL "
                                  "AND (t.superseded_at IS NOT NULL OR NOT (t.score <=> s.score))",
                        set={"superseded_at": F.lit(None).cast("timestamp"),
                             "superseded_by_run": F.lit(None).cast("string"), "score": F.col("s.score"),
                             "via_id": F.col("s.via_id")})
     .whenNotMatchedInsert(condition="s.action = 'keep'", values={
         **{k: F.col(f"s.{k}") for k in key}, "score": F.col("s.score"), "via_id": F.col("s.via_id"), "linked_at": ts,
         "run_id": F.lit(run_id), "reverted_at": F.lit(None).cast("timestamp"),
         "revert_reason": F.lit(None).cast("string"), "superseded_at": F.lit(None).cast("timestamp"),
         "superseded_by_run": F.lit(None).cast("string")})
     .execute())
    return counts
