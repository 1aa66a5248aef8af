"""The per-code-point tables are built once per machine (stages/codepoints.py): what is loaded is what
would be built, a change to the code that builds a table builds it again, and a damaged or
unwritable cache only costs the build."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

from newsdedup.stages import codepoints, content, nfkc
from newsdedup.stages.simhash import reference

TABLES = [nfkc.tables, reference.char_classes, reference.evidence_classes, content._whitespace]


def _arrays(value) -> list[np.ndarray]:
    return list(value) if isinstance(value, tuple) else [value]


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.__qualname__)
def test_a_saved_table_loads_as_the_table_built(table, tmp_path, monkeypatch):
    monkeypatch.setenv(codepoints.ENV, str(tmp_path))
    built = table.build()
    path = codepoints.cache_path(table.build)
    codepoints._save(path, built)
    loaded = codepoints._load(path)
    assert path.parent == tmp_path and isinstance(loaded, tuple) == isinstance(built, tuple)
    for a, b in zip(_arrays(loaded), _arrays(built), strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


PROBE = """
import numpy as np
from newsdedup.stages.codepoints import per_machine

BUILDS = []
OFFSET = {offset}


@per_machine
def table():
    BUILDS.append(1)
    return np.arange(5, dtype=np.uint8) + OFFSET, np.zeros(3, dtype=np.bool_)
"""


def _probe(tmp_path, offset: int):
    """A fresh import of a module holding one per_machine table (a new process, as far as the table knows)."""
    (tmp_path / "cp_probe.py").write_text(PROBE.format(offset=offset))
    sys.modules.pop("cp_probe", None)
    importlib.invalidate_caches()
    return importlib.import_module("cp_probe")


def test_a_table_is_built_once_then_loaded_and_built_again_when_its_code_changes(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv(codepoints.ENV, str(cache))
    monkeypatch.syspath_prepend(str(tmp_path))
    first = _probe(tmp_path, 1)
    values, flags = first.table()
    first.table()
    assert first.BUILDS == [1] and values.tolist() == [1, 2, 3, 4, 5] and len(list(cache.glob("*.npz"))) == 1
    again = _probe(tmp_path, 1)     # same code: loaded, not built
    assert again.table()[0].tolist() == [1, 2, 3, 4, 5] and again.BUILDS == []
    changed = _probe(tmp_path, 7)   # the builder's module changed: never the stale table
    assert changed.table()[0].tolist() == [7, 8, 9, 10, 11] and changed.BUILDS == [1]
    assert len(list(cache.glob("*.npz"))) == 2


def test_a_damaged_or_unwritable_cache_only_costs_the_build(tmp_path, monkeypatch):
    monkeypatch.setenv(codepoints.ENV, str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = _probe(tmp_path, 1)
    path = codepoints.cache_path(probe.table.build)
    path.parent.mkdir()
    path.write_bytes(b"PK\x03\x04 cut short")
    assert probe.table()[0].tolist() == [1, 2, 3, 4, 5] and probe.BUILDS == [1]
    assert codepoints._load(path)[0].tolist() == [1, 2, 3, 4, 5]      # replaced by a whole one
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    monkeypatch.setenv(codepoints.ENV, str(blocked / "cache"))      # cannot be created
    probe = _probe(tmp_path, 2)
    assert probe.table()[0].tolist() == [2, 3, 4, 5, 6] and probe.BUILDS == [1]
