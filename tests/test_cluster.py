"""spark-submit on a real standalone cluster (a master and two workers on 127.0.0.1) gives the links of
a local-mode run on the same input.

Executors get the Python dependencies the way the README documents for nodes
with the packages installed: spark.pyspark.python points at a Python that has
them (here this virtualenv; on one machine that *is* "installed on the
nodes"), and the job's own code travels in dist/newsdedup.zip via --py-files.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from newsdedup import job
from newsdedup.io import store

from conftest import SAMPLE
from servers import REPO, VENV_BIN, standalone_cluster

pytestmark = pytest.mark.cluster

DELTA_PACKAGE = "io.delta:delta-spark_4.2_2.13:4.4.0"


def spark_submit(master: str, out: str, log_dir) -> subprocess.CompletedProcess:
    python = sys.executable
    cmd = [
        str(VENV_BIN / "spark-submit"), "--master", master,
        "--packages", DELTA_PACKAGE,
        "--conf", "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
        "--conf", "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "--conf", f"spark.pyspark.python={python}",
        "--conf", f"spark.pyspark.driver.python={python}",
        "--driver-memory", "1g", "--executor-memory", "768m",
        "--executor-cores", "1", "--total-executor-cores", "2",
        "--py-files", "dist/newsdedup.zip",
        "jobs/dedup.py", "--input", str(SAMPLE), "--output", out, "--no-postgres",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("PYSPARK_PYTHON", None)   # the executors' Python comes from spark.pyspark.python, as documented
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)


def links(spark, out):
    return sorted((r.duplicate_id, r.canonical_id, r.stage, r.score)
                  for r in store.read(spark, out, "duplicate_links").collect())


def test_spark_submit_on_a_standalone_cluster_matches_local_mode(spark, conf, tmp_path):
    subprocess.run(["bash", "scripts/package.sh"], cwd=REPO, check=True, capture_output=True)
    logs = tmp_path / "cluster-logs"
    (logs / "work").mkdir(parents=True)
    out = str(tmp_path / "cluster-out")
    with standalone_cluster(logs, workers=2, cores=1, memory="1g") as master:
        done = spark_submit(master, out, logs)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "links.total" in done.stdout
    # Both workers ran executors for this application.
    app_dirs = list((logs / "work").glob("app-*/*"))
    assert len(app_dirs) >= 2, app_dirs

    # The same configuration as jobs/dedup.py ran with: the defaults, stage 4 on (the fixture turns it off).
    local = str(tmp_path / "local-out")
    job.run(spark, str(SAMPLE), local, conf.with_overrides({"semantic": {"enabled": True}}), load_pg=False)
    assert links(spark, out) == links(spark, local)
    # Every stage linked something on the cluster, stage 4 included (its vectors computed on the executors).
    assert {stage for _, _, stage, _ in links(spark, out)} == {"url", "content", "simhash", "semantic"}
