"""The lab (newsdedup_lab) sits beside the job: the job never imports it, the spark-submit zip never carries it."""

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from newsdedup import cli

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "lib" / "newsdedup"


def _imported_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_module_of_the_job_names_the_lab_anywhere():
    """Function-level imports included: the lab may be absent where the job runs."""
    offenders = {str(p.relative_to(ROOT)): sorted(n for n in _imported_names(p) if n.split(".")[0] == "newsdedup_lab"
                                                  or n.startswith("newsdedup.lab"))
                 for p in JOB.rglob("*.py")}
    assert {p: n for p, n in offenders.items() if n} == {}


def test_importing_every_module_of_the_job_loads_nothing_of_the_lab():
    code = ("import importlib, pkgutil, sys, newsdedup\n"
            "mods = [m.name for m in pkgutil.walk_packages(newsdedup.__path__, 'newsdedup.')]\n"
            "for m in mods: importlib.import_module(m)\n"
            "print(len(mods), sorted(m for m in sys.modules if m.startswith('newsdedup_lab')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert int(out[0]) > 30          # the walk found the job's modules
    assert out[1:] == ["[]"]


def test_the_spark_submit_zip_holds_the_job_and_not_the_lab():
    subprocess.run(["bash", "scripts/package.sh"], cwd=ROOT, check=True, capture_output=True)
    names = zipfile.ZipFile(ROOT / "dist" / "newsdedup.zip").namelist()
    assert "newsdedup/cli.py" in names and "newsdedup/stages/__init__.py" in names
    assert [n for n in names if not n.startswith("newsdedup/") or "lab" in Path(n).parts] == []


def test_the_lab_commands_are_reached_through_the_job_command_line(capsys):
    assert {"eval", "bench", "calibrate"} <= set(cli.lab_commands())
    with pytest.raises(SystemExit) as done:
        cli.main(["eval", "--help"])
    assert done.value.code == 0
    assert "usage: newsdedup eval" in capsys.readouterr().out
