"""Paths as Hadoop FileSystem URIs: s3a://, abfss://, gs://, hdfs://, file:// or a plain local path.

Every path the job touches goes through here. Joining is string work on the
URI (pathlib would turn `s3a://b/x` into `s3a:/b/x`); existence and listing
ask the Hadoop FileSystem of the path through the driver's JVM, so they see
the same store the executors write to. Java failures of the store (no route
to the endpoint, no credentials, no connector on the classpath) become
`ObjectStoreError`, a UserError with one readable line.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Iterable
from urllib.parse import urlsplit

from ..errors import UserError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# "scheme:/": Hadoop qualifies local paths as file:/tmp/x (one slash); two letters at least, so a
# drive letter is not taken for one.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")


class ObjectStoreError(UserError):
    """The store behind a path cannot be used: unreachable, no credentials, no connector."""


def scheme(path: str) -> str | None:
    """'s3a' for s3a://bucket/x; None for a plain local path."""
    m = _SCHEME.match(os.fspath(path))
    return m.group(1).lower() if m else None


def is_local(path: str) -> bool:
    return scheme(path) in (None, "file")


def local_path(path: str) -> str:
    """The local filesystem path of a plain path or a file:// URI."""
    path = os.fspath(path)
    if scheme(path) == "file":
        return urlsplit(path).path
    return path


def join(base: str, *parts: str) -> str:
    """base/part1/part2 for a URI or a local path; never collapses the '//' after the scheme."""
    out = os.fspath(base)
    for part in (p.strip("/") for p in parts):
        if part:
            out = out + part if out.endswith("/") else out + "/" + part
    return out


def qualified(path: str) -> str:
    """An absolute local path stays a path (resolved), a URI is returned as it is.

    Checkpoints and Delta tables are read back by executors, which do not share
    the driver's working directory.
    """
    return os.path.abspath(local_path(path)) if is_local(path) else os.fspath(path)


def schemes(paths: Iterable[str | None]) -> set[str]:
    return {s for s in (scheme(p) for p in paths if p) if s}


# ------------------------------------------------------------------ Hadoop FileSystem access


def _fs(spark: "SparkSession", path: str):
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(qualified(path))
    return hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hpath


def exists(spark: "SparkSession", path: str) -> bool:
    with store_errors(path):
        fs, hpath = _fs(spark, path)
        return bool(fs.exists(hpath))


def children(spark: "SparkSession", path: str) -> list[str]:
    """Names directly under path ([] when it does not exist)."""
    with store_errors(path):
        fs, hpath = _fs(spark, path)
        if not fs.exists(hpath):
            return []
        return sorted(st.getPath().getName() for st in fs.listStatus(hpath))


def delete(spark: "SparkSession", path: str) -> None:
    with store_errors(path):
        fs, hpath = _fs(spark, path)
        if fs.exists(hpath):
            fs.delete(hpath, True)


