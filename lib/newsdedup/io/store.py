"""Delta tables under the output directory: documents, duplicate_links, quarantine, runs."""

from __future__ import annotations

from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

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


def table_path(output: str | Path, name: str) -> str:
    return str(Path(output) / name)


def exists(spark: SparkSession, path: str) -> bool:
    return Path(path).exists() and DeltaTable.isDeltaTable(spark, path)


def merge_documents(spark: SparkSession, docs: DataFrame, path: str) -> None:
    """Upsert by id: a rerun or a newer snapshot refreshes a document's keys in place."""
    if not exists(spark, path):
        docs.write.format("delta").save(path)
        return
    (DeltaTable.forPath(spark, path).alias("t")
     .merge(docs.alias("s"), "t.id = s.id")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())


def insert_links(spark: SparkSession, links: DataFrame, path: str) -> None:
    """Insert links not already present (by duplicate_id, canonical_id, stage): reruns add nothing."""
    links = links.select(*[(F.col(f.name) if f.name in links.columns else F.lit(None)).cast(f.dataType).alias(f.name)
                           for f in LINKS_SCHEMA.fields]).dropDuplicates(list(LINK_KEY))
    if not exists(spark, path):
        spark.createDataFrame([], LINKS_SCHEMA).write.format("delta").save(path)
    elif "via_id" not in spark.read.format("delta").load(path).columns:
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (via_id BIGINT)")
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
    cond = " AND ".join(f"t.{k} <=> s.{k}" for k in QUARANTINE_KEY)  # raw_id may be null
    DeltaTable.forPath(spark, path).alias("t").merge(rows.alias("s"), cond).whenNotMatchedInsertAll().execute()


def append(df: DataFrame, path: str) -> None:
    df.write.format("delta").mode("append").option("mergeSchema", "true").save(path)


def read(spark: SparkSession, output: str | Path, name: str) -> DataFrame:
    return spark.read.format("delta").load(table_path(output, name))


def active_links(spark: SparkSession, output: str | Path) -> DataFrame:
    return read(spark, output, "duplicate_links").where(F.col("reverted_at").isNull())
