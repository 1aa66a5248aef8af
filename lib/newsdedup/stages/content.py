"""Stage 2: exact duplicates by normalised text, and the text handling every later stage uses.

Pure part: HTML extraction, boilerplate removal, normalisation, language
detection, the content key (`ContentKeys.batch`, called per batch from `prepare`). Spark part:
`ContentStage`, an exact join on content_hash.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Sequence

from . import ExactKeyStage

if TYPE_CHECKING:
    from ..config import ContentConfig

# Quotes and dashes that different CMSes substitute for one another.
_QUOTES = {c: "'" for c in "\u2018\u2019\u201a\u201b\u2032\u2035\u02bc\u0060\u00b4"}
_QUOTES.update({c: '"' for c in "\u201c\u201d\u201e\u201f\u2033\u2036\u00ab\u00bb\u301d\u301e"})
_DASHES = {c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2e3a\u2e3b\ufe58\ufe63\uff0d"}
# Invisible characters: zero-width space/joiners, BOM, soft hyphen, word joiner.
# ZWJ/ZWNJ change the rendering of some Bangla conjuncts, but outlets disagree
# on using them, so for comparison they carry no information.
_INVISIBLE = {c: None for c in "\u200b\u200c\u200d\u2060\ufeff\u00ad"}
_TRANSLATE = str.maketrans({**_QUOTES, **_DASHES, **_INVISIBLE})
_WS = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")

_BENGALI = re.compile(r"[\u0980-\u09ff]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")


def clean_invalid(text: str) -> str:
    """Replace lone surrogates (from undecodable bytes) with U+FFFD and drop control characters."""
    text = _SURROGATE.sub("\ufffd", text)
    return _CONTROL.sub(" ", text)


def normalize_text(text: str | None) -> str:
    """NFKC, canonical quotes and dashes, invisible characters removed, whitespace collapsed."""
    if not text:
        return ""
    text = unicodedata.normalize("NFKC", clean_invalid(text))
    text = text.translate(_TRANSLATE)
    return _WS.sub(" ", text).strip()


@lru_cache(maxsize=64)
def _boilerplate_regex(patterns: tuple[str, ...]) -> re.Pattern | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


def strip_boilerplate(text: str | None, patterns: Sequence[str]) -> str:
    """Drop whole lines that match a boilerplate pattern ("Read more: ...", share bars, ...)."""
    if not text:
        return ""
    rx = _boilerplate_regex(tuple(patterns))
    if rx is None:
        return text
    kept: list[str] = []
    for line in text.splitlines():
        probe = normalize_text(line)
        if probe and rx.fullmatch(probe):
            continue
        kept.append(line)
    return "\n".join(kept)


def html_to_text(html: str | None) -> str:
    """Main article text of an HTML page (trafilatura), falling back to all visible text."""
    if not html or not html.strip():
        return ""
    import trafilatura  # imported lazily: heavy, and only needed for html input

    try:
        extracted = trafilatura.extract(html, include_comments=False, include_tables=False,
                                        favor_precision=True, deduplicate=False)
    except Exception:  # a broken page must not take the batch with it
        extracted = None
    if extracted:
        return extracted
    try:
        import lxml.html

        root = lxml.html.fromstring(html)
        for bad in root.xpath("//script|//style|//nav|//header|//footer|//aside"):
            bad.drop_tree()
        return root.text_content()
    except Exception:
        return re.sub(r"<[^>]+>", " ", html)


def content_key(title: str | None, body: str | None, boilerplate: Sequence[str]) -> str:
    """The normalised headline + body that stage 2 hashes; '' when there is no text at all."""
    head = normalize_text(title)
    text = normalize_text(strip_boilerplate(body, boilerplate))
    if not head and not text:
        return ""
    return head + "\n" + text


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def detect_language(text: str, hint: str | None = None) -> str:
    """'bn' or 'en' (or 'other') from the script of the letters; an explicit hint wins.

    The archive is English and Bangla, which use different scripts, so counting
    Bengali-block letters against Latin letters is both exact enough and free.
    """
    if hint:
        code = hint.strip().lower().replace("_", "-").split("-")[0]
        if code in ("bn", "ben", "bangla", "bengali"):
            return "bn"
        if code in ("en", "eng", "english"):
            return "en"
        if code:
            return code
    bengali = len(_BENGALI.findall(text))
    latin = len(_LATIN.findall(text))
    if bengali == 0 and latin == 0:
        return "other"
    return "bn" if bengali >= latin else "en"


class ContentKeys:
    """Stage-2 columns for a batch; also the normalised text and language the later stages fingerprint."""

    FIELDS = (("content_hash", "string"), ("text_chars", "int"), ("lang", "string"), ("lang_detected", "boolean"))

    def __init__(self, content_conf: "ContentConfig", max_chars: int):
        self.boilerplate = tuple(content_conf.boilerplate_lines)
        self.max_chars = int(max_chars)
        self._hints: dict[str, str] = {}

    def columns(self, title: str | None, body: str | None, html: str | None, lang_hint: str | None,
                flags: list[str]) -> dict[str, Any]:
        """body (extracted from html when empty), text_chars, content_hash, lang, lang_detected, key, has_body."""
        if (body is None or not body.strip()) and html:
            body = html_to_text(html)
            flags.append("from_html")
        key = content_key(title, body, self.boilerplate)
        if len(key) > self.max_chars:
            key = key[: self.max_chars]
            flags.append("truncated")
        has_body = bool(key.partition("\n")[2])
        if not has_body:
            flags.append("empty_body")
        return {
            "body": body, "text_chars": len(key),
            # A headline alone is too weak a key: two different stories can share "Live updates".
            "content_hash": sha256_hex(key) if has_body else None,
            "lang": detect_language(key, lang_hint),
            "lang_detected": not bool(lang_hint and lang_hint.strip()),
            "key": key, "has_body": has_body,
        }

    def batch(self, titles: Sequence[str | None], bodies: Sequence[str | None], htmls: Sequence[str | None],
              hints: Sequence[str | None], flags: Sequence[list[str]]) -> dict[str, list]:
        """`columns` for every document of a batch, as lists; body_from_html is set only where the
        body was extracted from html (Spark keeps the stored body otherwise)."""
        out: dict[str, list] = {name: [] for name, _ in self.FIELDS}
        out.update(body_from_html=[], key=[], has_body=[])
        for title, body, html, hint, fl in zip(titles, bodies, htmls, hints, flags):
            cols = self.columns(title, body, html, hint, fl)
            out["body_from_html"].append(cols["body"] if "from_html" in fl else None)
            for name in ("content_hash", "text_chars", "lang", "lang_detected", "key", "has_body"):
                out[name].append(cols[name])
        return out


class ContentStage(ExactKeyStage):
    name = "content"
    key = "content_hash"
