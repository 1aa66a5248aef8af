"""How the Delta tables are laid out for their readers: liquid clustering, and OPTIMIZE after a run.

documents is clustered by published_at and duplicate_links by (stage, linked_at) (conf `layout`;
docs/benchmarks-layout.md has the measurements behind the choice). Delta writes (MERGE, append)
do not cluster in open-source Delta: they leave new, unclustered files. The OPTIMIZE that follows
each run (optimize_tables) clusters those files and compacts small ones (a table that is one small
file is left alone: worth_optimizing). Open-source Delta merges
them into the existing clustered cubes until a cube passes its size threshold
(spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.threshold, 100 GiB), so left
to its default every OPTIMIZE re-clusters the whole table. optimize sets that threshold for each
OPTIMIZE instead (cube_threshold, conf layout.max_read_share): the run's new files become a cube of
their own and the smallest cubes are merged only when there would be too many. A query
filtering on a clustering column then reads only the files whose min/max statistics (kept in
the Delta log) can hold matching rows.

Tables written by earlier versions are unclustered: prepare_table gives them the configured
columns with ALTER TABLE ... CLUSTER BY (metadata only, no rewrite; the table's writer protocol
goes to 7 with the clustering feature, readers are unaffected), and the same run's OPTIMIZE
clusters their rows once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from . import paths
from ..errors import UserError
from ..report import StepReport

if TYPE_CHECKING:
    from ..config import LayoutConfig

# The tables a run compacts after its writes; only the first two are clustered (conf layout).
OPTIMIZED_TABLES = ("documents", "duplicate_links", "quarantine")
MAX_FILE_SIZE_CONF = "spark.databricks.delta.optimize.maxFileSize"
# A cube at least this large (bytes) is left alone by OPTIMIZE; smaller cubes are re-clustered with the new files.
CUBE_THRESHOLD_CONF = "spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.threshold"
# OPTIMIZE packs what it rewrites into cubes of at most max(this, the threshold) bytes.
CUBE_TARGET_CONF = "spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.targetCubeSize"


def sql_table(path: str) -> str:
    """The Delta table at path as Spark SQL names it (delta.`path`, backticks escaped)."""
    return "delta.`" + path.replace("`", "``") + "`"


def _cols(columns: Sequence[str]) -> str:
    return ", ".join("`" + c.replace("`", "``") + "`" for c in columns)


def _described(spark: SparkSession, path: str) -> tuple[int, list[str], int]:
    """(files, clustering columns, bytes) of the Delta table at path's current version, from its log."""
    row = (spark.sql(f"DESCRIBE DETAIL {sql_table(path)}")
           .select("numFiles", "clusteringColumns", "sizeInBytes").first())
    return int(row["numFiles"]), list(row["clusteringColumns"] or []), int(row["sizeInBytes"] or 0)


def detail(spark: SparkSession, path: str) -> tuple[int, list[str]]:
    """(files in the current version, clustering columns) of the Delta table at path, from its log."""
    files, columns, _ = _described(spark, path)
    return files, columns


def worth_optimizing(files: int, size: int, max_file_bytes: int) -> bool:
    """Whether OPTIMIZE can change what a reader reads: not for a table that is at most one file
    and would stay one (size <= max_file_bytes). There is nothing to compact, and clustering pays
    off across files only (a query skips a file by its statistics; a file this small is one row
    group). Each run's MERGE rewrites such a table's file unclustered (duplicate_links at 1M
    documents: one 4 MB file), so clustering it cost a second rewrite per run (4.7 s a slice)."""
    return files > 1 or size > max_file_bytes


def files_read(df: DataFrame) -> int:
    """Files a query over a Delta table reads: those its filters could not skip by their statistics."""
    return len(df.inputFiles())


