"""Delta tables under the output (a local directory or any Hadoop URI): documents, duplicate_links, quarantine,
skipped_files, runs."""

from __future__ import annotations

import json

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import layout, paths
from ..errors import UserError

LINKS_SCHEMA = T.StructType([
    T.StructField("duplicate_id", T.LongType(), False),
    T.StructField("canonical_id", T.LongType(), False),
    T.StructField("stage", T.StringType(), False),
    T.StructField("score", T.DoubleType(), True),
    T.StructField("linked_at", T.TimestampType(), False),
    T.StructField("run_id", T.StringType(), False),
    # A revert never deletes: it stamps these two columns.
    T.StructField("reverted_at", T.TimestampType(), True),
    T.StructField("revert_reason", T.StringType(), True),
    # The neighbour through which a clustered duplicate joined (stages 3 and 4); null
    # for exact stages. Added after the first release: insert_links adds it to older tables.
    T.StructField("via_id", T.LongType(), True),
])
LINK_KEY = ("duplicate_id", "canonical_id", "stage")


# What a newsdedup output holds; anything else in an existing output means it is someone else's directory.
OUTPUT_ENTRIES = frozenset({"documents", "duplicate_links", "quarantine", "skipped_files", "runs", "embeddings",
                            "semantic_refusals", "components", "_runs",
                            "_checkpoints", "reports", "pgdata", "pgdata.secret", "_newsdedup.lock"})


class NotAnOutputError(UserError):
    """The --output given is not (and cannot become) a newsdedup output."""


def table_path(output: str, name: str) -> str:
    return paths.join(paths.qualified(output), name)


def exists(spark: SparkSession, path: str) -> bool:
    """A Delta table at path, asked of the path's own FileSystem (local disk, s3a, abfss, ...)."""
    return paths.is_delta(spark, path)


def check_new_or_ours(spark: SparkSession, output: str) -> None:
    """Refuse to write into an existing directory that holds something other than newsdedup's tables."""
    # The run's own lock file (and its takeover temporaries) is there before this check.
    entries = [e for e in paths.children(spark, output)
               if not e.startswith(".") and not e.startswith("_newsdedup.lock.")]
    foreign = [e for e in entries if e not in OUTPUT_ENTRIES]
    if foreign and not (set(entries) & OUTPUT_ENTRIES):
        raise NotAnOutputError(
            f"--output {output} is not a newsdedup output (it holds {', '.join(foreign[:5])}"
            f"{', ...' if len(foreign) > 5 else ''} and no runs table); give a new or empty directory")


def check_is_output(spark: SparkSession, output: str, table: str = "duplicate_links") -> None:
    """For commands that read a finished output: its table must be there."""
    if not exists(spark, table_path(output, table)):
        raise NotAnOutputError(f"--output {output} is not a newsdedup output: no Delta table '{table}' in it "
                               f"(run `newsdedup run --output {output}` first, or check the path)")


def merge_documents(spark: SparkSession, docs: DataFrame, path: str, all_new: bool = False) -> None:
    """Upsert by id: a rerun or a newer snapshot refreshes a document's keys in place.

    An empty table (a first run's, created clustered by layout.prepare_table) is appended to: with
    nothing to match, MERGE would only copy its whole source aside first (Delta materialises a
    MERGE source it cannot prove deterministic) and then write it. So is a table known to hold
    none of docs' ids (all_new: the run read the stored ids, incremental.with_stored), where MERGE
    would join every stored id to find no match (a 1% slice at 1M: 1.7-2.3 s, the append well under
    one). docs holds each id once."""
    if not exists(spark, path):
        docs.write.format("delta").save(path)
        return
    if all_new or is_empty(spark, path):
        docs.write.format("delta").mode("append").save(path)
        return
    (DeltaTable.forPath(spark, path).alias("t")
     .merge(docs.alias("s"), "t.id = s.id")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())


def is_empty(spark: SparkSession, path: str) -> bool:
    """The Delta table at path holds no data file (its current version, from the log)."""
    return layout.detail(spark, path)[0] == 0


