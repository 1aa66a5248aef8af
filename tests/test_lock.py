"""One writer per output: a second run fails fast, stale locks are taken over, the first run's result is intact."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from newsdedup.config import load_config
from newsdedup.io import lock, store

from conftest import REPO, SAMPLE

CONF = load_config().lock


def _foreign_lock(out: Path, age_s: float = 0, host: str = "elsewhere", pid: int = 1) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / lock.LOCK_NAME
    path.write_text(json.dumps({"user": "u", "host": host, "pid": pid, "command": "newsdedup run",
                                "started_at": "2026-01-01T00:00:00+00:00", "token": "foreign"}))
    past = time.time() - age_s
    os.utime(path, (past, past))
    return path


def test_a_live_lock_is_refused_with_its_owner(tmp_path):
    _foreign_lock(tmp_path / "out", age_s=5)
    with pytest.raises(lock.OutputLocked, match=r"in use: newsdedup run by u@elsewhere \(pid 1"):
        lock.acquire(str(tmp_path / "out"), CONF, "newsdedup run")


def test_a_lock_without_heartbeat_is_taken_over(tmp_path):
    path = _foreign_lock(tmp_path / "out", age_s=CONF.stale_after_s + 5)
    held = lock.acquire(str(tmp_path / "out"), CONF, "newsdedup run")
    try:
        assert json.loads(path.read_text())["token"] == held.token
        held.ensure_held()
    finally:
        lock.release(held)
    assert not path.exists()


def test_a_lock_of_a_dead_process_on_this_host_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = _foreign_lock(tmp_path / "out", age_s=1, host=socket.gethostname(), pid=dead.pid)
    held = lock.acquire(str(tmp_path / "out"), CONF, "newsdedup run")
    try:
        owner = json.loads(path.read_text())
        assert owner["token"] == held.token != "foreign"
        assert (owner["host"], owner["pid"], owner["command"]) == (socket.gethostname(), os.getpid(), "newsdedup run")
        held.ensure_held()
    finally:
        lock.release(held)
    assert not path.exists()


def test_a_live_process_on_this_host_keeps_its_lock(tmp_path):
    """Same host, process alive (this one), heartbeat fresh: refused, and the file is left as it was."""
    path = _foreign_lock(tmp_path / "out", age_s=1, host=socket.gethostname(), pid=os.getpid())
    before = path.read_text()
    with pytest.raises(lock.OutputLocked, match=rf"pid {os.getpid()}"):
        lock.acquire(str(tmp_path / "out"), CONF, "newsdedup run")
    assert path.read_text() == before


def _wait_until(check, what, timeout=30.0):
    """Poll for an event (no bound on how soon it must come, only a generous timeout for a stuck thread)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_the_heartbeat_touches_the_lock_and_notices_a_takeover(tmp_path):
    fast = load_config(overrides={"lock": {"heartbeat_s": 0.05, "stale_after_s": 600}}).lock
    held = lock.acquire(str(tmp_path / "out"), fast, "newsdedup run")
    path = held.path
    try:
        past = time.time() - 3600
        os.utime(path, (past, past))
        _wait_until(lambda: path.stat().st_mtime > past + 1800, "the heartbeat never touched the lock")
        assert json.loads(path.read_text())["token"] == held.token and not held.lost
        held.ensure_held()
        _foreign_lock(tmp_path / "out")                      # taken over while this run stalled
        _wait_until(lambda: held.lost, "the heartbeat never noticed the foreign token")
        mtime = path.stat().st_mtime
        time.sleep(0.3)                                      # six heartbeats: the thread has stopped touching
        assert path.stat().st_mtime == mtime
        with pytest.raises(lock.OutputLocked, match="lost the lock"):
            held.ensure_held()
    finally:
        lock.release(held)
    assert json.loads(path.read_text())["token"] == "foreign"   # release leaves the new owner's file


def test_a_run_whose_lock_was_taken_over_refuses_to_commit(tmp_path):
    held = lock.acquire(str(tmp_path / "out"), CONF, "newsdedup run")
    try:
        _foreign_lock(tmp_path / "out")   # another process replaced it after we stalled
        with pytest.raises(lock.OutputLocked, match="lost the lock"):
            held.ensure_held()
    finally:
        lock.release(held)
    assert (tmp_path / "out" / lock.LOCK_NAME).exists()   # the new owner's file is left alone


def test_holding_is_reentrant_in_one_process(tmp_path):
    with lock.hold(str(tmp_path / "out"), CONF, "a") as outer:
        with lock.hold(str(tmp_path / "out"), CONF, "b") as inner:
            assert inner is outer
        assert (tmp_path / "out" / lock.LOCK_NAME).exists()
    assert not (tmp_path / "out" / lock.LOCK_NAME).exists()


@pytest.mark.slow
def test_a_second_run_is_refused_without_starting_spark_and_the_first_is_intact(spark, conf, tmp_path):
    """This process holds the lock (the first run); a second `newsdedup run` on the output is refused
    before it starts a JVM (JAVA_HOME points nowhere), then the first run writes its output."""
    from newsdedup import job

    out = tmp_path / "out"
    cfg = tmp_path / "c.yaml"
    cfg.write_text("spark: {shuffle_partitions: 2, delta_snapshot_partitions: 1}\n")
    cmd = [sys.executable, "-m", "newsdedup.cli", "run", "--input", str(SAMPLE), "--output", str(out),
           "--no-postgres", "--conf", str(cfg)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "lib"), "JAVA_HOME": str(tmp_path / "no-java"),
           "PATH": str(Path(sys.executable).parent)}
    with lock.hold(str(out), CONF, "newsdedup run") as first:
        owner = (out / lock.LOCK_NAME).read_text()
        second = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        assert second.returncode == 2, second.stderr
        assert "is in use: newsdedup run by" in second.stderr and f"pid {os.getpid()}" in second.stderr
        assert second.stderr.count("\n") == 1 and second.stdout == ""
        assert (out / lock.LOCK_NAME).read_text() == owner
        first.ensure_held()
        report = job.run(spark, str(SAMPLE), str(out), conf, load_pg=False)   # re-entrant: the same lock
    assert report.counts["documents"] == store.read(spark, str(out), "documents").count() == 38
    assert len(list((out / "reports").glob("*.json"))) == 1
    assert not (out / lock.LOCK_NAME).exists()
