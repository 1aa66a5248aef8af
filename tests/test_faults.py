"""Faults injected into a run: an output that turns read-only under it (its error is one line
naming the file, the output lock is let go without an error of its own)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest


def make_readonly(out: Path) -> None:
    """The output directory read-only for the running job: a read-only bind mount over it as root
    (root ignores permission bits), its permission bits otherwise."""
    if os.geteuid() == 0:
        subprocess.run(["mount", "--bind", str(out), str(out)], check=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(out)], check=True)
    else:
        subprocess.run(["chmod", "-R", "a-w", str(out)], check=True)


def make_writable(out: Path) -> None:
    if os.geteuid() == 0:
        # os.path.ismount cannot see a bind mount of a directory onto itself (same device).
        if subprocess.run(["mountpoint", "-q", str(out)]).returncode == 0:
            subprocess.run(["umount", str(out)], check=True)
    else:
        subprocess.run(["chmod", "-R", "u+w", str(out)], check=True)


def readonly_possible(tmp: Path) -> bool:
    probe = tmp / "ro-probe"
    probe.mkdir()
    try:
        make_readonly(probe)
    except (subprocess.CalledProcessError, FileNotFoundError):
        return False
    try:
        (probe / "x").write_text("x")
        return False
    except OSError:
        return True
    finally:
        make_writable(probe)



# What Spark, Hadoop and Delta raised when the output went read-only under a write (measured).
@pytest.mark.parametrize("java_text, expected", [
    ("org.apache.spark.sql.delta.DeltaIOException: [DELTA_CANNOT_CREATE_LOG_PATH] Cannot create "
     "file:/data/out/quarantine/_delta_log", "cannot create /data/out/quarantine/_delta_log (read-only"),
    ("Job aborted due to stage failure: Lost task 0.0 in stage 1.0 (TID 2) (192.0.2.2 executor driver): "
     "java.io.FileNotFoundException: /data/out/documents/part-00000-6c51.snappy.parquet (Read-only file system)",
     "cannot write /data/out/documents/part-00000-6c51.snappy.parquet: read-only file system"),
    ("java.io.FileNotFoundException: /data/out/x.parquet (Permission denied)",
     "cannot write /data/out/x.parquet: permission denied"),
    ("java.nio.file.AccessDeniedException: /data/out/_runs/r1/_steps: Permission denied",
     "cannot write /data/out/_runs/r1/_steps: permission denied"),
    ("java.io.IOException: Mkdirs failed to create file:/data/out/quarantine/_temporary (exists=false)",
     "cannot create /data/out/quarantine/_temporary"),
])
def test_a_refused_local_write_is_one_line_naming_the_file(java_text, expected):
    from newsdedup.io import paths

    message = paths.describe_store_error("/data/out", java_text)
    assert message is not None and message.startswith(expected) and "\n" not in message
    # On an object store the same words keep their object-store meaning.
    s3 = paths.describe_store_error("s3a://b/out", "java.nio.file.AccessDeniedException: s3a://b/out: 403 Forbidden")
    assert "access denied by the object store" in s3


def test_the_lock_of_an_output_that_turned_read_only_is_let_go_without_an_error(tmp_path):
    """Without this, the OSError of the lock file's removal replaced the run's own error (a
    traceback instead of the line that names the read-only file), and the heartbeat thread died
    with a traceback of its own."""
    from dataclasses import replace

    from newsdedup.config import load_config
    from newsdedup.io import lock

    if not readonly_possible(tmp_path):
        pytest.skip("no way to make a directory read-only here")
    out = tmp_path / "out"
    crashed: list = []
    previous, threading.excepthook = threading.excepthook, lambda args: crashed.append(args.exc_value)
    try:
        with pytest.raises(RuntimeError, match="the run's own error"):
            with lock.hold(str(out), replace(load_config().lock, heartbeat_s=0.05), "newsdedup run"):
                make_readonly(out)
                time.sleep(0.3)    # a few heartbeats on the read-only file
                raise RuntimeError("the run's own error")
    finally:
        threading.excepthook = previous
        make_writable(out)
    assert crashed == []
    assert (out / lock.LOCK_NAME).exists()    # left for the next run, which takes it over (pid gone)

