"""Errors a person can act on.

Anything raised as a `UserError` is printed by the command line as one line,
`newsdedup: error: ...`, with exit code 2 and no stack trace: a bad setting, a
missing input column, an unreachable store, a wrong Postgres password. Raise
it with a message that says what was wrong and what to do, and keep stack
traces for bugs.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem with the input, the configuration or the environment, not with the code."""
