"""SparkSession construction for both spark-submit and plain-python runs."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

if TYPE_CHECKING:
    from ..config import Config

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def under_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands the Python driver its gateway port."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_spark(conf: "Config", app_name: str = "newsdedup") -> SparkSession:
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    sc = conf.spark
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.extensions", DELTA_EXTENSION)
        .config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.databricks.delta.snapshotPartitions", str(sc.delta_snapshot_partitions))
    )
    if not under_spark_submit():
        # Local run: we choose the master and fetch the Delta jars from Maven ourselves.
        builder = (builder.master(sc.master)
                   .config("spark.sql.shuffle.partitions", str(sc.shuffle_partitions))
                   .config("spark.ui.enabled", "false")
                   .config("spark.driver.memory", sc.driver_memory))
    for key, value in sc.extra.items():
        builder = builder.config(key, str(value))
    if not under_spark_submit():
        from delta import configure_spark_with_delta_pip

        builder = configure_spark_with_delta_pip(builder)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("NEWSDEDUP_SPARK_LOG", "WARN"))
    return spark
