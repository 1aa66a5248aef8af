"""Stage 3's package imports in one direction (no cycles), read from the source with `ast`.

The modules of newsdedup/stages/simhash/ are layered: a module may import, at module
level, only modules listed before it in LAYERS; no function imports a module of the
package (an import deferred into a function is how a cycle hides). Importing the
package itself stays cheap: no Spark, no numba.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = "newsdedup.stages.simhash"
ROOT = Path(__file__).resolve().parents[1] / "lib" / "newsdedup" / "stages" / "simhash"
LAYERS = ("reference", "kernels", "keys", "candidates", "verify", "live", "step")    # lowest first


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute module named by a `from ... import` in newsdedup.stages.simhash.<module>."""
    if node.level == 0:
        return node.module or ""
    parts = f"{PACKAGE}.{module}".split(".")[:-node.level]
    return ".".join(parts + ([node.module] if node.module else []))


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """Every module an import statement may load (for `from pkg import name`, name may be a module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = _absolute(module, node)
    return [base, *[f"{base}.{a.name}" for a in node.names]]


def _siblings(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The package's modules (or the package itself, "") an import statement targets."""
    out = set()
    for target in _targets(module, node):
        if target == PACKAGE:
            if isinstance(node, ast.ImportFrom) and all(a.name in LAYERS for a in node.names):
                continue                      # `from . import kernels`: the submodule names are listed too
            out.add("")
        elif target.startswith(PACKAGE + "."):
            out.add(target[len(PACKAGE) + 1:].split(".")[0])
    return out


def _imports(module: str) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """(module-level imports, imports inside a function or class) of a module."""
    tree = ast.parse((ROOT / f"{module}.py").read_text(), filename=f"{module}.py")
    top, nested = [], []

    def visit(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                (nested if inside else top).append(child)
            visit(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                      ast.Lambda)))
    visit(tree, False)
    return top, nested


def test_every_module_has_a_layer():
    modules = {p.stem for p in ROOT.glob("*.py")} - {"__init__"}
    assert modules == set(LAYERS), "place a new module of the package in LAYERS (and the package docstring)"


@pytest.mark.parametrize("module", LAYERS)
def test_module_level_imports_point_down(module):
    top, _ = _imports(module)
    below = set(LAYERS[:LAYERS.index(module)])
    for node in top:
        for sibling in _siblings(module, node):
            assert sibling in below, (f"{module}.py line {node.lineno} imports "
                                      f"{sibling or 'the package'}: only {sorted(below)} may be imported")


@pytest.mark.parametrize("module", LAYERS)
def test_no_function_level_imports_of_the_package(module):
    _, nested = _imports(module)
    for node in nested:
        assert not _siblings(module, node), f"{module}.py line {node.lineno}: a deferred import inside the package"


def test_init_imports_nothing_of_the_package_eagerly():
    """__init__ re-exports lazily: at module level it imports siblings only for type checkers."""
    tree = ast.parse((ROOT / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            assert not _siblings("__init__", node), f"__init__.py line {node.lineno}"


def test_package_import_is_cheap():
    code = ("import sys, newsdedup.stages.simhash as s; s.hamming(1, 2); s.bands(3);"
            "print(sorted(m for m in ('pyspark', 'numba') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
