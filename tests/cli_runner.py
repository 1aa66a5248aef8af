"""The CLI run in-process, its output captured: what a user at a terminal would see."""

from __future__ import annotations

import contextlib
import io

from newsdedup import cli


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `newsdedup ARGV`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def small_conf(tmp_path_factory, name: str, input_section: str) -> str:
    """A config file for CLI runs on a few rows (two shuffle partitions) with `input: {input_section}`."""
    path = tmp_path_factory.mktemp("conf") / f"{name}.yaml"
    path.write_text("spark: {shuffle_partitions: 2, delta_snapshot_partitions: 1}\n"
                    f"input: {{{input_section}}}\n", encoding="utf-8")
    return str(path)
