"""Stage 2: exact duplicates by normalised text, and the text handling every later stage uses.

Pure part: HTML extraction, boilerplate removal, normalisation, language
detection, the content key (`ContentKeys.batch`, called per batch from `prepare`). Spark part:
`ContentStage`, an exact join on content_hash.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from numba import njit

from .base import ExactKeyStage
from .codepoints import per_machine
from .nfkc import nfkc

if TYPE_CHECKING:
    from ..config import ContentConfig

# Quotes and dashes that different CMSes substitute for one another. Mapped before NFKC
# (which would decompose ´ into a space and a combining accent, ″ into two primes) and
# once more after it, for the characters NFKC itself produces (‴ -> ′′′, ﹘ -> —).
_QUOTES = {c: "'" for c in "\u2018\u2019\u201a\u201b\u2032\u2035\u02bc\u0060\u00b4\u2039\u203a\u275b\u275c"}
_QUOTES.update({c: '"' for c in "\u201c\u201d\u201e\u201f\u2033\u2036\u00ab\u00bb\u301d\u301e\u275d\u275e"})
_DASHES = {c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2e3a\u2e3b\ufe58\ufe63\uff0d"}
# Invisible characters: zero-width space/joiners, BOM, soft hyphen, word joiner and
# invisible operators, bidi marks (LRM, RLM, ALM) and bidi embedding/isolate controls.
# ZWJ/ZWNJ change the rendering of some Bangla conjuncts, but outlets disagree on using
# them, so for comparison they carry no information. They go *before* NFKC: a vowel
# sign split by a ZWNJ (ক + ে + ZWNJ + া) must compose like the unsplit one (কো).
_INVISIBLE = {c: None for c in "\u00ad\u061c\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                                "\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufeff"}
# Control characters become spaces; lone surrogates (undecodable bytes) become U+FFFD.
_CONTROLS = {chr(c): " " for c in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0)]}
_SURROGATES = {chr(c): "\ufffd" for c in range(0xD800, 0xE000)}
_TABLE = str.maketrans({**_SURROGATES, **_CONTROLS, **_INVISIBLE, **_QUOTES, **_DASHES})
# One search finds texts that need the (slow, per-character) translate at all.
_MAPPED = re.compile("[" + "".join(re.escape(c) for c in sorted(
    {**_CONTROLS, **_INVISIBLE, **_QUOTES, **_DASHES})) + "\ud800-\udfff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")



def clean_invalid(text: str) -> str:
    """Replace lone surrogates (from undecodable bytes) with U+FFFD and drop control characters."""
    text = _SURROGATE.sub("\ufffd", text)
    return _CONTROL.sub(" ", text)


def _mapped(text: str) -> str:
    """Surrogates, controls, invisible characters, quotes and dashes replaced (see _TABLE)."""
    return text.translate(_TABLE) if _MAPPED.search(text) else text


def _canonical(text: str) -> str:
    """Mapped, NFKC, mapped again; whitespace not yet collapsed (line breaks survive)."""
    mapped = _mapped(text)
    normal = nfkc(mapped)
    # A mapped text holds no mapped character; only what NFKC changed can bring one back.
    return mapped if normal is mapped else _mapped(normal)


def normalize_text(text: str | None) -> str:
    """Invisible characters removed and quotes/dashes mapped, NFKC, whitespace collapsed.

    Idempotent: normalising the result again changes nothing (tests/test_text.py, hypothesis).
    """
    if not text:
        return ""
    # str.split() splits on exactly the characters re's \s matches: the same collapse, faster.
    return " ".join(_canonical(text).split())


@lru_cache(maxsize=64)
def _boilerplate_regex(patterns: tuple[str, ...]) -> re.Pattern | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


def is_boilerplate(line: str, rx: re.Pattern | None, max_chars: int) -> bool:
    """A normalised line is boilerplate when it is short and matches a pattern as a whole.

    The length limit keeps real paragraphs that happen to start like a label
    ("Related research shows ...", "Sponsored by the ministry, the programme ...").
    """
    return bool(rx is not None and line and len(line) <= max_chars and rx.fullmatch(line))


def strip_boilerplate(text: str | None, patterns: Sequence[str], max_chars: int = 200) -> str:
    """Drop whole lines that are boilerplate ("Read more: ...", share bars, ...); the rest stays as it was."""
    if not text:
        return ""
    rx = _boilerplate_regex(tuple(patterns))
    return "\n".join(line for line in text.splitlines() if not is_boilerplate(normalize_text(line), rx, max_chars))


def body_text(body: str | None, patterns: Sequence[str], max_chars: int = 200) -> str:
    """normalize_text(strip_boilerplate(body)), normalising each line once.

    The body is normalised in one piece with its line breaks: NFKC never
    composes across a line break, so this equals normalising line by line.
    """
    if not body:
        return ""
    rx = _boilerplate_regex(tuple(patterns))
    canonical = _canonical("\n".join(body.splitlines()))
    lines = canonical.split("\n")
    if not _collapsed(np.frombuffer(canonical.encode("utf-32-le", "surrogatepass"), dtype=np.uint32),
                      _whitespace()):
        lines = [" ".join(line.split()) for line in lines]
    return " ".join(line for line in lines if line and not is_boilerplate(line, rx, max_chars))


@per_machine
def _whitespace() -> np.ndarray:
    """str.isspace (what str.split() splits on) for every code point up to the last whitespace one."""
    space = [cp for cp in range(0x110000) if chr(cp).isspace()]
    table = np.zeros(space[-1] + 1, dtype=np.bool_)
    table[space] = True
    return table


@njit(cache=True)
def _collapsed(cps, whitespace):
    """Whether every line of a text ('\n'-separated code points) equals " ".join(line.split()):
    its only whitespace is single spaces between other characters.

    One compiled pass over the code points, where splitting and joining would make a
    string of every word; most bodies are already collapsed."""
    prev = 10                                # a line starts as if after '\n'
    for c in cps:
        if c == 32:
            if prev == 32 or prev == 10:
                return False
        elif c == 10:
            if prev == 32:
                return False
        elif c < whitespace.shape[0] and whitespace[c]:
            return False
        prev = c
    return prev != 32


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


def content_key(title: str | None, body: str | None, boilerplate: Sequence[str], max_line: int = 200) -> str:
    """The normalised headline + body that stage 2 hashes; '' when there is no text at all."""
    head = normalize_text(title)
    text = body_text(body, boilerplate, max_line)
    if not head and not text:
        return ""
    return head + "\n" + text


def sha256_hex(text: str | bytes) -> str:
    """The content hash: sha256 of the key's UTF-8 bytes (given as text, or already encoded)."""
    return hashlib.sha256(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()


def language(bengali: int, latin: int, hint: str | None = None) -> str:
    """'bn' or 'en' (or 'other') from counts of Bengali-block and Latin letters; an explicit hint wins.

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
    if bengali == 0 and latin == 0:
        return "other"
    return "bn" if bengali >= latin else "en"


@njit(cache=True)
def _script_counts(utf8, offsets):
    """Per text utf8[offsets[d]:offsets[d + 1]] (valid UTF-8): Bengali-block and Latin code points."""
    n = offsets.shape[0] - 1
    bengali = np.zeros(n, dtype=np.int64)
    latin = np.zeros(n, dtype=np.int64)
    for d in range(n):
        i = offsets[d]
        while i < offsets[d + 1]:
            b = np.int64(utf8[i])
            if b < 0x80:                                  # one byte: ASCII
                c, i = b, i + 1
            elif b < 0xE0:                                # two bytes: U+0080-U+07FF
                c, i = ((b & 0x1F) << 6) | (utf8[i + 1] & 0x3F), i + 2
            elif b < 0xF0:                                # three bytes: U+0800-U+FFFF
                c, i = ((b & 0x0F) << 12) | ((utf8[i + 1] & 0x3F) << 6) | (utf8[i + 2] & 0x3F), i + 3
            else:                                         # four bytes: beyond either script
                c, i = 0, i + 4
            if 0x0980 <= c <= 0x09FF:
                bengali[d] += 1
            elif 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A or 0xC0 <= c <= 0x24F:
                latin[d] += 1
    return bengali, latin


def script_counts(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(Bengali-block characters, Latin letters: A-Z, a-z, U+00C0-U+024F) per text, a batch at once."""
    return utf8_script_counts([t.encode("utf-8") for t in texts])


def utf8_script_counts(encoded: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """script_counts of texts already encoded as UTF-8 (ContentKeys.batch hashes the same bytes)."""
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    return _script_counts(np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets)


def detect_language(text: str, hint: str | None = None) -> str:
    bengali, latin = script_counts([text])
    return language(int(bengali[0]), int(latin[0]), hint)


class ContentKeys:
    """Stage-2 columns for a batch; also the normalised text and language the later stages fingerprint."""

    FIELDS = (("content_hash", "string"), ("text_chars", "int"), ("lang", "string"), ("lang_detected", "boolean"))

    def __init__(self, content_conf: "ContentConfig", max_chars: int):
        self.boilerplate = tuple(content_conf.boilerplate_lines)
        self.max_line = int(content_conf.boilerplate_max_chars)
        self.max_chars = int(max_chars)

    def key(self, title: str | None, body: str | None, html: str | None,
            flags: list[str]) -> tuple[str | None, str]:
        """(body extracted from html or None, the truncated content key); flags from_html, truncated."""
        from_html = None
        if (body is None or not body.strip()) and html:
            body = from_html = html_to_text(html)
            flags.append("from_html")
        key = content_key(title, body, self.boilerplate, self.max_line)
        if len(key) > self.max_chars:
            key = key[: self.max_chars]
            flags.append("truncated")
        return from_html, key

    def batch(self, titles: Sequence[str | None], bodies: Sequence[str | None], htmls: Sequence[str | None],
              hints: Sequence[str | None], flags: Sequence[list[str]]) -> dict[str, list]:
        """FIELDS for every document of a batch, plus body_from_html (set only where the body was
        extracted from html: Spark keeps the stored body otherwise), key and has_body for stage 3."""
        from_html, keys = [], []
        for title, body, html, fl in zip(titles, bodies, htmls, flags):
            extracted, key = self.key(title, body, html, fl)
            from_html.append(extracted)
            keys.append(key)
        has_body = [bool(key.partition("\n")[2]) for key in keys]
        encoded = [key.encode("utf-8") for key in keys]
        bengali, latin = utf8_script_counts(encoded)
        out: dict[str, list] = {"body_from_html": from_html, "key": keys, "has_body": has_body,
                                "content_hash": [], "text_chars": [], "lang": [], "lang_detected": []}
        for i, (key, body, fl) in enumerate(zip(keys, has_body, flags)):
            if not body:
                fl.append("empty_body")
            # A headline alone is too weak a key: two different stories can share "Live updates".
            out["content_hash"].append(sha256_hex(encoded[i]) if body else None)
            out["text_chars"].append(len(key))
            out["lang"].append(language(int(bengali[i]), int(latin[i]), hints[i]))
            out["lang_detected"].append(not bool(hints[i] and hints[i].strip()))
        return out

    def columns(self, title: str | None, body: str | None, html: str | None, lang_hint: str | None,
                flags: list[str]) -> dict[str, Any]:
        """One document (tests, tools): `batch` of one, with the body as stored."""
        out = {k: v[0] for k, v in self.batch([title], [body], [html], [lang_hint], [flags]).items()}
        out["body"] = out.pop("body_from_html") or body
        return out


class ContentStage(ExactKeyStage):
    name = "content"
    key = "content_hash"
