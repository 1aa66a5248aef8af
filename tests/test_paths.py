"""Paths as Hadoop URIs: joining, local/remote, and store failures as one line."""

from __future__ import annotations

import pytest

from newsdedup.io import paths, store
from newsdedup.io.spark import packages_for


@pytest.mark.parametrize("base, parts, expected", [
    ("s3a://archive/dedup", ("documents",), "s3a://archive/dedup/documents"),
    ("s3a://archive/dedup/", ("_runs", "r1", "_steps"), "s3a://archive/dedup/_runs/r1/_steps"),
    ("abfss://c@acct.dfs.core.windows.net/x", ("runs",), "abfss://c@acct.dfs.core.windows.net/x/runs"),
    ("file:///tmp/out", ("runs",), "file:///tmp/out/runs"),
    ("out/sample", ("runs",), "out/sample/runs"),
    ("/", ("runs",), "/runs"),
])
def test_join_keeps_the_scheme(base, parts, expected):
    assert paths.join(base, *parts) == expected


def test_table_path_of_a_uri_is_not_mangled_by_pathlib():
    assert store.table_path("s3a://archive/dedup", "documents") == "s3a://archive/dedup/documents"
    assert store.table_path("gs://b/x", "runs") == "gs://b/x/runs"


def test_local_or_remote():
    assert paths.is_local("out") and paths.is_local("file:///tmp/x") and not paths.is_local("s3a://b/x")
    assert paths.local_path("file:///tmp/x") == "/tmp/x"
    assert paths.schemes(["s3a://a/b", None, "/tmp/x", "S3A://c"]) == {"s3a"}


def test_connectors_are_added_only_for_the_schemes_used(conf):
    assert packages_for(conf, ["/tmp/in", "out"]) == []
    s3 = packages_for(conf, ["s3a://b/in", "s3a://b/out"])
    assert len(s3) == 1 and s3[0].startswith("org.apache.hadoop:hadoop-aws:3.")   # the installed Hadoop
    extra = conf.with_overrides({"spark": {"packages": ["org.example:thing:1.0"]}})
    assert packages_for(extra, ["/tmp/in"]) == ["org.example:thing:1.0"]


@pytest.mark.parametrize("java_text, expected", [
    ("java.net.ConnectException: Connection refused ... Unable to execute HTTP request", "cannot reach the object store"),
    ("org.apache.hadoop.fs.s3a.auth.NoAuthWithAWSException: No AWS Credentials provided", "no credentials"),
    ("java.nio.file.AccessDeniedException: s3a://b/x: org.apache.hadoop.fs.s3a.auth.NoAwsCredentialsException: "
     "SimpleAWSCredentialsProvider: No AWS credentials in the Hadoop configuration", "no credentials"),
    ("AccessDeniedException: s3a://b/x: getFileStatus on ... 403 Forbidden", "access denied"),
    ("java.lang.ClassNotFoundException: Class org.apache.hadoop.fs.s3a.S3AFileSystem not found", "no Hadoop connector"),
    ("org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme \"s3a\"", "no Hadoop connector"),
])
def test_store_failures_become_one_line(java_text, expected):
    message = paths.describe_store_error("s3a://b/x", java_text)
    assert message is not None and expected in message and "\n" not in message


def test_an_unrelated_java_error_is_left_alone():
    assert paths.describe_store_error("s3a://b/x", "java.lang.ArithmeticException: / by zero") is None


def test_an_existing_foreign_directory_is_not_an_output(spark, tmp_path):
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff")
    with pytest.raises(store.NotAnOutputError, match="is not a newsdedup output"):
        store.check_new_or_ours(spark, str(tmp_path / "photos"))
    store.check_new_or_ours(spark, str(tmp_path / "new"))          # absent: fine
    (tmp_path / "empty").mkdir()
    store.check_new_or_ours(spark, str(tmp_path / "empty"))        # empty: fine
    with pytest.raises(store.NotAnOutputError, match="no Delta table 'duplicate_links'"):
        store.check_is_output(spark, str(tmp_path / "empty"))
