"""Stage 1: exact duplicates by normalised URL.

Pure part: `normalize_url` and the per-source rules; `UrlKeys.batch` is the
per-batch function `prepare` calls. Spark part: `UrlStage`, an exact join on url_hash.

The canonical form is built from the original string by slicing, never by
decoding and re-encoding: percent-escapes, '+' and parameter order survive
byte for byte. Only the hash key sorts the surviving parameters, so that
`?a=1&b=2` and `?b=2&a=1` collide while the stored URL stays as published.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence
from urllib.parse import unquote

from . import ExactKeyStage

if TYPE_CHECKING:
    from pyspark.sql import Column

    from ..config import UrlConfig

_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_DEFAULT_PORTS = {"http": "80", "https": "443"}
_BAD_CHARS = re.compile(r"[\s\x00-\x1f\x7f<>\"]")


class UrlError(ValueError):
    """The URL cannot be normalised; the document skips stage 1 and goes on."""


@dataclass(frozen=True)
class UrlRules:
    """Which query parameters to drop; built once per source."""

    strip_patterns: tuple[str, ...]
    allow: frozenset[str]

    def drops(self, name: str) -> bool:
        key = unquote(name).lower()
        if key in self.allow:
            return False
        return any(fnmatch.fnmatchcase(key, pat) for pat in self.strip_patterns)


def rules_for(url_conf: "UrlConfig", source: str | None, host: str | None = None) -> UrlRules:
    """Global tracking patterns plus the source's own strip list, minus its allowlist."""
    sources = url_conf.sources
    spec = None
    if source is not None:
        spec = sources.get(source) or sources.get(source.lower())
    if spec is None and host:
        spec = sources.get(host)
    patterns = [p.lower() for p in url_conf.tracking_params]
    patterns += [p.lower() for p in (spec.strip if spec else [])]
    allow = frozenset(a.lower() for a in (spec.allow if spec else []))
    return UrlRules(tuple(patterns), allow)


@dataclass(frozen=True)
class NormalizedUrl:
    canonical: str   # what is stored: surviving parameters in their original bytes and order
    key: str         # what is hashed: like canonical but parameters sorted
    host: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.key.encode("utf-8", "surrogatepass")).hexdigest()


def _split_authority(rest: str) -> tuple[str, str]:
    """rest is the part after 'scheme://'; return (authority, path-query-fragment)."""
    for i, ch in enumerate(rest):
        if ch in "/?#":
            return rest[:i], rest[i:]
    return rest, ""


def _normalize_host(authority: str, scheme: str) -> str:
    userinfo = ""
    if "@" in authority:
        userinfo, authority = authority.rsplit("@", 1)
        userinfo += "@"
    host, port = authority, ""
    if authority.startswith("["):  # IPv6 literal
        end = authority.find("]")
        if end < 0:
            raise UrlError("unterminated IPv6 host")
        host, tail = authority[: end + 1], authority[end + 1:]
        if tail:
            if not tail.startswith(":"):
                raise UrlError("garbage after IPv6 host")
            port = tail[1:]
    elif ":" in authority:
        host, port = authority.rsplit(":", 1)
    if port and not port.isdigit():
        raise UrlError(f"invalid port {port!r}")
    host = host.lower().rstrip(".")
    if host.startswith("www."):
        host = host[4:]
    if not host or host.startswith(".") or ".." in host:
        raise UrlError(f"invalid host {host!r}")
    if port == _DEFAULT_PORTS.get(scheme):
        port = ""
    return userinfo + host + (":" + port if port else "")


def normalize_url(url: str | None, rules: UrlRules, scheme_insensitive: bool = True) -> NormalizedUrl:
    if url is None:
        raise UrlError("url is null")
    url = url.strip()
    if not url:
        raise UrlError("url is empty")
    if _BAD_CHARS.search(url):
        raise UrlError("url contains whitespace, control characters or quotes")
    m = _SCHEME_RE.match(url)
    if not m:
        raise UrlError("url has no scheme")
    scheme = m.group(1).lower()
    if scheme not in _DEFAULT_PORTS:
        raise UrlError(f"unsupported scheme {scheme!r}")
    rest = url[m.end():]
    if not rest.startswith("//"):
        raise UrlError("url has no host")
    authority, tail = _split_authority(rest[2:])
    netloc = _normalize_host(authority, scheme)
    host = netloc.rsplit("@", 1)[-1].split(":")[0] if not netloc.startswith("[") else netloc

    tail = tail.split("#", 1)[0]           # the fragment never reaches the server
    path, _, query = tail.partition("?")
    if not path:
        path = "/"
    elif len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/") or "/"

    kept = [p for p in query.split("&") if p and not rules.drops(p.split("=", 1)[0])]
    canonical = f"{scheme}://{netloc}{path}" + ("?" + "&".join(kept) if kept else "")
    key_scheme = "https" if scheme_insensitive else scheme
    key = f"{key_scheme}://{netloc}{path}" + ("?" + "&".join(sorted(kept)) if kept else "")
    return NormalizedUrl(canonical=canonical, key=key, host=host)


def host_of(url: str | None) -> str | None:
    """Best-effort host (lowercase, no www.) used to look up per-source rules."""
    if not url:
        return None
    m = _SCHEME_RE.match(url.strip())
    if not m:
        return None
    rest = url.strip()[m.end():]
    if not rest.startswith("//"):
        return None
    authority, _ = _split_authority(rest[2:])
    host = authority.rsplit("@", 1)[-1]
    if not host.startswith("["):
        host = host.split(":")[0]
    host = host.lower()
    return host[4:] if host.startswith("www.") else host


class UrlKeys:
    """Stage-1 columns for a batch; rules cached per (source, host).

    Python returns the hash *key*; Spark hashes it (`spark_columns`, sha2), so
    url_hash is sha256 of the key's UTF-8 bytes, as `NormalizedUrl.sha256`.
    """

    FIELDS = (("url_key", "string"), ("canonical_url", "string"), ("url_error", "string"))

    def __init__(self, url_conf: "UrlConfig"):
        self.conf = url_conf
        self._rules: dict[tuple, UrlRules] = {}

    def rules(self, source: str | None, host: str | None) -> UrlRules:
        key = (source, host)
        if key not in self._rules:
            self._rules[key] = rules_for(self.conf, source, host)
        return self._rules[key]

    def normalized(self, url: str | None, source: str | None) -> NormalizedUrl:
        return normalize_url(url, self.rules(source, host_of(url)), self.conf.scheme_insensitive)

    def columns(self, url: str | None, source: str | None) -> dict[str, Any]:
        try:
            nu = self.normalized(url, source)
            return {"canonical_url": nu.canonical, "url_hash": nu.sha256, "url_error": None}
        except UrlError as exc:
            return {"canonical_url": None, "url_hash": None, "url_error": str(exc)}

    def batch(self, urls: Sequence[str | None], sources: Sequence[str | None]) -> dict[str, list]:
        out: dict[str, list] = {name: [] for name, _ in self.FIELDS}
        for url, source in zip(urls, sources):
            try:
                nu = self.normalized(url, source)
                key, canonical, error = nu.key, nu.canonical, None
            except UrlError as exc:
                key = canonical = None
                error = str(exc)
            out["url_key"].append(key)
            out["canonical_url"].append(canonical)
            out["url_error"].append(error)
        return out

    @staticmethod
    def spark_columns(url_key: "Column") -> dict[str, "Column"]:
        from pyspark.sql import functions as F

        return {"url_hash": F.sha2(url_key, 256)}


class UrlStage(ExactKeyStage):
    name = "url"
    key = "url_hash"