def prepare_table(spark: SparkSession, path: str, name: str, schema: T.StructType,
                  cluster_by: Sequence[str]) -> str | None:
    """Make the table at path clustered by cluster_by before a run writes into it; a note when changed.

    Missing: created empty, clustered, with schema (every column nullable, as a DataFrame write
    would make them), so the run's writes MERGE into it. Present with other clustering columns
    (an unclustered table from an earlier version, or conf changed): ALTER TABLE ... CLUSTER BY.
    cluster_by empty and the table missing: nothing, the writers create it unclustered.
    """
    cluster_by = list(cluster_by)
    unknown = [c for c in cluster_by if c not in schema.fieldNames()]
    if unknown:
        raise UserError(f"layout.{name}.cluster_by: {name} has no column {', '.join(unknown)} "
                        f"(columns: {', '.join(schema.fieldNames())})")
    if not paths.is_delta(spark, path):
        if not cluster_by:
            return None
        # A run killed inside DeltaTable.create can leave a _delta_log without a commit; Delta then
        # refuses to create the table ("already exists") though it holds nothing, and a resumed run
        # would fail for good. With no commit there is no table to lose: the stub goes.
        log = paths.join(path, "_delta_log")
        if paths.exists(spark, log):
            paths.delete(spark, log)
        nullable = T.StructType([T.StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])
        DeltaTable.create(spark).location(path).addColumns(nullable).clusterBy(*cluster_by).execute()
        return None
    _, current = detail(spark, path)
    if current == cluster_by:
        return None
    spark.sql(f"ALTER TABLE {sql_table(path)} CLUSTER BY {'(' + _cols(cluster_by) + ')' if cluster_by else 'NONE'}")
    was = f"clustered by {', '.join(current)}" if current else "unclustered"
    now = f"clustered by {', '.join(cluster_by)}" if cluster_by else "unclustered"
    return f"layout: {name} was {was}, now {now} (its rows are reclustered by the next OPTIMIZE)"


@dataclass(frozen=True)
class Cubes:
    """A clustered table's live files as OPTIMIZE sees them, from the Delta log.

    sizes: bytes of each liquid cube on the table's clustering columns (its files' ZCUBE_ID tag),
    files: the files of each, unclustered_files/bytes: files no OPTIMIZE has clustered yet (the
    MERGEs' output since the last one), other_files: files clustered on other columns (before an
    ALTER TABLE ... CLUSTER BY; Delta never re-clusters them)."""

    sizes: dict[str, int]
    files: dict[str, int]
    unclustered_files: int
    unclustered_bytes: int
    other_files: int

    @property
    def total_files(self) -> int:
        return sum(self.files.values()) + self.unclustered_files + self.other_files


def cubes(spark: SparkSession, path: str, columns: Sequence[str] | None = None) -> Cubes:
    """The table's cubes, read from the current snapshot's add actions (Delta's own log reader).
    columns: the table's clustering columns where the caller has them (else read from the log).

    Through the JVM: DeltaLog.update(stalenessAcceptable, checkIfUpdatedSinceTs, catalogTableOpt) is
    delta-spark's internal API (4.x); tests/test_layout.py fails if another version changes it."""
    from pyspark.sql import functions as F

    jvm = spark._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    snapshot = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
    columns = list(columns) if columns is not None else detail(spark, path)[1]
    adds = DataFrame(snapshot.allFiles().toDF(), spark)
    rows = (adds.select(F.col("tags").getItem("ZCUBE_ID").alias("cube"),
                        F.col("tags").getItem("ZCUBE_ZORDER_BY").alias("by"), "clusteringProvider", "size")
            .groupBy("cube", "by", "clusteringProvider").agg(F.count("*").alias("n"), F.sum("size").alias("bytes"))
            .collect())
    import json

    sizes, files, un_files, un_bytes, other = {}, {}, 0, 0, 0
    for r in rows:
        if r["cube"] is None:
            un_files, un_bytes = un_files + r["n"], un_bytes + r["bytes"]
        elif r["clusteringProvider"] == "liquid" and json.loads(r["by"] or "[]") == columns:
            sizes[r["cube"]], files[r["cube"]] = int(r["bytes"]), int(r["n"])
        else:
            other += r["n"]
    return Cubes(sizes, files, un_files, un_bytes, other)


