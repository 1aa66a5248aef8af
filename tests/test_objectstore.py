"""The job on object storage: input and output on s3a:// against a real S3-compatible server.

moto's server mode runs on 127.0.0.1; Spark reaches it through hadoop-aws (the
version of the installed pyspark's Hadoop, fetched by Ivy because the paths
are s3a://). Every command runs as a person runs it: the `newsdedup`
executable in a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import uuid

import psycopg
import pytest

from servers import free_port, moto_s3, newsdedup

from conftest import SAMPLE

pytestmark = pytest.mark.objectstore

BUCKET = "archive"


def s3_conf(endpoint: str, keys: bool = True) -> str:
    extra = {
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        # Fail fast in tests: one attempt, short timeouts (the defaults retry for minutes).
        "spark.hadoop.fs.s3a.attempts.maximum": "1",
        "spark.hadoop.fs.s3a.retry.limit": "1",
        "spark.hadoop.fs.s3a.connection.establish.timeout": "15s",
        "spark.hadoop.fs.s3a.connection.timeout": "20s",
        "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }
    if keys:
        extra.update({"spark.hadoop.fs.s3a.access.key": "testing", "spark.hadoop.fs.s3a.secret.key": "testing"})
    return json.dumps({"spark": {"shuffle_partitions": 2, "delta_snapshot_partitions": 1, "extra": extra}})


def write_conf(tmp, endpoint, keys=True):
    path = tmp / f"s3-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(s3_conf(endpoint, keys))   # JSON is YAML
    return str(path)


def clean_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def report_counts(stdout: str) -> dict[str, str]:
    return dict(re.findall(r"^(\S+)\s+(\S+)$", stdout, flags=re.M))


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    import boto3

    logs = tmp_path_factory.mktemp("moto")
    with moto_s3(logs) as endpoint:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        client.create_bucket(Bucket=BUCKET)
        client.upload_file(str(SAMPLE), BUCKET, "snapshot/articles.parquet")
        yield endpoint, client


@pytest.fixture(scope="module")
def first_run(s3, module_pg_dsn, tmp_path_factory):
    endpoint, client = s3
    work = tmp_path_factory.mktemp("s3work")
    conf = write_conf(work, endpoint)
    done = newsdedup(["run", "--input", f"s3a://{BUCKET}/snapshot/articles.parquet",
                      "--output", f"s3a://{BUCKET}/dedup", "--conf", conf, "--pg", module_pg_dsn],
                     env=clean_env(), cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    return conf, work, done


def pg_links(dsn):
    with psycopg.connect(dsn) as c:
        return sorted(c.execute("SELECT duplicate_id, canonical_id, stage, reverted_at IS NOT NULL "
                                "FROM duplicate_links").fetchall())


def keys(client, prefix):
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for p in pages for o in p.get("Contents", [])]


def test_run_writes_delta_tables_to_the_bucket_and_nothing_locally(s3, first_run, module_pg_dsn):
    _, client = s3
    conf, work, done = first_run
    counts = report_counts(done.stdout)
    assert counts["links.url"] == "12" and counts["links.content"] == "9"
    for table in ("documents", "duplicate_links", "quarantine", "runs"):
        assert any(k.startswith(f"dedup/{table}/_delta_log/") for k in keys(client, f"dedup/{table}/")), table
    # The checkpoints went under the output too (the session's directory is there), and the run
    # removed its own when it ended; nothing landed on the local disk (no 's3a:' directory).
    left = keys(client, "dedup/_checkpoints/")
    assert left and not [k for k in left if "/rdd-" in k], left
    assert sorted(p.name for p in work.iterdir()) == [os.path.basename(conf)]
    assert len(pg_links(module_pg_dsn)) == int(counts["links.total"])
    # One line per step on stderr, the Ivy/Spark log hidden.
    assert re.search(r"simhash: done in [\d.]+s: \d+ links, \d+ documents left", done.stderr)
    assert ":: resolving dependencies" not in done.stderr and "INFO" not in done.stderr


def test_second_run_on_the_same_output_adds_nothing(s3, first_run, module_pg_dsn):
    conf, work, _ = first_run
    before = pg_links(module_pg_dsn)
    again = newsdedup(["run", "--input", f"s3a://{BUCKET}/snapshot/articles.parquet",
                       "--output", f"s3a://{BUCKET}/dedup", "--conf", conf, "--pg", module_pg_dsn],
                      env=clean_env(), cwd=work)
    assert again.returncode == 0, again.stderr[-3000:]
    assert report_counts(again.stdout)["postgres.inserted"] == "0"
    assert pg_links(module_pg_dsn) == before


def test_revert_stats_and_load_on_s3a(s3, first_run, module_pg_dsn):
    conf, work, done = first_run
    out = f"s3a://{BUCKET}/dedup"
    n_url = int(report_counts(done.stdout)["links.url"])
    rev = newsdedup(["revert", "--output", out, "--conf", conf, "--pg", module_pg_dsn, "--stage", "url",
                     "--reason", "s3 test"], env=clean_env(), cwd=work)
    assert rev.returncode == 0, rev.stderr[-3000:]
    assert f"reverted: delta={n_url} postgres={n_url}" in rev.stdout

    stats = newsdedup(["stats", "--output", out, "--conf", conf, "--stage", "url", "--json"],
                      env=clean_env(), cwd=work)
    assert stats.returncode == 0, stats.stderr[-3000:]
    daily = json.loads(stats.stdout)["daily"]
    assert sum(d["reverted"] for d in daily) == n_url and sum(d["active"] for d in daily) == 0

    # A load from the s3a Delta table into a fresh database brings every link, reverts included.
    with psycopg.connect(module_pg_dsn, autocommit=True) as c:
        c.execute("DELETE FROM duplicate_links")
    load = newsdedup(["load", "--output", out, "--conf", conf, "--pg", module_pg_dsn], env=clean_env(), cwd=work)
    assert load.returncode == 0, load.stderr[-3000:]
    links = pg_links(module_pg_dsn)
    assert len(links) == int(report_counts(done.stdout)["links.total"])
    assert sum(1 for *_, reverted in links if reverted) == n_url


def one_line_error(done):
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Py4JJavaError" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("newsdedup: error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    return errors[0]


def test_unreachable_object_store_is_one_line(s3, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"     # nothing listens there
    done = newsdedup(["run", "--input", f"s3a://{BUCKET}/snapshot/articles.parquet", "--output",
                      f"s3a://{BUCKET}/x", "--conf", write_conf(tmp_path, dead), "--no-postgres"],
                     env=clean_env(), cwd=tmp_path)
    assert "cannot reach the object store" in one_line_error(done)


def test_missing_credentials_are_one_line(s3, tmp_path):
    endpoint, _ = s3
    done = newsdedup(["stats", "--output", f"s3a://{BUCKET}/dedup", "--conf",
                      write_conf(tmp_path, endpoint, keys=False)], env=clean_env(), cwd=tmp_path)
    assert "no credentials" in one_line_error(done)


def test_an_output_that_is_not_ours_is_refused(s3, tmp_path):
    endpoint, client = s3
    client.put_object(Bucket=BUCKET, Key="photos/cat.jpg", Body=b"\xff\xd8")
    conf = write_conf(tmp_path, endpoint)
    run = newsdedup(["run", "--input", f"s3a://{BUCKET}/snapshot/articles.parquet", "--output",
                     f"s3a://{BUCKET}/photos", "--conf", conf, "--no-postgres"], env=clean_env(), cwd=tmp_path)
    assert "is not a newsdedup output" in one_line_error(run)
    assert keys(client, "photos/") == ["photos/cat.jpg"]      # nothing written next to it
    stats = newsdedup(["stats", "--output", f"s3a://{BUCKET}/photos", "--conf", conf],
                      env=clean_env(), cwd=tmp_path)
    assert "is not a newsdedup output" in one_line_error(stats)
