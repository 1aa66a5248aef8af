"""Progress a person can follow on stderr: one line per step start and finish, a live task line on a terminal.

Lines look like `[newsdedup 08:31:02] simhash: done in 4.1s: 3 links, 20 documents left`.
The report table on stdout is unchanged. On a terminal a background thread
rewrites one line with the running Spark stage and its task counts (Spark's
own console bar writes to the JVM's stderr, which is a log file unless
--verbose).
"""

from __future__ import annotations

import sys
import threading
from datetime import datetime, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_lock = threading.Lock()
_live = {"shown": False}


def line(text: str) -> None:
    with _lock:
        if _live["shown"]:
            sys.stderr.write("\r\033[K")
            _live["shown"] = False
        stamp = datetime.now(timezone.utc).strftime("%H:%M:%S")
        sys.stderr.write(f"[newsdedup {stamp}] {text}\n")
        sys.stderr.flush()


def started(step: str) -> None:
    line(f"{step}: started")


def finished(step: str, seconds: float, summary: str = "") -> None:
    line(f"{step}: done in {seconds:.1f}s" + (f": {summary}" if summary else ""))


class TaskLine:
    """On a terminal, show the active Spark stages' task progress on one rewritten line."""

    def __init__(self, spark: "SparkSession", every: float = 1.0):
        self.tracker = spark.sparkContext.statusTracker()
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="newsdedup-progress", daemon=True)

    def __enter__(self) -> "TaskLine":
        if sys.stderr.isatty():
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with _lock:
            if _live["shown"]:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
                _live["shown"] = False

    def text(self) -> str:
        parts = []
        for sid in sorted(self.tracker.getActiveStageIds()):
            info = self.tracker.getStageInfo(sid)
            if info is not None:
                parts.append(f"spark stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks"
                             + (f" ({info.numActiveTasks} running)" if info.numActiveTasks else ""))
        return "; ".join(parts)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                text = self.text()
            except Exception:  # the JVM is going away: stop quietly
                return
            with _lock:
                sys.stderr.write("\r\033[K" + text[:200])
                sys.stderr.flush()
                _live["shown"] = bool(text)
