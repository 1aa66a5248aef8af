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
    _foreign_lock(tmp_path / "out", age_s=1, host=socket.gethostname(), pid=dead.pid)
    held = lock.acquire(str(tmp_path / "out"), CONF, "newsdedup run")
    lock.release(held)


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
def test_a_concurrent_second_run_fails_fast_and_the_first_is_intact(spark, tmp_path):
    out = tmp_path / "out"
    conf = tmp_path / "c.yaml"
    conf.write_text("spark: {shuffle_partitions: 2, delta_snapshot_partitions: 1}\n")
    cmd = [sys.executable, "-m", "newsdedup.cli", "run", "--input", str(SAMPLE), "--output", str(out),
           "--no-postgres", "--conf", str(conf)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "lib")}
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.time() + 120
        while not (out / lock.LOCK_NAME).exists():
            assert first.poll() is None and time.time() < deadline, "the first run never took the lock"
            time.sleep(0.2)
        t0 = time.time()
        second = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        waited = time.time() - t0
        assert second.returncode == 2, second.stderr
        assert "is in use: newsdedup run by" in second.stderr and f"pid {first.pid}" in second.stderr
        assert second.stderr.count("\n") == 1 and waited < 60   # no JVM was started to find out
        assert first.poll() is None, "the second run must be refused while the first still runs"
        _, err = first.communicate(timeout=900)
        assert first.returncode == 0, err[-3000:]
    finally:
        if first.poll() is None:
            first.kill()
    assert store.read(spark, str(out), "documents").count() == 38
    assert len(list((out / "reports").glob("*.json"))) == 1
    assert not (out / lock.LOCK_NAME).exists()