def cube_threshold(table: Cubes, max_file_bytes: int, max_read_share: float) -> int | None:
    """The cube threshold for this OPTIMIZE (bytes; Delta rewrites the cubes below it), None: nothing to do.

    A query on the clustering column reads about one file per cube (each cube holds the whole range
    of the column, sorted into files): the cubes are kept to at most max_read_share of the files,
    and at least one. The files written since the last OPTIMIZE become a cube of their own
    (threshold 1 byte: every existing cube is left alone, the cost is that of the new files);
    when that would make one cube too many, the smallest existing cubes are merged into the new
    one (the threshold just above the largest of them)."""
    new_files = math.ceil(table.unclustered_bytes / max_file_bytes) if table.unclustered_files else 0
    allowed = max(1, math.floor(max_read_share * (table.total_files - table.unclustered_files + new_files)))
    count = len(table.sizes) + (1 if table.unclustered_files else 0)
    if count <= allowed:
        return 1 if table.unclustered_files else None
    merge = len(table.sizes) + 1 - allowed          # cubes merged into one (with the new files, if any)
    return sorted(table.sizes.values())[merge - 1] + 1


def optimize(spark: SparkSession, path: str, max_file_bytes: int,
             max_read_share: float | None = None) -> tuple[int, int]:
    """OPTIMIZE the table at path (cluster new rows, compact small files); its file count before and after.
    A table of one small file is left as it is (worth_optimizing).

    max_read_share: a clustered table's new files become a cube of their own, and the smallest
    cubes are merged when there are more than that share of the files (cube_threshold). None:
    Delta's own threshold (100 GiB), under which every OPTIMIZE re-clusters the whole table."""
    before, columns, size = _described(spark, path)
    if not worth_optimizing(before, size, max_file_bytes):
        return before, before
    confs = {MAX_FILE_SIZE_CONF: str(max_file_bytes)}
    if columns and max_read_share is not None:
        table = cubes(spark, path, columns)
        threshold = cube_threshold(table, max_file_bytes, max_read_share)
        if threshold is None:       # nothing new, no cube to merge
            return before, before
        # Everything rewritten goes into one cube: the bin is larger than the table.
        confs[CUBE_THRESHOLD_CONF] = str(threshold)
        confs[CUBE_TARGET_CONF] = str(max(threshold, sum(table.sizes.values()) + table.unclustered_bytes + 1))
    previous = {k: spark.conf.get(k, None) for k in confs}
    for k, v in confs.items():
        spark.conf.set(k, v)
    try:
        done = spark.sql(f"OPTIMIZE {sql_table(path)}").collect()
    finally:
        for k, v in previous.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
    # From OPTIMIZE's own metrics: reading the file count from the log again would first compute
    # the new version's snapshot, a Spark job of 0.5-3 s per table that nothing else in the run needs.
    metrics = done[0]["metrics"]
    return before, before - metrics["numFilesRemoved"] + metrics["numFilesAdded"]


def optimize_tables(spark: SparkSession, output: str, conf: "LayoutConfig") -> StepReport:
    """OPTIMIZE each of OPTIMIZED_TABLES present under output; counts files.<table>.before/after."""
    out = StepReport()
    for name in OPTIMIZED_TABLES:
        path = paths.join(paths.qualified(output), name)
        if not paths.is_delta(spark, path):
            continue
        before, after = out.timed(f"optimize.{name}",
                                  lambda p=path: optimize(spark, p, conf.max_file_bytes, conf.max_read_share))
        out.counts[f"files.{name}.before"] = before
        out.counts[f"files.{name}.after"] = after
    return out
