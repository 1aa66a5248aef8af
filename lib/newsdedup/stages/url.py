"""Stage 1: exact duplicates by normalised URL.

Pure part: `normalize_url` and the per-source rules; `UrlKeys.batch` is the
per-batch function `prepare` calls. Spark part: `UrlStage`, an exact join on url_hash.

The canonical form is built from the original string by slicing, never by
decoding and re-encoding: percent-escapes, '+' and parameter order survive
byte for byte. Only the hash key is normalised further, so that spellings of
one address collide while the stored URL stays as published. The key:
  - sorts the surviving parameters (`?a=1&b=2` = `?b=2&a=1`) and reads `&amp;`
    as `&` (HTML-escaped separators);
  - normalises percent-encoding (RFC 3986 6.2.2.2, RFC 3987 3.1): escapes of
    unreserved characters decoded (`%7E` = `~`), the others in upper-case hex
    (`%e0%a6%a2` = `%E0%A6%A2`), non-ASCII characters percent-encoded as UTF-8
    (a raw Bangla slug = its percent-encoded form), a lone `%` as `%25`;
  - removes dot segments (`/a/../b` = `/b`, RFC 3986 5.2.4);
  - writes an internationalised host in its ASCII (punycode) form.
Hosts lose every leading `www.` (`www.www.e.com` = `e.com`, but `www.com`
stays), and only letters, digits, `-`, `_`, `.` and non-ASCII letters are
accepted in a host, so that normalising a canonical URL again changes nothing.

Per-source rules are found by host first, then by the `source` label; see `rules_for`.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence
from urllib.parse import unquote

from .base import ExactKeyStage

if TYPE_CHECKING:
    from pyspark.sql import Column

    from ..config import UrlConfig

_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_DEFAULT_PORTS = {"http": "80", "https": "443"}
_BAD_CHARS = re.compile(r"[\s\x00-\x1f\x7f<>\"]")
# A host: letters, digits, '-', '_', '.', any non-ASCII (IDN); or an IPv6 literal.
_HOST_OK = re.compile(r"[0-9a-z_\-.\u0080-\U0010ffff]+|\[[0-9a-f:.]+\]")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})|%")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


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


def _label(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower())


def source_for(url_conf: "UrlConfig", source: str | None, host: str | None) -> str | None:
    """The configured source whose rules apply, or None.

    1. By host: the URL's host (lowercase, without www.) equals one of a source's
       `hosts`, or is a subdomain of it (bangla.thedailystar.net -> thedailystar.net);
       a source whose key is itself a host name counts that host. The longest match
       wins. The host is what the rules are about (its query parameters), so it
       beats the label.
    2. By label: the `source` value equals a source key, ignoring case, spaces and
       punctuation ("Daily Star" = dailystar), or equals one of its hosts without
       the top-level domain ("The Daily Star" = thedailystar.net).
    """
    sources = url_conf.sources
    if host:
        host = strip_www(host.lower().rstrip("."))
        best, best_len = None, -1
        for name, spec in sources.items():
            for h in [*spec.hosts, *([name] if "." in name else [])]:
                h = strip_www(h.lower())
                if (host == h or host.endswith("." + h)) and len(h) > best_len:
                    best, best_len = name, len(h)
        if best is not None:
            return best
    if source:
        if source in sources:
            return source
        label = _label(source)
        for name, spec in sources.items():
            hosts = [_label(h.rsplit(".", 1)[0]) for h in spec.hosts]
            if label and (label == _label(name) or label in hosts):
                return name
    return None


def rules_for(url_conf: "UrlConfig", source: str | None, host: str | None = None) -> UrlRules:
    """Global tracking patterns plus the source's own strip list, minus its allowlist."""
    name = source_for(url_conf, source, host)
    spec = url_conf.sources[name] if name is not None else None
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
        return url_hash(self.key)


def url_hash(key: str) -> str:
    """url_hash: sha256 of a normalised URL's key (what Spark's sha2 gives for the key column)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


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
    if port and (not port.isdigit() or int(port) > 65535):
        raise UrlError(f"invalid port {port!r}")
    host = strip_www(host.lower().rstrip("."))
    if not host or host.startswith(".") or ".." in host or not _HOST_OK.fullmatch(host):
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
    m = _SCHEME_RE.match(url)
    if m and m.group(1).lower() not in _DEFAULT_PORTS:   # data:, javascript:, mailto: say so, whatever follows
        raise UrlError(f"unsupported scheme {m.group(1).lower()!r}")
    if _BAD_CHARS.search(url):
        raise UrlError("url contains whitespace, control characters or quotes")
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
    path = _without_trailing_slash(path)

    kept = [p for p in query.split("&") if p and not rules.drops(_unescaped_amp(p).split("=", 1)[0])]
    canonical = f"{scheme}://{netloc}{path}" + ("?" + "&".join(kept) if kept else "")
    key_scheme = "https" if scheme_insensitive else scheme
    key_params = sorted(_key_part(_unescaped_amp(p)) for p in kept)
    key_path = _without_trailing_slash(remove_dot_segments(_key_part(path)))
    key = f"{key_scheme}://{_key_netloc(netloc)}{key_path}" + ("?" + "&".join(key_params) if key_params else "")
    return NormalizedUrl(canonical=canonical, key=key, host=host)


def _without_trailing_slash(path: str) -> str:
    if not path:
        return "/"
    if len(path) > 1 and path.endswith("/"):
        return path.rstrip("/") or "/"
    return path


def _unescaped_amp(param: str) -> str:
    """A parameter after an HTML-escaped separator ('a=1&amp;b=2' splits into 'a=1', 'amp;b=2')."""
    return param[4:] if param.startswith("amp;") else param


def strip_www(host: str) -> str:
    """Every leading 'www.' (www.www.e.com -> e.com) while a dot remains (www.com stays)."""
    while host.startswith("www.") and "." in host[4:]:
        host = host[4:]
    return host


def _key_part(text: str) -> str:
    """Percent-encoding normalised for comparison: unreserved escapes decoded, other escapes in
    upper-case hex, a lone '%' as %25, non-ASCII characters as upper-case UTF-8 escapes."""
    def escape(m: re.Match) -> str:
        if m.group(1) is None:
            return "%25"
        ch = chr(int(m.group(1), 16))
        return ch if ch in _UNRESERVED else "%" + m.group(1).upper()

    if "%" in text:
        text = _PCT.sub(escape, text)
    if not text.isascii():
        text = "".join(ch if ch.isascii() else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
                       for ch in text)
    return text


def remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 for an absolute path: '.' and '..' segments resolved."""
    if "." not in path:
        return path
    out: list[str] = []
    parts = path.split("/")[1:]
    for i, seg in enumerate(parts):
        last = i == len(parts) - 1
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
            continue
        if last:
            out.append("")           # /a/b/.. -> /a/ (a directory, then the trailing slash rule)
    return "/" + "/".join(out)


def _key_netloc(netloc: str) -> str:
    """The netloc with an internationalised host in its ASCII (IDNA) form."""
    if netloc.isascii():
        return netloc
    userinfo, _, hostport = netloc.rpartition("@")
    host, sep, port = hostport.partition(":")
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:   # not a valid IDN: keep the Unicode form (it still compares exactly)
        pass
    return (userinfo + "@" if userinfo else "") + host + sep + port


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
    return strip_www(host.lower())


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
