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
