"""Imports flow one way through the job: no cycle among its modules, hidden in a function or not.

Every import counts (module level and inside functions) except those under
`if TYPE_CHECKING:`, which exist for annotations only. A cycle kept alive by an
import deferred into a function is still a cycle: two modules that each need
the other are one idea split in two, or a third thing neither should own.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "lib"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the modules of the job it imports (outside TYPE_CHECKING blocks)."""
    paths = {module_name(p, root): p for p in (root / "newsdedup").rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        annotations_only = {id(n) for block in ast.walk(tree)
                            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
                            for n in ast.walk(block)}
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(tree):
            if id(node) in annotations_only:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets.update([module, *(f"{module}.{a.name}" for a in node.names)])
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
        graph[name] = {t for t in targets if t in paths and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function(tmp_path):
    pkg = tmp_path / "newsdedup"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    assert cycles(import_graph(tmp_path)) == [["newsdedup.a", "newsdedup.b"]]


def test_the_job_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 40 and "newsdedup.cascade" in graph["newsdedup.job"]
    assert cycles(graph) == []
