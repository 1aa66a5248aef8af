"""SparkSession construction for both spark-submit and plain-python runs.

Plain `newsdedup`/python: we start the JVM, so we choose the master, the
local sizes from conf.spark and the jars (Delta, plus the connector of each
object store a path names, fetched by Ivy). Unless --verbose, the JVM's
stderr (Ivy's resolution log, Spark's INFO/WARN lines) goes to a log file.

Under spark-submit the JVM already runs: master, resources, jars and shuffle
partitions are spark-submit's; we only add defaults it did not set (adaptive
query execution with partition coalescing, so shuffles follow the data size).
"""

from __future__ import annotations

import glob
import os
import re
import sys
import tempfile
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Iterable

from pyspark.sql import SparkSession

from . import paths

if TYPE_CHECKING:
    from ..config import Config

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def under_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands the Python driver its gateway port."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def verbose() -> bool:
    return os.environ.get("NEWSDEDUP_VERBOSE", "") not in ("", "0")


def hadoop_version() -> str | None:
    """The Hadoop of the installed pyspark (from its hadoop-client-api jar): connectors must match it."""
    from pyspark.find_spark_home import _find_spark_home

    for jar in glob.glob(os.path.join(_find_spark_home(), "jars", "hadoop-client-api-*.jar")):
        m = re.search(r"hadoop-client-api-([\d.]+)\.jar$", jar)
        if m:
            return m.group(1)
    return None


def packages_for(conf: "Config", path_list: Iterable[str | None]) -> list[str]:
    """Maven coordinates to add: spark.packages always, spark.scheme_packages for the schemes used."""
    sc = conf.spark
    wanted = list(sc.packages)
    for scheme in sorted(paths.schemes(path_list)):
        wanted += sc.scheme_packages.get(scheme, [])
    version = hadoop_version() or ""
    out = []
    for coord in wanted:
        coord = coord.replace("{hadoop}", version)
        if coord not in out:
            out.append(coord)
    return out


# SQL settings applied under spark-submit too, unless spark-submit (or spark-defaults.conf) set them:
# adaptive execution and the Parquet codec.
def session_defaults(conf: "Config") -> dict[str, str]:
    return {
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        # Coalesce to the advisory size rather than to the most parallel split of tiny partitions.
        "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": conf.spark.advisory_partition_size,
        # The job caches its prepared documents and links; without this, cached plans keep all
        # spark.sql.shuffle.partitions (a spark-submit run wrote the 37 sample rows as 35 files).
        "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
        "spark.sql.parquet.compression.codec": conf.spark.parquet_compression,
    }


@contextmanager
def _jvm_output_to(log_path: str | None):
    """The JVM pyspark launches inherits our fds 1 and 2: point them at log_path while it starts."""
    if log_path is None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def spark_log_path() -> str:
    folder = os.path.join(tempfile.gettempdir(), "newsdedup-logs")
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"spark-{datetime.now():%Y%m%dT%H%M%S}-{os.getpid()}.log")


def get_spark(conf: "Config", app_name: str = "newsdedup", path_list: Iterable[str | None] = ()) -> SparkSession:
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    sc = conf.spark
    loud = verbose()
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.extensions", DELTA_EXTENSION)
        .config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.showConsoleProgress", str(loud and sys.stderr.isatty()).lower())
    )
    submitted = under_spark_submit()
    if not submitted:
        # Local run: we choose the master, local sizes, and fetch the jars from Maven ourselves.
        if sc.master.startswith("local"):
            # Local workers run on this machine: the interpreter running us has newsdedup and its
            # dependencies, the first python3 on PATH may not (workers then fail to unpickle).
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (builder.master(sc.master)
                   .config("spark.sql.shuffle.partitions", str(sc.shuffle_partitions))
                   .config("spark.databricks.delta.snapshotPartitions", str(sc.delta_snapshot_partitions))
                   .config("spark.ui.enabled", "false")
                   .config("spark.driver.memory", sc.driver_memory)
                   # The job addresses every table by path; a SQL command (OPTIMIZE, ALTER TABLE on
                   # delta.`path`) would still create ./spark-warehouse wherever the user stands.
                   .config("spark.sql.warehouse.dir", os.path.join(tempfile.gettempdir(), "newsdedup-warehouse")))
    for key, value in sc.extra.items():
        builder = builder.config(key, str(value))
    log_path = None
    if not submitted:
        from delta import configure_spark_with_delta_pip

        builder = configure_spark_with_delta_pip(builder, extra_packages=packages_for(conf, path_list))
        log_path = None if loud else spark_log_path()
    with _jvm_output_to(log_path):
        spark = builder.getOrCreate()
    given = spark.sparkContext.getConf()
    for key, value in session_defaults(conf).items():
        if not given.contains(key):
            spark.conf.set(key, value)
    level = os.environ.get("NEWSDEDUP_SPARK_LOG") or ("INFO" if loud else "WARN" if log_path else "ERROR")
    spark.sparkContext.setLogLevel(level)
    if log_path:
        from .. import progress

        progress.line(f"Spark and Ivy log: {log_path} (--verbose shows it here)")
    return spark
