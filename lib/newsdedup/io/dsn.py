"""Postgres DSNs as they may be shown: the password never leaves in a message, a log line or a report.

`mask` replaces passwords in any text: a URI's `user:password@`, a key=value
`password=...` (quoted or not) and, literally, every password it is given.
`passwords_in` finds what may be a DSN's password even when libpq cannot parse
the DSN (a malformed DSN is exactly when psycopg's message quotes a piece of
it). `describe` is the DSN as a message names it: host, port, user, database.

The process remembers each DSN it connects with (`remember`), so that the one
place every error passes through (cli.main) can mask them without holding the
DSN itself: an error may come from anywhere, an executor's COPY included.
"""

from __future__ import annotations

import re
from typing import Iterable

MASK = "***"
# Literal masking of a password shorter than this would garble every message (a one-letter
# password occurs in most words); the patterns below still mask it where a DSN is written out.
MIN_LITERAL = 4

# libpq ends a URI's user info at the first '@' or '/'; masking up to the last '@' masks more,
# which is what a password holding an unencoded '@' or '/' needs (libpq reads its tail as the host,
# port or database).
_URI_USERINFO = re.compile(r"(?P<head>postgres(?:ql)?://[^:@/?#\s]*:)(?P<pw>\S*)@", re.IGNORECASE)
# A whole DSN in URI form: a shell argument may hold spaces, so its user info runs to the last '@'.
_URI_DSN = re.compile(r"\s*postgres(?:ql)?://[^:@/?#\s]*:(?P<pw>.*)@", re.IGNORECASE | re.DOTALL)
_KEY_VALUE = re.compile(r"(?P<head>\bpassword\s*=\s*)(?P<pw>'(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)

_known: set[str] = set()


def passwords_in(dsn: str | None) -> list[str]:
    """Every string that may be dsn's password: what libpq parses, and what the patterns find."""
    if not dsn:
        return []
    found = [m.group("pw") for m in (*_URI_USERINFO.finditer(dsn), _URI_DSN.match(dsn)) if m]
    found += [m.group("pw").strip("'") for m in _KEY_VALUE.finditer(dsn)]
    try:
        from psycopg.conninfo import conninfo_to_dict

        parsed = conninfo_to_dict(dsn).get("password")
    except Exception:  # noqa: BLE001 - unparseable: the patterns above are all there is
        parsed = None
    if parsed:
        found.append(str(parsed))
    # A percent-encoded URI password is also quoted decoded (libpq's messages) and encoded (the DSN).
    from urllib.parse import unquote

    found += [unquote(p) for p in found]
    return sorted({p for p in found if p and p != MASK}, key=len, reverse=True)


def mask(text: str, passwords: Iterable[str] = ()) -> str:
    """text with every DSN password in it masked, and each of passwords wherever it occurs."""
    text = _URI_USERINFO.sub(lambda m: m.group("head") + MASK + "@", text)
    text = _KEY_VALUE.sub(lambda m: m.group("head") + MASK, text)
    for pw in sorted(set(passwords), key=len, reverse=True):   # longest first: a password inside another
        if len(pw) >= MIN_LITERAL:
            text = text.replace(pw, MASK)
    return text


def describe(dsn: str) -> str:
    """The DSN as a message may name it: host, port, user, database; never the password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - any parse failure
        return "<unparseable DSN>"
    if has_unencoded_delimiter(dsn):
        # libpq would take the password's tail for the host, port or database: naming them names it.
        return "<a URI whose password holds an unencoded '@' or '/': write them as %40 and %2F>"
    parts = [f"{k}={info[k]}" for k in ("host", "port", "user", "dbname") if info.get(k)]
    return " ".join(parts) or "<default server>"


def has_unencoded_delimiter(dsn: str) -> bool:
    """A URI whose password holds an '@' or '/' (libpq ends the user info at the first of them)."""
    m = _URI_DSN.match(dsn)
    return m is not None and any(c in m.group("pw") for c in "@/")


def unparseable_reason(message: str) -> str:
    """psycopg's complaint about a DSN it cannot parse, with every quoted fragment masked:
    the fragment it quotes is often a piece of the password ('missing "=" after "et"')."""
    return re.sub(r'"([^"]*)"', lambda m: m.group(0) if m.group(1) == "=" else f'"{MASK}"', message)


def remember(dsn: str | None) -> None:
    """Note dsn's passwords for mask_known."""
    _known.update(passwords_in(dsn))


def mask_known(text: str) -> str:
    """text with DSN patterns and every password this process has connected with masked."""
    return mask(text, _known)
