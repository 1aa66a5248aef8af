"""Reading what the input's files say about themselves: their list, their footers, their row groups.

Everything goes through the Hadoop FileSystem of the path (the JVM's), so a
local directory, s3a://, abfss:// or gs:// input is checked with the
credentials and settings Spark reads it with.

- `data_files` lists the files Spark reads from the directory (Spark lists
  them);
- `read_footers` reads each file's footer (its tail: a few KB, never the
  data) on the driver, in threads: the footers of thousands of files on an
  object store cost their round trips, which threads overlap;
- `rows_read` decodes every row group of the columns the job reads, on the
  executors, with Spark's own Parquet reader (the reader the job uses) told to
  skip what it cannot decode, and counts the rows each file gave; a file that
  gave fewer than its footer counts has a row group that cannot be decoded.
  It is one more read of those columns of the whole input.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Mapping, Sequence
from urllib.parse import unquote

from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import paths
from .input_check import KNOWN, FileFacts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FOOTER_THREADS = 16      # footers read at once: round trips to an object store overlap
# Parquet's page checksums (CRC32, written by pyarrow's write_page_checksum and parquet-mr) are
# verified when present: a flipped bit in compressed text otherwise decodes to other text, silently.
VERIFY_OPTIONS = {"ignoreCorruptFiles": "true", "parquet.page.verify-checksum.enabled": "true"}
_NULL_TYPED = re.compile(r"^\s+(?:optional|required|repeated) \w+ (.+?) \(UNKNOWN\);$", re.M)
_GLOB = re.compile(r"([\\{}\[\]*?])")


def data_files(spark: "SparkSession", path: str) -> tuple[str | None, list[str]]:
    """(the directory, the data files Spark reads from it) as Hadoop path strings, sorted;
    (None, [path]) for a file.

    Spark lists them (the binaryFile source, its content never read), so the files checked are
    the files a Parquet read of the directory reads: its own rules for hidden names (_SUCCESS,
    .crc, _temporary), partition directories (key=value) and subdirectories that are not
    partitions (skipped); a listing in parallel on the executors for many directories; one
    collect instead of a JVM call per file.
    """
    jvm = spark.sparkContext._jvm
    with paths.store_errors(path):
        root = jvm.org.apache.hadoop.fs.Path(paths.qualified(path))
        fs = root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        root = fs.makeQualified(root)
        if fs.getFileStatus(root).isFile():
            return None, [root.toString()]
        listed = spark.read.format("binaryFile").load(spark_path(root.toString())).select("path").collect()
    return root.toString(), sorted(r["path"] for r in listed)


def partition_values(root: str, path: str) -> dict[str, str]:
    """The key=value directories between root and path (a partitioned snapshot's columns)."""
    rel = path[len(root.rstrip("/")) + 1:] if path.startswith(root.rstrip("/") + "/") else ""
    parts = [p.split("=", 1) for p in rel.split("/")[:-1] if "=" in p]
    return {k.lower(): unquote(v) for k, v in parts}


def root_cause(exc: BaseException) -> str:
    """The reason behind a Java failure, one line: the first exception of its cause chain that is not
    Spark's wrapper (FAILED_READ_FILE names the file, not the damage), without package names."""
    jexc = getattr(exc, "java_exception", None)
    chain = []
    for _ in range(20):
        if jexc is None:
            break
        try:
            chain.append(str(jexc.toString()))
            jexc = jexc.getCause()
        except Exception:
            break
    reasons = [c for c in chain if not c.startswith("org.apache.spark.SparkException")] or chain or [str(exc)]
    first = (reasons[0].strip().splitlines() or [type(exc).__name__])[0]
    return re.sub(r"^(?:[a-z_]\w*\.)+(\w+(?:Exception|Error)): ", r"\1: ", first)[:300]


def _footer(jvm, hconf, converter, path: str, partitions: Mapping[str, str]) -> FileFacts:
    parquet = jvm.org.apache.parquet.hadoop
    spark_parquet = jvm.org.apache.spark.sql.execution.datasources.parquet
    try:
        hpath = jvm.org.apache.hadoop.fs.Path(path)
        reader = parquet.ParquetFileReader.open(parquet.util.HadoopInputFile.fromPath(hpath, hconf))
        try:
            footer = reader.getFooter()
        finally:
            reader.close()
        blocks = footer.getBlocks()
        row_groups = tuple(int(blocks.get(i).getRowCount()) for i in range(blocks.size()))
        # Spark's own conversion (and its row metadata when Spark wrote the file): the types the job reads.
        schema = T.StructType.fromJson(json.loads(
            spark_parquet.ParquetFileFormat.readSchemaFromFooter(parquet.Footer(hpath, footer), converter).json()))
        null_typed = set(_NULL_TYPED.findall(str(footer.getFileMetaData().getSchema().toString())))
    except Exception as exc:   # Py4JJavaError: not Parquet, truncated, a type Spark cannot read
        return FileFacts(path, error=root_cause(exc))
    # A column of Parquet type null (pyarrow's all-null column, read by Spark as int) is there, typeless.
    columns = {f.name.lower(): T.NullType() if f.name in null_typed else f.dataType for f in schema.fields
               if f.name.lower() in KNOWN}
    for key, _ in partitions.items():
        if key in KNOWN and key not in columns:
            columns[key] = T.StringType()
    return FileFacts(path, columns, tuple(f.name for f in schema.fields), row_groups)


def read_footers(spark: "SparkSession", files: Sequence[str], root: str | None = None) -> list[FileFacts]:
    """Every file's footer, read in FOOTER_THREADS threads on the driver (footers only, never data)."""
    jvm = spark.sparkContext._jvm
    hconf = spark.sparkContext._jsc.hadoopConfiguration()
    # Stateless: one for all threads.
    converter = jvm.org.apache.spark.sql.execution.datasources.parquet.ParquetToSparkSchemaConverter(
        spark._jsparkSession.sessionState().conf())
    with ThreadPoolExecutor(max_workers=max(1, min(FOOTER_THREADS, len(files)))) as pool:
        return list(pool.map(lambda f: _footer(jvm, hconf, converter, f, partition_values(root or "", f)), files))


def spark_path(path: str) -> str:
    """path for spark.read: glob characters escaped (Spark expands globs in the paths it is given)."""
    return _GLOB.sub(r"\\\1", path)


def _read_known(spark: "SparkSession", facts: Sequence[FileFacts], options: Mapping[str, str]) -> "DataFrame":
    """The files (one schema) with the known columns they hold and where each row came from."""
    cols = [c for c in facts[0].all_columns
            if c.lower() in facts[0].columns and not isinstance(facts[0].columns[c.lower()], T.NullType)]
    df = spark.read.options(**options).parquet(*[spark_path(f.path) for f in facts])
    return df.select(*[F.col(f"`{c}`") for c in cols],
                     F.col("_metadata.file_path").alias("_file"), F.col("_metadata.row_index").alias("_row"))


def by_schema(facts: Sequence[FileFacts]) -> list[list[FileFacts]]:
    groups: dict[tuple, list[FileFacts]] = {}
    for f in facts:
        groups.setdefault(tuple(f.all_columns) + tuple(t.json() for t in f.columns.values()), []).append(f)
    return list(groups.values())


def rows_read(spark: "SparkSession", facts: Sequence[FileFacts]) -> dict[str, int]:
    """path -> rows Spark's reader could decode from it (all columns the job reads), one Spark job.

    The reader skips the rest of a split at a row group it cannot decode (ignoreCorruptFiles), so
    a short count locates the damage; hashing every column makes the reader decode every page.
    """
    if not facts:
        return {}
    frames = []
    for group in by_schema(facts):
        df = _read_known(spark, group, VERIFY_OPTIONS)
        known = [c for c in df.columns if not c.startswith("_")]
        frames.append(df.select("_file", F.hash(*known).alias("_h")))
    union = frames[0]
    for df in frames[1:]:
        union = union.unionByName(df)
    counts = union.groupBy("_file").agg(F.count("*").alias("n"), F.sum("_h").alias("h")).collect()
    return {unquote(r["_file"]): int(r["n"]) for r in counts}


def rows_read_per_row_group(spark: "SparkSession", facts: FileFacts) -> dict[int, int]:
    """row group -> rows Spark's reader could decode from it, for one file (one whose count fell short)."""
    starts = [sum(facts.row_groups[:i]) for i in range(len(facts.row_groups))]
    df = _read_known(spark, [facts], VERIFY_OPTIONS)
    known = [c for c in df.columns if not c.startswith("_")]
    group = F.size(F.filter(F.array(*[F.lit(s) for s in starts]), lambda s: s <= F.col("_row"))) - 1
    # The hash makes the reader decode the columns (counting rows alone reads none of them).
    rows = df.groupBy(group.alias("g")).agg(F.count("*").alias("n"), F.sum(F.hash(*known)).alias("h")).collect()
    return {int(r["g"]): int(r["n"]) for r in rows}


def decode_failure(spark: "SparkSession", facts: FileFacts) -> str | None:
    """Why Spark's reader cannot decode a file (its innermost Java exception), None if it now can."""
    df = _read_known(spark, [facts], {"parquet.page.verify-checksum.enabled": "true"})
    known = [c for c in df.columns if not c.startswith("_")]
    try:
        df.select(F.sum(F.hash(*known))).collect()
    except Exception as exc:
        return root_cause(exc)
    return None
