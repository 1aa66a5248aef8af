"""How the Delta tables are laid out for their readers: liquid clustering, and OPTIMIZE after a run.

documents is clustered by published_at and duplicate_links by (stage, linked_at) (conf `layout`;
docs/benchmarks-layout.md has the measurements behind the choice). Delta writes (MERGE, append)
do not cluster in open-source Delta: they leave new, unclustered files. The OPTIMIZE that follows
each run (optimize_tables) clusters those files and compacts small ones. Open-source Delta merges
them into the existing clustered cubes until a cube passes its size threshold
(spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.threshold), so on tables
below it every OPTIMIZE re-clusters the whole table (docs/benchmarks-layout.md has the cost). A query
filtering on a clustering column then reads only the files whose min/max statistics (kept in
the Delta log) can hold matching rows.

Tables written by earlier versions are unclustered: prepare_table gives them the configured
columns with ALTER TABLE ... CLUSTER BY (metadata only, no rewrite; the table's writer protocol
goes to 7 with the clustering feature, readers are unaffected), and the same run's OPTIMIZE
clusters their rows once.
"""

from __future__ import annotations

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


def _sql_path(path: str) -> str:
    return "delta.`" + path.replace("`", "``") + "`"


def _cols(columns: Sequence[str]) -> str:
    return ", ".join("`" + c.replace("`", "``") + "`" for c in columns)


def detail(spark: SparkSession, path: str) -> tuple[int, list[str]]:
    """(files in the current version, clustering columns) of the Delta table at path, from its log."""
    row = spark.sql(f"DESCRIBE DETAIL {_sql_path(path)}").select("numFiles", "clusteringColumns").first()
    return int(row["numFiles"]), list(row["clusteringColumns"] or [])


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
        nullable = T.StructType([T.StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])
        DeltaTable.create(spark).location(path).addColumns(nullable).clusterBy(*cluster_by).execute()
        return None
    _, current = detail(spark, path)
    if current == cluster_by:
        return None
    spark.sql(f"ALTER TABLE {_sql_path(path)} CLUSTER BY {'(' + _cols(cluster_by) + ')' if cluster_by else 'NONE'}")
    was = f"clustered by {', '.join(current)}" if current else "unclustered"
    now = f"clustered by {', '.join(cluster_by)}" if cluster_by else "unclustered"
    return f"layout: {name} was {was}, now {now} (its rows are reclustered by the next OPTIMIZE)"


def optimize(spark: SparkSession, path: str, max_file_bytes: int) -> tuple[int, int]:
    """OPTIMIZE the table at path (cluster new rows, compact small files); its file count before and after."""
    before, _ = detail(spark, path)
    previous = spark.conf.get(MAX_FILE_SIZE_CONF, None)
    spark.conf.set(MAX_FILE_SIZE_CONF, str(max_file_bytes))
    try:
        spark.sql(f"OPTIMIZE {_sql_path(path)}").collect()
    finally:
        if previous is None:
            spark.conf.unset(MAX_FILE_SIZE_CONF)
        else:
            spark.conf.set(MAX_FILE_SIZE_CONF, previous)
    after, _ = detail(spark, path)
    return before, after


def optimize_tables(spark: SparkSession, output: str, conf: "LayoutConfig") -> StepReport:
    """OPTIMIZE each of OPTIMIZED_TABLES present under output; counts files.<table>.before/after."""
    out = StepReport()
    for name in OPTIMIZED_TABLES:
        path = paths.join(paths.qualified(output), name)
        if not paths.is_delta(spark, path):
            continue
        before, after = out.timed(f"optimize.{name}", lambda p=path: optimize(spark, p, conf.max_file_bytes))
        out.counts[f"files.{name}.before"] = before
        out.counts[f"files.{name}.after"] = after
    return out