def insert_links(spark: SparkSession, links: DataFrame, path: str) -> None:
    """Insert links not already present (by duplicate_id, canonical_id, stage): reruns add nothing."""
    links = links.select(*[(F.col(f.name) if f.name in links.columns else F.lit(None)).cast(f.dataType).alias(f.name)
                           for f in LINKS_SCHEMA.fields]).dropDuplicates(list(LINK_KEY))
    if not exists(spark, path):   # a first run: nothing to merge with, so append instead of MERGE
        spark.createDataFrame([], LINKS_SCHEMA).write.format("delta").save(path)
        links.write.format("delta").mode("append").save(path)
        return
    if "via_id" not in spark.read.format("delta").load(path).columns:   # written before via_id existed
        spark.sql(f"ALTER TABLE {layout.sql_table(path)} ADD COLUMNS (via_id BIGINT)")
    cond = " AND ".join(f"t.{k} = s.{k}" for k in LINK_KEY)
    DeltaTable.forPath(spark, path).alias("t").merge(links.alias("s"), cond).whenNotMatchedInsertAll().execute()


QUARANTINE_KEY = ("raw_id", "reason", "record")


def insert_quarantine(spark: SparkSession, rows: DataFrame, path: str) -> None:
    """Append quarantined rows unless the same (raw_id, reason, record) is already there.

    A rerun on the same snapshot therefore adds nothing; copies repeated within
    one batch (identical duplicate-id rows) are all kept, so every input row
    stays accounted for.
    """
    if not exists(spark, path):
        rows.write.format("delta").save(path)
        return
    if rows.isEmpty():   # most runs quarantine nothing; a MERGE of no rows still took 0.3-2 s
        return
    cond = " AND ".join(f"t.{k} <=> s.{k}" for k in QUARANTINE_KEY)  # raw_id may be null
    DeltaTable.forPath(spark, path).alias("t").merge(rows.alias("s"), cond).whenNotMatchedInsertAll().execute()


SKIPPED_SCHEMA = ("path string, reason string, row_group int, rows long, run_id string, "
                  "skipped_at timestamp")


def insert_skipped(spark: SparkSession, rows: list[tuple], path: str) -> None:
    """Record input files a run skipped (path, reason, row_group, rows, run_id, skipped_at), once per
    (run_id, path): a resumed run that skips them again adds nothing."""
    df = spark.createDataFrame(rows, SKIPPED_SCHEMA)
    if not exists(spark, path):
        df.write.format("delta").save(path)
        return
    (DeltaTable.forPath(spark, path).alias("t").merge(df.alias("s"), "t.run_id = s.run_id AND t.path = s.path")
     .whenNotMatchedInsertAll().execute())


def append(df: DataFrame, path: str) -> None:
    df.write.format("delta").mode("append").option("mergeSchema", "true").save(path)


def read(spark: SparkSession, output: str, name: str) -> DataFrame:
    return spark.read.format("delta").load(table_path(output, name))


def is_active(links: DataFrame) -> Column:
    """Not reverted, and not superseded by an incremental run (tables written before those have no column)."""
    active = F.col("reverted_at").isNull()
    return active & F.col("superseded_at").isNull() if "superseded_at" in links.columns else active


def active_links(spark: SparkSession, output: str) -> DataFrame:
    links = read(spark, output, "duplicate_links")
    return links.where(is_active(links))


# The settings the documents' keys and the stages 1-3 links were computed with (config.keys_settings,
# config.pairing_settings), recorded as properties of the documents table: JSON, readable with
# DESCRIBE DETAIL by whoever wonders which settings an output holds.
SETTINGS_PROPERTIES = {"keys": "newsdedup.settings.keys", "pairing": "newsdedup.settings.pairing"}


def recorded_settings(spark: SparkSession, output: str) -> dict[str, dict | None] | None:
    """Each group's recorded settings (None where the output was written before they were), or
    None when the output holds no documents table yet."""
    path = table_path(output, "documents")
    if not exists(spark, path):
        return None
    props = spark.sql(f"DESCRIBE DETAIL {layout.sql_table(path)}").select("properties").first()[0] or {}
    return {group: json.loads(props[name]) if name in props else None for group, name in SETTINGS_PROPERTIES.items()}


def record_settings(spark: SparkSession, output: str, settings: dict[str, dict]) -> None:
    """Record settings (a mapping per group of SETTINGS_PROPERTIES) with the documents table: a
    metadata commit, no file rewritten."""
    values = ", ".join(f"'{name}' = {_sql_string(json.dumps(settings[group], sort_keys=True, separators=(',', ':')))}"
                       for group, name in SETTINGS_PROPERTIES.items())
    spark.sql(f"ALTER TABLE {layout.sql_table(table_path(output, 'documents'))} SET TBLPROPERTIES ({values})")


def _sql_string(text: str) -> str:
    """text as a Spark SQL string literal (its parser reads backslash escapes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