def write_text(spark: "SparkSession", path: str, text: str) -> None:
    """One small file at path (replaced if there), through the path's own FileSystem."""
    with store_errors(path):
        fs, hpath = _fs(spark, path)
        stream = fs.create(hpath, True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()


def read_text(spark: "SparkSession", path: str) -> str:
    """The whole of a small file at path, as UTF-8 text."""
    with store_errors(path):
        fs, hpath = _fs(spark, path)
        stream = fs.open(hpath)
        try:
            data = spark.sparkContext._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
        return bytes(data).decode("utf-8")


def is_delta(spark: "SparkSession", path: str) -> bool:
    """A Delta table at path (a _delta_log with a commit), on any Hadoop FileSystem."""
    from delta.tables import DeltaTable

    with store_errors(path):
        return bool(DeltaTable.isDeltaTable(spark, qualified(path)))


def check_reachable(spark: "SparkSession", path: str) -> None:
    """Ask the store about path once, so that a wrong endpoint or missing key fails early and clearly."""
    exists(spark, path)


# ------------------------------------------------------------------ errors


# A file system that refuses a write, as Java reports it: java.io's "(reason)" after the file,
# java.nio's "file: reason", Hadoop's "Mkdirs failed to create", Delta's DELTA_CANNOT_CREATE_LOG_PATH.
_REFUSALS = ("Read-only file system", "Permission denied", "No space left on device", "Disk quota exceeded")
_REFUSED_FILE = re.compile(r"(?:java\.io\.|java\.nio\.file\.)\w+Exception: (\S+?):? \(?(" + "|".join(_REFUSALS) + r")\)?")
_NOT_CREATED = re.compile(r"(?:Mkdirs failed to create|\[DELTA_CANNOT_CREATE_LOG_PATH\] Cannot create) (\S+)")


def describe_unwritable(path: str, text: str) -> str | None:
    """One line for a write the local file system refused (read-only, permissions, full), naming
    the file; None when text shows no such refusal."""
    def shown(file: str) -> str:   # Hadoop writes file:/x as well as file:///x
        return re.sub(r"^file:(//)?", "", file)

    m = _REFUSED_FILE.search(text)
    if m:
        return f"cannot write {shown(m.group(1))}: {m.group(2).lower()}"
    m = _NOT_CREATED.search(text)
    if m:
        return (f"cannot create {shown(m.group(1))} (read-only, no permission or no space under "
                f"{path or 'the output'})")
    return None


def describe_store_error(path: str, text: str) -> str | None:
    """One line for a Java failure of the store behind path, or None when it is not one we know."""
    path = os.fspath(path) if path else ""
    where = f"{path}: " if path else ""
    if is_local(path or "/"):
        unwritable = describe_unwritable(path, text)
        if unwritable:
            return unwritable
    if "ClassNotFoundException" in text and "FileSystem" in text or "No FileSystem for scheme" in text:
        return (f"{where}no Hadoop connector for '{scheme(path)}://' on the classpath; add its jars "
                f"(spark.packages / spark.scheme_packages in the config, or --packages under spark-submit)")
    lowered = text.lower()
    # S3A reports missing keys as an AccessDeniedException wrapping NoAwsCredentialsException: check first.
    if any(k in lowered for k in ("noauthwithawsexception", "noawscredentialsexception", "no aws credentials",
                                  "unable to load credentials", "credentials provider")):
        return (f"{where}no credentials for the object store; set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
                f"or spark.hadoop.fs.s3a.access.key/secret.key (spark.extra in the config)")
    if any(k in text for k in ("AccessDenied", "403 Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch",
                               "Status Code: 403", "statusCode=403")):
        return f"{where}access denied by the object store: check the access key, secret and bucket policy"
    if "NoSuchBucket" in text or "UnknownStoreException" in text or "does not exist" in text and "Bucket" in text:
        return f"{where}the bucket does not exist"
    if any(k in text for k in ("UnknownHostException", "Connection refused", "ConnectException",
                               "Unable to execute HTTP request", "connect timed out", "ConnectTimeoutException",
                               "NoRouteToHostException", "SdkClientException")):
        return (f"{where}cannot reach the object store (endpoint {text_endpoint(text) or 'as configured'}); "
                f"check fs.s3a.endpoint and the network")
    return None


def text_endpoint(text: str) -> str | None:
    m = re.search(r"https?://[A-Za-z0-9.\-]+(:\d+)?", text)
    return m.group(0) if m else None


def java_failure_text(exc: BaseException) -> str | None:
    """The Java exception behind a Py4J/PySpark error and its causes, one per line; None if not from Java."""
    jexc = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    if jexc is None:
        return None
    parts = [str(exc)[:4000]]
    for _ in range(20):                  # the cause chain: S3A wraps the SDK's error, Delta wraps S3A's
        try:
            parts.append(str(jexc.toString()))
            jexc = jexc.getCause()
        except Exception:
            break
        if jexc is None:
            break
    return "\n".join(parts)


def describe_failure(path: str, exc: BaseException) -> str | None:
    text = java_failure_text(exc)
    return describe_store_error(path, text) if text else None


def describe_os_error(exc: BaseException) -> str | None:
    """One line for a Python write the file system refused (the lock, the JSON report); None otherwise."""
    import errno

    refused = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT)
    if isinstance(exc, OSError) and exc.errno in refused and exc.filename:
        return f"cannot write {exc.filename}: {exc.strerror.lower()}"
    return None


class store_errors:
    """Context manager: a Java failure of the store becomes ObjectStoreError with one line."""

    def __init__(self, path: str = ""):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None:
            return False
        message = describe_failure(self.path, exc)
        if message:
            raise ObjectStoreError(message) from None
        return False
