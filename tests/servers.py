"""Real servers the slow tests start on 127.0.0.1: moto's S3 server, a Spark standalone cluster.

Each is a subprocess on a free port, stopped (by its own pid) when the test module ends.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise TimeoutError(f"{what} did not come up within {timeout:.0f}s")


def stop(proc: subprocess.Popen) -> None:
    """Stop a server we started, and its children (own process group), by pid."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def moto_s3(log_dir: Path):
    """moto's S3-compatible server; yields its endpoint URL."""
    port = free_port()
    log = open(log_dir / "moto.log", "w")
    proc = subprocess.Popen([str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=2)
            return True
        except OSError:
            return False

    try:
        wait_for(up, 60, "moto S3 server")
        yield endpoint
    finally:
        stop(proc)
        log.close()


def spark_class() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return os.path.join(_find_spark_home(), "bin", "spark-class")


@contextmanager
def standalone_cluster(log_dir: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
    """A Spark standalone master and `workers` workers from the pyspark install; yields the master URL."""
    port, ui = free_port(), free_port()
    env = {**os.environ, "SPARK_LOG_DIR": str(log_dir), "SPARK_WORKER_DIR": str(log_dir / "work"),
           "SPARK_LOCAL_IP": "127.0.0.1"}
    procs = []

    def launch(name: str, *args: str) -> None:
        log = open(log_dir / f"{name}.log", "w")
        procs.append(subprocess.Popen([spark_class(), *args], stdout=log, stderr=subprocess.STDOUT,
                                      env=env, start_new_session=True))

    master = f"spark://127.0.0.1:{port}"
    launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
           "--webui-port", str(ui))

    def workers_alive() -> bool:
        try:
            import json

            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                return len([w for w in json.load(r)["workers"] if w["state"] == "ALIVE"]) == workers
        except OSError:
            return False

    try:
        wait_for(lambda: _port_open(port), 120, "Spark master")
        for i in range(workers):
            launch(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                   "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()), master)
        wait_for(workers_alive, 180, f"{workers} Spark workers")
        yield master
    finally:
        for proc in reversed(procs):
            stop(proc)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def newsdedup(args: list[str], env: dict | None = None, timeout: float = 900,
              cwd: Path = REPO) -> subprocess.CompletedProcess:
    """The `newsdedup` command of this virtualenv, as a person runs it."""
    return subprocess.run([str(VENV_BIN / "newsdedup"), *args], capture_output=True, text=True,
                          env=env or os.environ.copy(), timeout=timeout, cwd=cwd)
