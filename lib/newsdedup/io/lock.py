"""One writer at a time per output directory: a lock file with its owner and a heartbeat.

`hold(output, conf.lock, "run")` creates `<output>/_newsdedup.lock` atomically
(O_EXCL) with the owner (user, host, pid, command, start time and a random
token) and touches it every `lock.heartbeat_s` from a daemon thread. A second
run on the same output finds the file and stops at once with an
`OutputLocked` error (exit code 2) naming the owner; the first run is not
disturbed.

Stale-lock takeover: a lock whose heartbeat (mtime) is older than
`lock.stale_after_s`, or whose owner is on this host and no longer alive, is
replaced (atomic rename) by the newcomer, which then re-reads the file and
proceeds only if its own token is there. A run whose lock was taken over
(it stalled longer than stale_after_s) notices at its next heartbeat and
refuses to commit (`ensure_held`).

Holding is re-entrant within a process (the command line takes the lock before
starting Spark, `job.run` takes it again). Outputs on object stores (s3a://,
...) are not locked: there is no atomic create-if-absent there; Delta's own
optimistic concurrency is what protects them.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from ..errors import UserError

if TYPE_CHECKING:
    from ..config import LockConfig

LOCK_NAME = "_newsdedup.lock"


class OutputLocked(UserError):
    """Another process is writing to this output."""


@dataclass
class OutputLock:
    path: Path
    token: str
    heartbeat_s: float
    depth: int = 1
    lost: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)

    def beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            if _read(self.path).get("token") != self.token:
                self.lost = True
                return
            try:
                os.utime(self.path)
            except FileNotFoundError:
                self.lost = True
                return
            except OSError:
                # The output turned read-only or full under the run: the run's own next write fails
                # with a line that says so; a crashed heartbeat thread would only add a traceback.
                continue

    def ensure_held(self) -> None:
        if self.lost or _read(self.path).get("token") != self.token:
            raise OutputLocked(f"lost the lock on {self.path.parent} (another process took it over after this "
                               "one stalled); nothing more is written by this run")


_HELD: dict[str, OutputLock] = {}


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner_record(command: str) -> dict:
    return {"user": getpass.getuser(), "host": socket.gethostname(), "pid": os.getpid(), "command": command,
            "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "token": uuid.uuid4().hex}


def is_local(output: str) -> bool:
    return "://" not in output or output.startswith("file:")


def stale_reason(record: dict, age_s: float, stale_after_s: float) -> str | None:
    """Why an existing lock may be taken over, or None while its owner counts as alive."""
    if age_s > stale_after_s:
        return f"no heartbeat for {age_s:.0f}s (> lock.stale_after_s={stale_after_s:g})"
    if record.get("host") == socket.gethostname() and isinstance(record.get("pid"), int) \
            and not _alive(record["pid"]):
        return f"its process {record['pid']} on this host is gone"
    return None


def acquire(output: str, conf: "LockConfig", command: str) -> OutputLock:
    out = Path(output.removeprefix("file:"))
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_NAME
    record = _owner_record(command)
    text = json.dumps(record, indent=1)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        current = _read(path)
        try:
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:   # released between our create and stat: try once more
            return acquire(output, conf, command)
        reason = stale_reason(current, age, conf.stale_after_s)
        if reason is None:
            raise OutputLocked(
                f"{output} is in use: {current.get('command', '?')} by {current.get('user', '?')}@"
                f"{current.get('host', '?')} (pid {current.get('pid', '?')}, started {current.get('started_at', '?')}, "
                f"heartbeat {age:.0f}s ago). Wait for it to finish; a lock without heartbeat for "
                f"{conf.stale_after_s:g}s is taken over, or delete {path} if that process is gone") from None
        tmp = path.with_name(f"{LOCK_NAME}.{record['token']}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)   # atomic: readers see the old or the new owner, never half a file
        time.sleep(0.2)         # two takers: the later rename wins, the other sees a foreign token
        if _read(path).get("token") != record["token"]:
            raise OutputLocked(f"{output}: another process took over the stale lock first") from None
    lock = OutputLock(path=path, token=record["token"], heartbeat_s=conf.heartbeat_s)
    threading.Thread(target=lock.beat, name="newsdedup-lock-heartbeat", daemon=True).start()
    return lock


def release(lock: OutputLock) -> None:
    lock._stop.set()
    if _read(lock.path).get("token") == lock.token:
        try:
            lock.path.unlink(missing_ok=True)
        except OSError:
            # An output that turned read-only (or lost its permissions) under the run: the file
            # stays, and the next run takes it over (its process is gone, stale_reason). Raising
            # here would replace the error that says what happened with this one.
            pass


@contextmanager
def hold(output: str, conf: "LockConfig", command: str) -> Iterator[OutputLock | None]:
    """The lock on output for the duration of the block (re-entrant in one process; None for object stores)."""
    if not is_local(output):
        yield None
        return
    key = str(Path(output.removeprefix("file:")).resolve())
    held = _HELD.get(key)
    if held is not None:
        held.depth += 1
        try:
            yield held
        finally:
            held.depth -= 1
        return
    lock = _HELD[key] = acquire(output, conf, command)
    try:
        yield lock
    finally:
        del _HELD[key]
        release(lock)
