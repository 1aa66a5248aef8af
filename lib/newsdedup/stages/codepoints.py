"""Tables over every Unicode code point, built once per machine instead of once per process.

The stages classify characters with tables indexed by code point (nfkc.tables, the character
classes of simhash.reference, content's whitespace), each built by asking Python's own
unicodedata, re and str about all 1,114,112 code points. Together that took about a second in
every process that prepares a document: each Spark Python worker, each `newsdedup check`, each
test. A table depends only on the code that builds it and on the Python that runs it (its
Unicode database, re and str), so `per_machine` saves it the first time, under a name keyed by
both (the defining module's source, the Python version, the Unicode database version), and loads
it after, in milliseconds. A saved copy that cannot be read means building the table again; a
cache directory that cannot be written means building it in every process, as before.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import sys
import tempfile
import unicodedata
from functools import lru_cache, wraps
from pathlib import Path
from typing import Callable, TypeVar

import numpy as np

ENV = "NEWSDEDUP_CACHE_DIR"
T = TypeVar("T")


def cache_dir() -> Path:
    """$NEWSDEDUP_CACHE_DIR, else newsdedup/ under $XDG_CACHE_HOME or ~/.cache."""
    given = os.environ.get(ENV)
    if given:
        return Path(given)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "newsdedup"


def cache_path(fn: Callable) -> Path:
    """Where fn's table is saved: the name changes with fn's module source and with the Python running it."""
    key = "\0".join([inspect.getsource(sys.modules[fn.__module__]), fn.__qualname__, sys.version,
                     unicodedata.unidata_version, np.__version__])
    return cache_dir() / f"{fn.__module__}.{fn.__qualname__}-{hashlib.sha256(key.encode()).hexdigest()[:24]}.npz"


def per_machine(fn: Callable[[], T]) -> Callable[[], T]:
    """fn() (an ndarray or a tuple of them, from no argument) built once per process and, through
    the saved copy, once per machine. The result's `build` is fn itself (it builds, never saves)."""
    @lru_cache(maxsize=1)
    @wraps(fn)
    def table():
        try:
            path = cache_path(fn)
        except (OSError, TypeError, RuntimeError):   # no source to key on: build it, keep nothing
            return fn()
        saved = _load(path)
        if saved is not None:
            return saved
        value = fn()
        _save(path, value)
        return value
    table.build = fn
    return table


def _load(path: Path):
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = [z[f"arr_{i}"] for i in range(int(z["count"]))]
            return tuple(arrays) if bool(z["is_tuple"]) else arrays[0]
    except Exception:   # absent, cut short, another layout: built again
        return None


def _save(path: Path, value) -> None:
    arrays = list(value) if isinstance(value, tuple) else [value]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: a process loading it meanwhile sees the whole file or none.
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, *arrays, count=np.int64(len(arrays)), is_tuple=np.bool_(isinstance(value, tuple)))
            os.chmod(tmp, 0o644)   # mkstemp's 0600 would keep other users of a shared cache out
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:   # a read-only home, a full disk: the table is simply built in every process
        pass
