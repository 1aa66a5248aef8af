"""The catalogue of bad input (issue #24, item 4): every class, how to make it, and what it gets.

Three shapes of class:

- RowClass: rows in the canonical snapshot schema (id string, text columns of arbitrary bytes,
  published_at string), all classes of a run in one snapshot directory (two files, so that ids
  and URLs can repeat across files). Each row carries its own expected Outcome: a duplicate
  id's first copy is processed and its second quarantined.
- FileClass: a Parquet file of its own, because its column types or its columns would change how
  the whole snapshot's schema is reconciled (published_at as a timestamp, an epoch or a date, an
  id of type double, a text column of numbers, an html-only file...). Each gives rows and their
  Outcomes too.
- RefusalClass / JsonlClass: whole inputs the job refuses in one line (`run`), and JSON-lines
  inputs of `newsdedup check` (the only reader of JSON lines).

A class's rows come from `rows(base, rng, big)`: ids are in [base, base + 1000) (or, for the id
classes, strings derived from base), so that the outputs of many classes in one run can be told
apart; rng varies the hostile content (hypothesis draws it); big=False shrinks the 50 MB body.

docs/reliability.md is the table of these classes; tests/test_bad_input_catalogue.py holds one
test per class and the property test that draws from all of them.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

UTC = timezone.utc
GOOD_TS = "2024-05-01T08:00:00Z"
NAIVE_TZ = "America/New_York"       # the catalogue's input.naive_timezone: it has DST gaps and overlaps
MAX_TEXT_CHARS = 1000
FIFTY_MB = 50 * 1024 * 1024
CATALOGUE_CONF = {"naive_timezone": NAIVE_TZ, "max_text_chars": MAX_TEXT_CHARS}


@dataclass(frozen=True)
class Outcome:
    """What one input row gets.

    kind: processed (a document) or quarantined. reason: the quarantine reason. flags: prefixes each
    of which one of the document's flags starts with. published_at: the document's timestamp as
    Spark prints it (UTC), "" for null, None for unchecked. url_error: prefix of the document's.
    linked: the stage that links the document as a duplicate (checked where the stages ran).
    """

    kind: str
    reason: str | None = None
    flags: tuple[str, ...] = ()
    published_at: str | None = None
    url_error: str | None = None
    linked: str | None = None

    def text(self) -> str:
        if self.kind == "quarantined":
            return f"quarantined: `{self.reason}`"
        extra = [f"flag `{f}…`" for f in self.flags]
        if self.url_error:
            extra.append(f"url_error `{self.url_error}…`")
        if self.published_at is not None:
            extra.append(f"published_at {self.published_at or 'null'}")
        if self.linked:
            extra.append(f"linked by stage {self.linked}")
        return "processed" + (f" ({', '.join(extra)})" if extra else "")


PROCESSED = Outcome("processed")


def quarantined(reason: str) -> Outcome:
    return Outcome("quarantined", reason=reason)


def processed(*flags: str, **kw) -> Outcome:
    return Outcome("processed", flags=flags, **kw)


@dataclass(frozen=True)
class Row:
    id: object                   # str | int | None: the raw id as the file holds it
    expect: Outcome
    url: object = None
    title: object = "Title"
    body: object = None
    published_at: object = GOOD_TS
    source: object = "ex"
    lang: object = "en"
    file: str = "rows"           # which file of the snapshot holds it


def story(k: int, n: int = 30) -> str:
    """n words unique to k: no accidental near-duplicates between rows."""
    return " ".join(f"c{k}v{i}{'abcdefghij'[(i * k + 3) % 10]}" for i in range(n))


def with_id(row: Row, raw) -> Row:
    """row with its id column holding raw (None, a string that is no integer...)."""
    return replace(row, id=raw)


def good(i: int, expect: Outcome = PROCESSED, **cols) -> Row:
    """A well-formed article with id i, its columns replaced by cols."""
    base = {"url": f"https://cat.example/{i}", "body": story(i)}
    base.update(cols)
    return Row(str(i), expect, **base)


# ---------------------------------------------------------------- random text

PLANES = {   # (first, last) code points drawn from, per plane; surrogates and noncharacters left out
    "BMP": (0x20, 0xD7FF), "SMP": (0x10000, 0x1FFFD), "SIP": (0x20000, 0x2FFFD), "TIP": (0x30000, 0x3FFFD),
    "SSP": (0xE0000, 0xEFFFD), "SPUA-A": (0xF0000, 0xFFFFD), "SPUA-B": (0x100000, 0x10FFFD),
}


def random_text(rng: random.Random, lo: int, hi: int, n: int) -> str:
    return "".join(chr(rng.randint(lo, hi)) for _ in range(n))


def every_plane(rng: random.Random, n: int = 12) -> str:
    return " ".join(random_text(rng, lo, hi, n) for lo, hi in PLANES.values())


RTL = "\u200f\u202b\u202e\u2067"          # RLM, RLE, RLO, RLI
ARABIC = "الأخبار العاجلة من القاهرة اليوم"
HEBREW = "חדשות היום מירושלים"
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
BANGLA = "ঢাকায় আজ সকাল থেকে ভারী বৃষ্টি হচ্ছে"


def combining(rng: random.Random, word: str, per_char: int = 6) -> str:
    return "".join(ch + "".join(chr(rng.randint(0x300, 0x36F)) for _ in range(per_char)) for ch in word)


def controls(rng: random.Random, n: int = 16) -> str:
    pool = [chr(c) for c in range(1, 32) if c not in (9, 10, 13)] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)]
    return "".join(rng.choice(pool) for _ in range(n))


# ---------------------------------------------------------------- row classes

@dataclass(frozen=True)
class RowClass:
    name: str
    example: str
    make: Callable[[int, random.Random, bool], list[Row]]
    group: str

    def rows(self, base: int, rng: random.Random, big: bool = True) -> list[Row]:
        return self.make(base, rng, big)


def _registrar(registry: list, kind):
    """A decorator factory: @name(class name, group, example) files the function it decorates as a class."""
    def declare(name: str, group: str, example: str):
        def register(fn):
            registry.append(kind(name, example, fn, group))
            return fn
        return register
    return declare


ROW_CLASSES: list[RowClass] = []
row_class = _registrar(ROW_CLASSES, RowClass)


# Unicode
@row_class("unicode_every_plane", "unicode", "title and body of random code points from all 17 planes' assigned ranges")
def _(b, rng, big):
    return [good(b, title=every_plane(rng, 4), body=every_plane(rng) + " " + story(b))]


@row_class("unicode_only_astral", "unicode", "a body of supplementary-plane characters only (no ASCII word)")
def _(b, rng, big):
    return [good(b, body=" ".join(random_text(rng, 0x20000, 0x2A6DF, 8) for _ in range(20)))]


@row_class("noncharacters_private_use", "unicode", "U+FFFE, U+FFFF, U+FDD0, U+10FFFF and private-use characters")
def _(b, rng, big):
    return [good(b, title="\ufffe\uffff\ufdd0", body="\U0010ffff\ue000\U000f0000 " + story(b))]


@row_class("emoji_sequences", "unicode", "ZWJ emoji, flags and skin-tone modifiers in every text column")
def _(b, rng, big):
    e = "👩‍👩‍👧‍👦🇧🇩👍🏽"
    return [good(b, title=e, body=e * 20 + " " + story(b), source=e, url=f"https://cat.example/{b}/{e}")]


@row_class("rtl_and_bidi_controls", "unicode", "Arabic and Hebrew with RLM/RLE/RLO/RLI marks, in url too")
def _(b, rng, big):
    mixed = f"{RTL}{ARABIC} {HEBREW}{RTL[::-1]} "
    return [good(b, title=mixed, body=mixed + story(b), url=f"https://cat.example/{b}/\u202e{ARABIC[:6]}")]


@row_class("combining_marks", "unicode", "letters carrying 6 combining marks each ('zalgo'), Bangla vowel signs")
def _(b, rng, big):
    return [good(b, title=combining(rng, "Storm"), body=combining(rng, "storm warning", 8) + " " + BANGLA + " "
                 + story(b), lang=None)]


@row_class("zero_width_only", "unicode", "a body of zero-width characters only (ZWSP, ZWNJ, ZWJ, WJ, BOM)")
def _(b, rng, big):
    return [good(b, processed("empty_body"), title=ZERO_WIDTH, body=ZERO_WIDTH * rng.randint(1, 5))]


@row_class("zero_width_inside_words", "unicode", "zero-width characters between the letters of every word")
def _(b, rng, big):
    zw = rng.choice(ZERO_WIDTH[:4])
    return [good(b, body=zw.join(story(b)))]


@row_class("control_characters", "unicode", "C0 and C1 control characters and DEL in title, body, source")
def _(b, rng, big):
    return [good(b, title=controls(rng), body=controls(rng) + " " + story(b) + controls(rng), source=controls(rng, 4))]


@row_class("nul_characters", "unicode", "U+0000 inside title and body")
def _(b, rng, big):
    return [good(b, title="a\x00b", body="\x00" + story(b).replace(" ", "\x00 ", 3))]


@row_class("invalid_utf8", "encoding", "bytes that are not UTF-8 (\\xff\\xfe, a cut sequence) in title and body")
def _(b, rng, big):
    return [good(b, processed("invalid_utf8:title", "invalid_utf8:body"), title=b"Caf\xe9",
                 body=b"\xff\xfe " + story(b).encode() + b" \xe0\xa6")]


@row_class("surrogate_bytes", "encoding", "a lone surrogate encoded as bytes (CESU-8 \\xed\\xa0\\x80) in Parquet text")
def _(b, rng, big):
    return [good(b, processed("invalid_utf8:title", "invalid_utf8:body"), title=b"x\xed\xa0\x80y",
                 body=b"\xed\xb0\x80 " + story(b).encode())]


@row_class("overlong_utf8", "encoding", "overlong encodings (\\xc0\\x80, \\xe0\\x80\\xaf) and code points over U+10FFFF")
def _(b, rng, big):
    return [good(b, processed("invalid_utf8:body"), body=b"\xc0\x80\xe0\x80\xaf\xf4\x90\x80\x80 " + story(b).encode())]


@row_class("invalid_utf8_url", "encoding", "a URL with a Latin-1 byte (caf\\xe9)")
def _(b, rng, big):
    return [good(b, processed("invalid_utf8:url"), url=f"https://cat.example/{b}/caf".encode() + b"\xe9")]


@row_class("latin1_and_utf8_mixed", "encoding", "one file whose rows are UTF-8, Latin-1 and Windows-1252 encoded")
def _(b, rng, big):
    text = "Café “naïve” résumé"
    return [good(b, title=text, body=text + " " + story(b)),
            good(b + 1, processed("invalid_utf8:title", "invalid_utf8:body"), title=text.encode("cp1252"),
                 body=(text + " " + story(b + 1)).encode("cp1252")),
            good(b + 2, processed("invalid_utf8:body"), body=("Café " + story(b + 2)).encode("latin-1"))]


# Blank and null fields, each column
@row_class("null_id", "blank", "id is null")
def _(b, rng, big):
    return [with_id(good(b, quarantined("id is null")), None)]


@row_class("blank_id", "blank", "id is '' or only whitespace")
def _(b, rng, big):
    return [with_id(good(b, quarantined("id is not an integer")), ""),
            with_id(good(b + 1, quarantined("id is not an integer")), " \t ")]


@row_class("null_url", "blank", "url is null")
def _(b, rng, big):
    return [good(b, processed(url_error="url is null"), url=None)]


@row_class("blank_url", "blank", "url is '' or whitespace")
def _(b, rng, big):
    return [good(b, processed(url_error="url is empty"), url=""),
            good(b + 1, processed(url_error="url is empty"), url=" \t\n")]


@row_class("null_and_blank_title", "blank", "title null, '' and whitespace")
def _(b, rng, big):
    return [good(b, title=None), good(b + 1, title=""), good(b + 2, title="  \n ")]


@row_class("null_body", "blank", "body null (title present)")
def _(b, rng, big):
    return [good(b, processed("empty_body"), body=None)]


@row_class("empty_and_blank_body", "blank", "body '' (0 bytes) and whitespace only")
def _(b, rng, big):
    return [good(b, processed("empty_body"), body=""), good(b + 1, processed("empty_body"), body=" \n\t\u3000 ")]


@row_class("null_published_at", "blank", "published_at null")
def _(b, rng, big):
    return [good(b, processed("no_published_at", published_at=""), published_at=None)]


@row_class("blank_published_at", "blank", "published_at '' and whitespace")
def _(b, rng, big):
    return [good(b, processed("unparseable_published_at:", published_at=""), published_at=""),
            good(b + 1, processed("unparseable_published_at:", published_at=""), published_at="   ")]


@row_class("null_and_blank_source", "blank", "source null, '' and whitespace")
def _(b, rng, big):
    return [good(b, source=None), good(b + 1, source=""), good(b + 2, source="   ")]


@row_class("null_and_blank_lang", "blank", "lang null, '' and an unknown code")
def _(b, rng, big):
    return [good(b, lang=None), good(b + 1, lang=""), good(b + 2, lang="klingon")]


@row_class("everything_null_but_id", "blank", "only the id is set")
def _(b, rng, big):
    return [Row(str(b), processed("no_published_at", "empty_body", url_error="url is null", published_at=""),
                url=None, title=None, body=None, published_at=None, source=None, lang=None)]


# Body sizes
@row_class("body_one_byte", "size", "a body of one byte")
def _(b, rng, big):
    return [good(b, body="x")]


@row_class("body_over_max_text_chars", "size", f"a body of max_text_chars + 1 = {MAX_TEXT_CHARS + 1} characters")
def _(b, rng, big):
    return [good(b, processed("truncated"), body=(story(b, 400) * 2)[:MAX_TEXT_CHARS + 1])]


@row_class("body_50_mb", "size", "a body of 50 MiB (52,428,800 bytes of text); 300 KB in the property test")
def _(b, rng, big):
    size = FIFTY_MB if big else 300_000
    unit = story(b, 50) + " "
    return [good(b, processed("truncated"), body=(unit * (size // len(unit) + 1))[:size])]


# Ids
@row_class("id_not_an_integer", "id", "ids '12a', '1e3', '0x10', '1.5', Arabic-Indic and full-width digits")
def _(b, rng, big):
    raw = [f"{b}a", "1e3", "0x10", "1.5", "١٢٣", "１２３"]
    return [with_id(good(b + k, quarantined("id is not an integer")), r) for k, r in enumerate(raw)]


@row_class("id_out_of_range", "id", "ids beyond int64: 2**63 and 25 nines")
def _(b, rng, big):
    return [with_id(good(b, quarantined("id is not an integer")), str(2**63)),
            with_id(good(b + 1, quarantined("id is not an integer")), "9" * 25)]


@row_class("id_padded_and_signed", "id", "ids ' 13 ', '+14', '007' (read as integers)")
def _(b, rng, big):
    return [with_id(good(b), f" {b} "), with_id(good(b + 1), f"+{b + 1}"), with_id(good(b + 2), f"00{b + 2}")]


@row_class("id_int64_edges", "id", "ids near -2**63 and 2**63-1, negative ids")
def _(b, rng, big):
    return [with_id(good(b + k), str(v)) for k, v in
            enumerate([-(2**63) + b, -b, 2**63 - b])]


@row_class("duplicate_id_in_one_file", "duplicate", "one id on two different articles in one file")
def _(b, rng, big):
    return [good(b, published_at="2024-05-01T08:00:00Z"),
            good(b, quarantined("duplicate id"), url=f"https://cat.example/{b}/later", body=story(b + 1),
                 published_at="2024-05-02T08:00:00Z")]


@row_class("duplicate_row_exact_copy", "duplicate", "the same row twice (every column equal)")
def _(b, rng, big):
    return [good(b), good(b, quarantined("duplicate id"))]


@row_class("duplicate_id_across_files", "duplicate", "one id in two files of the snapshot")
def _(b, rng, big):
    return [good(b), good(b, quarantined("duplicate id"), body=story(b + 1), url=f"https://cat.example/{b}/b",
                         published_at="2024-05-03T00:00:00Z", file="rows_b")]


@row_class("duplicate_id_three_copies", "duplicate", "one id three times, the earliest copy undated")
def _(b, rng, big):
    # An undated copy orders after dated ones: the dated one is kept.
    return [good(b, quarantined("duplicate id"), published_at=None, url=f"https://cat.example/{b}/a"),
            good(b, published_at="2024-05-01T00:00:00Z", url=f"https://cat.example/{b}/b"),
            good(b, quarantined("duplicate id"), published_at="2024-06-01T00:00:00Z", url=f"https://cat.example/{b}/c")]


@row_class("duplicate_url_in_one_file", "duplicate", "two ids with one URL in one file")
def _(b, rng, big):
    url = f"https://cat.example/{b}/same"
    return [good(b, url=url, published_at="2024-05-01T00:00:00Z"),
            good(b + 1, processed(linked="url"), url=url, body=story(b + 1), published_at="2024-05-02T00:00:00Z")]


@row_class("duplicate_url_across_files", "duplicate", "two ids with one URL (tracking parameters differ) in two files")
def _(b, rng, big):
    return [good(b, url=f"https://cat.example/{b}/x?utm_source=a", published_at="2024-05-01T00:00:00Z"),
            good(b + 1, processed(linked="url"), url=f"http://cat.example/{b}/x?utm_source=b&fbclid=z",
                 body=story(b + 1), published_at="2024-05-02T00:00:00Z", file="rows_b")]


# Timestamps (published_at as a string column)
def _ts(b: int, value, expect: Outcome) -> Row:
    return good(b, expect, published_at=value)


@row_class("ts_1970_epoch_start", "time", "'1970-01-01T00:00:00Z' and the digits '0'")
def _(b, rng, big):
    return [_ts(b, "1970-01-01T00:00:00Z", processed(published_at="1970-01-01 00:00:00")),
            _ts(b + 1, "0", processed("unparseable_published_at:0", published_at=""))]


@row_class("ts_year_2100", "time", "'2100-01-01T00:00:00Z': readable, later than the run")
def _(b, rng, big):
    return [_ts(b, "2100-01-01T00:00:00Z", processed("implausible_published_at:", published_at="2100-01-01 00:00:00"))]


@row_class("ts_far_future", "time", "'9999-12-31T23:59:59Z' and year 10000")
def _(b, rng, big):
    return [_ts(b, "9999-12-31T23:59:59Z", processed("implausible_published_at:", published_at="9999-12-31 23:59:59")),
            _ts(b + 1, "+10000-01-01T00:00:00Z", processed("unparseable_published_at:", published_at=""))]


@row_class("ts_far_past", "time", "year 1 and 1799 (before input.published_at_min)")
def _(b, rng, big):
    return [_ts(b, "0001-01-01T00:00:00Z", processed("implausible_published_at:", published_at="0001-01-01 00:00:00")),
            _ts(b + 1, "1799-12-31T00:00:00Z", processed("implausible_published_at:",
                                                         published_at="1799-12-31 00:00:00"))]


@row_class("ts_naive", "time", f"'2024-07-01 12:00:00' without a zone: read in naive_timezone ({NAIVE_TZ})")
def _(b, rng, big):
    return [_ts(b, "2024-07-01 12:00:00", processed(published_at="2024-07-01 16:00:00")),
            _ts(b + 1, "2024-01-15T12:00:00", processed(published_at="2024-01-15 17:00:00"))]


@row_class("ts_dst_gap", "time", "'2024-03-10 02:30:00' naive: a wall time New York skipped")
def _(b, rng, big):
    return [_ts(b, "2024-03-10 02:30:00", processed(published_at="2024-03-10 07:30:00"))]


@row_class("ts_dst_overlap", "time", "'2024-11-03 01:30:00' naive: a wall time New York had twice")
def _(b, rng, big):
    return [_ts(b, "2024-11-03 01:30:00", processed(published_at="2024-11-03 05:30:00"))]


@row_class("ts_offsets", "time", "zones +05:45, +14:00, -12:00 and Z")
def _(b, rng, big):
    return [_ts(b, "2024-05-01T12:00:00+05:45", processed(published_at="2024-05-01 06:15:00")),
            _ts(b + 1, "2024-05-01T12:00:00+14:00", processed(published_at="2024-04-30 22:00:00")),
            _ts(b + 2, "2024-05-01T12:00:00-12:00", processed(published_at="2024-05-02 00:00:00"))]


@row_class("ts_epoch_digits", "time", "epochs written as digits: seconds and milliseconds")
def _(b, rng, big):
    return [_ts(b, "1700000000", processed(published_at="2023-11-14 22:13:20")),
            _ts(b + 1, "1700000000000", processed(published_at="2023-11-14 22:13:20"))]


@row_class("ts_impossible_dates", "time", "'2023-02-29', '2024-13-45', '24:00', a leap second ':60'")
def _(b, rng, big):
    bad = ["2023-02-29T00:00:00Z", "2024-13-45T00:00:00Z", "2024-05-01T24:00:00Z", "2016-12-31T23:59:60Z"]
    return [_ts(b + k, v, processed("unparseable_published_at:", published_at="")) for k, v in enumerate(bad)]


@row_class("ts_garbage", "time", "'not a date', random Unicode, 5000 characters")
def _(b, rng, big):
    return [_ts(b, "not a date", processed("unparseable_published_at:not a date", published_at="")),
            _ts(b + 1, every_plane(rng, 3), processed("unparseable_published_at:", published_at="")),
            _ts(b + 2, "2" * 5000, processed("unparseable_published_at:", published_at=""))]


# ---------------------------------------------------------------- writing row classes

COLUMNS = ("id", "url", "title", "body", "published_at", "source", "lang")


def _text(values) -> pa.Array:
    """A Parquet string column holding arbitrary bytes (pyarrow does not validate a view)."""
    raw = [v if v is None or isinstance(v, bytes) else str(v).encode("utf-8", "surrogatepass") for v in values]
    return pa.array(raw, type=pa.binary()).view(pa.string())


def write_rows(directory: Path, rows: list[Row]) -> list[Path]:
    """rows as Parquet files in directory, one per Row.file, all of the canonical schema."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in sorted({r.file for r in rows}):
        part = [r for r in rows if r.file == name]
        table = pa.table({c: _text([getattr(r, c) for r in part]) for c in COLUMNS})
        path = directory / f"{name}.parquet"
        pq.write_table(table, path)
        written.append(path)
    return written


# ---------------------------------------------------------------- file classes (a file each)

@dataclass(frozen=True)
class FileClass:
    """A file of its own. write(path, base, rng) writes it and returns (raw id, Outcome) per row."""

    name: str
    example: str
    write: Callable[[Path, int, random.Random], list[tuple[object, Outcome]]]
    group: str = "type"


FILE_CLASSES: list[FileClass] = []
file_class = _registrar(FILE_CLASSES, FileClass)


def _table(ids, n=None, **cols) -> dict:
    n = len(ids)
    base = {"id": pa.array(ids, pa.int64()), "url": [f"https://cat.example/{i}" for i in ids],
            "title": [f"T{i}" for i in ids], "body": [story(i) for i in ids],
            "published_at": pa.array([datetime(2024, 5, 1, 8, tzinfo=UTC)] * n, pa.timestamp("us", tz="UTC")),
            "source": ["ex"] * n, "lang": ["en"] * n}
    base.update(cols)
    return {k: v for k, v in base.items() if v is not None}


def _write(path: Path, **cols) -> None:
    pq.write_table(pa.table(cols), path)


@file_class("ts_typed_timestamps", "time", "published_at of Parquet type timestamp (µs and ms, UTC): years 1, 1970, 9999")
def _(path, b, rng):
    ts = [datetime(1, 1, 1, tzinfo=UTC), datetime(1970, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)]
    _write(path, **_table([b, b + 1, b + 2], published_at=pa.array(ts, pa.timestamp("ms", tz="UTC"))))
    return [(b, processed("implausible_published_at:", published_at="0001-01-01 00:00:00")),
            (b + 1, processed(published_at="1970-01-01 00:00:00")),
            (b + 2, processed("implausible_published_at:", published_at="9999-12-31 23:59:59"))]


@file_class("ts_naive_timestamp_column", "time", "published_at of type timestamp without zone, in a DST gap and overlap")
def _(path, b, rng):
    ts = [datetime(2024, 7, 1, 12), datetime(2024, 3, 10, 2, 30), datetime(2024, 11, 3, 1, 30)]
    _write(path, **_table([b, b + 1, b + 2], published_at=pa.array(ts, pa.timestamp("us"))))
    return [(b, processed(published_at="2024-07-01 16:00:00")), (b + 1, processed(published_at="2024-03-10 07:30:00")),
            (b + 2, processed(published_at="2024-11-03 05:30:00"))]


@file_class("ts_date_column", "time", "published_at of type date (day only)")
def _(path, b, rng):
    _write(path, **_table([b, b + 1], published_at=pa.array([date(2024, 5, 1), date(1, 1, 1)], pa.date32())))
    return [(b, processed(published_at="2024-05-01 00:00:00")),
            (b + 1, processed("implausible_published_at:", published_at="0001-01-01 00:00:00"))]


@file_class("ts_integer_epochs", "time", "published_at int64 epochs: s, ms, µs, ns, 0, negative, int64 min")
def _(path, b, rng):
    s = 1_700_000_000
    vals = [s, s * 1000, s * 10**6, s * 10**9, 0, -10**9, -(2**63), None]
    _write(path, **_table(list(range(b, b + len(vals))), published_at=pa.array(vals, pa.int64())))
    ok = processed(published_at="2023-11-14 22:13:20")
    return [(b, ok), (b + 1, ok), (b + 2, ok), (b + 3, ok), (b + 4, processed(published_at="1970-01-01 00:00:00")),
            (b + 5, processed(published_at="1938-04-24 22:13:20")),
            (b + 6, processed("unparseable_published_at:", published_at="")),
            (b + 7, processed("no_published_at", published_at=""))]


@file_class("ts_fractional_epochs", "time", "published_at double epochs, NaN and infinity")
def _(path, b, rng):
    vals = [1_700_000_000.5, float("nan"), float("inf"), -float("inf")]
    _write(path, **_table(list(range(b, b + 4)), published_at=pa.array(vals, pa.float64())))
    bad = processed("unparseable_published_at:", published_at="")
    return [(b, processed(published_at="2023-11-14 22:13:20.5")), (b + 1, bad), (b + 2, bad), (b + 3, bad)]


@file_class("id_double_column", "type", "id of type double: 7.0, 7.5, NaN, 1e30")
def _(path, b, rng):
    vals = [float(b), b + 0.5, float("nan"), 1e30]
    _write(path, **_table(list(range(b, b + 4)), id=pa.array(vals, pa.float64())))
    bad = quarantined("id is not an integer")
    return [(float(b), PROCESSED), (b + 0.5, bad), (float("nan"), bad), (1e30, bad)]


@file_class("id_boolean_column", "type", "id of type boolean")
def _(path, b, rng):
    _write(path, **_table([b, b + 1], id=pa.array([True, False])))
    bad = quarantined("id is not an integer")
    return [(True, bad), (False, bad)]


@file_class("id_int32_and_string_digits", "type", "id of type int32")
def _(path, b, rng):
    _write(path, **_table([b, b + 1], id=pa.array([b, b + 1], pa.int32())))
    return [(b, PROCESSED), (b + 1, PROCESSED)]


@file_class("text_columns_as_numbers", "type", "title int64, body double, source boolean, lang int32")
def _(path, b, rng):
    _write(path, **_table([b, b + 1], title=pa.array([42, None], pa.int64()), body=pa.array([3.5, 1e300]),
                          source=pa.array([True, False]), lang=pa.array([1, 2], pa.int32())))
    return [(b, PROCESSED), (b + 1, PROCESSED)]


@file_class("text_columns_as_binary", "type", "title and body of Parquet type binary (no UTF-8 annotation)")
def _(path, b, rng):
    _write(path, **_table([b, b + 1], title=pa.array([b"plain", b"\xff"], pa.binary()),
                          body=pa.array([story(b).encode(), b"\xfe" + story(b + 1).encode()], pa.binary())))
    return [(b, PROCESSED), (b + 1, processed("invalid_utf8:title", "invalid_utf8:body"))]


@file_class("missing_optional_columns", "columns", "a file without title and lang columns")
def _(path, b, rng):
    _write(path, **_table([b, b + 1], title=None, lang=None))
    return [(b, PROCESSED), (b + 1, PROCESSED)]


@file_class("html_instead_of_body", "columns", "a file with html and no body column (one page empty, one broken)")
def _(path, b, rng):
    html = [f"<html><body><article><h1>Storm</h1><p>{story(b)}</p></article></body></html>", "<html></html>",
            f"<p>unclosed <b>{story(b + 2)}"]
    _write(path, **_table([b, b + 1, b + 2], body=None, html=html))
    return [(b, processed("from_html")), (b + 1, processed("empty_body")), (b + 2, processed("from_html"))]


@file_class("null_typed_columns", "columns", "title, lang and published_at of Parquet type null (pyarrow's all-null)")
def _(path, b, rng):
    n = 2
    _write(path, **_table([b, b + 1], title=pa.nulls(n, pa.null()), lang=pa.nulls(n, pa.null()),
                          published_at=pa.nulls(n, pa.null())))
    return [(b, processed("no_published_at", published_at="")), (b + 1, processed("no_published_at", published_at=""))]


@file_class("nested_extra_columns", "columns", "extra columns of struct, list and map type (not read)")
def _(path, b, rng):
    _write(path, **_table([b, b + 1], meta=pa.array([{"a": 1, "b": [1, 2]}, None]),
                          tags=pa.array([["x"], []], pa.list_(pa.string())),
                          attrs=pa.array([[("k", "v")], None], pa.map_(pa.string(), pa.string()))))
    return [(b, PROCESSED), (b + 1, PROCESSED)]


@file_class("unusual_string_encodings", "columns", "dictionary-encoded and large_string text columns, upper-case names")
def _(path, b, rng):
    cols = _table([b, b + 1], body=pa.array([story(b), story(b + 1)], pa.large_string()),
                  source=pa.array(["ex", "ex"]).dictionary_encode())
    cols = {k.upper() if k in ("url", "title") else k: v for k, v in cols.items()}
    _write(path, **cols)
    return [(b, PROCESSED), (b + 1, PROCESSED)]


# ---------------------------------------------------------------- refusals (`run` stops: exit 2, one line)

@dataclass(frozen=True)
class RefusalClass:
    name: str
    example: str
    build: Callable[[Path], str]           # writes the input under the given directory, returns --input
    message: tuple[str, ...]               # substrings of the one line


REFUSALS: list[RefusalClass] = []


def refusal(name: str, example: str, *message: str):
    def register(build):
        REFUSALS.append(RefusalClass(name, example, build, message))
        return build
    return register


def _one(path: Path, **cols) -> str:
    pq.write_table(pa.table(_table([1], **cols)), path)
    return str(path)


@refusal("missing_required_column", "a file without a url column", "missing required column(s): url")
def _(d):
    return _one(d / "nourl.parquet", url=None)


@refusal("missing_body_and_html", "a file with neither body nor html", "missing required column(s): body or html")
def _(d):
    return _one(d / "nobody.parquet", body=None)


@refusal("nested_text_column", "body of type struct", "input column 'body' has type struct")
def _(d):
    return _one(d / "struct.parquet", body=pa.array([{"text": "x"}]))


@refusal("nested_id_column", "id of type list<int64>", "input column 'id' has type array")
def _(d):
    return _one(d / "listid.parquet", id=pa.array([[1]], pa.list_(pa.int64())))


@refusal("boolean_published_at", "published_at of type boolean", "published_at has unsupported type boolean")
def _(d):
    return _one(d / "bool.parquet", published_at=pa.array([True]))


@refusal("conflicting_types_across_files", "published_at a string in one file, an epoch in another",
         "input column 'published_at' has conflicting types across files")
def _(d):
    (d / "mixed").mkdir()
    _one(d / "mixed" / "a.parquet", published_at=pa.array(["2024-05-01"]))
    _one(d / "mixed" / "b.parquet", published_at=pa.array([1_700_000_000], pa.int64()))
    return str(d / "mixed")


@refusal("columns_differ_only_in_case", "columns 'title' and 'Title' in one file", "columns that differ only in case")
def _(d):
    path = d / "twins.parquet"
    cols = _table([1])
    cols["Title"] = ["other"]
    pq.write_table(pa.table(cols), path)
    return str(path)


@refusal("zero_byte_file", "a .parquet file of 0 bytes", "unreadable footer")
def _(d):
    (d / "empty.parquet").write_bytes(b"")
    return str(d / "empty.parquet")


@refusal("not_parquet", "a JSON-lines file given to run", "unreadable footer")
def _(d):
    (d / "articles.parquet").write_text('{"id": 1}\n', encoding="utf-8")
    return str(d / "articles.parquet")


@refusal("no_data_files", "a directory holding only _SUCCESS and .crc files", "holds no data files")
def _(d):
    (d / "nodata").mkdir()
    (d / "nodata" / "_SUCCESS").write_bytes(b"")
    (d / "nodata" / ".part.crc").write_bytes(b"x")
    return str(d / "nodata")


# ---------------------------------------------------------------- JSON lines (`newsdedup check`)

@dataclass(frozen=True)
class JsonlClass:
    """A JSON-lines input of `check`. lines: the file's bytes. expect: ids answered with a verdict,
    ids refused as too long (a refusal record, the stream goes on), and, when the stream stops,
    substrings of its one-line error (exit 2; the lines before it are answered)."""

    name: str
    example: str
    data: bytes
    answered: tuple[int, ...]
    too_long: tuple[int, ...] = ()
    error: tuple[str, ...] = ()
    titles: tuple[tuple[int, str], ...] = ()   # (id, title as `check --insert` stores it in Postgres)


def _j(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n"


def _art(i: int, **kw) -> dict:
    return {"id": i, "url": f"https://cat.example/j{i}", "title": f"T{i}", "body": story(i),
            "published_at": GOOD_TS, "source": "ex", "lang": "en", **kw}


JSONL_LIMIT = 4096     # the catalogue's input.max_line_bytes for check
JSONL_CLASSES = [
    JsonlClass("jsonl_lone_surrogates", 'escaped lone surrogates "\\ud800", "\\udfff" in url, title and body',
               _j(_art(1)) + b'{"id": 2, "url": "https://cat.example/\\ud800", "title": "a\\udfffb", '
               b'"body": "\\ud83d lone high, then text", "published_at": "' + GOOD_TS.encode() + b'"}\n' + _j(_art(3)),
               answered=(1, 2, 3), titles=((2, "a\ufffd\ufffd\ufffdb"),)),   # one U+FFFD per byte of the surrogate, as Python repairs
    JsonlClass("jsonl_every_plane_and_controls", "random code points of every plane, C0/C1 controls, NUL (\\u0000) in title and body",
               _j(_art(1, title="T\x00" + every_plane(random.Random(1), 3), body=controls(random.Random(2)) + "\x00" + story(1))),
               answered=(1,), titles=((1, "T\ufffd" + every_plane(random.Random(1), 3)),)),
    JsonlClass("jsonl_mixed_encodings", "a Latin-1 line between UTF-8 lines",
               _j(_art(1)) + '{"id": 2, "title": "Café"}\n'.encode("latin-1") + _j(_art(3)),
               answered=(1,), error=(":2: not UTF-8 (byte",)),
    JsonlClass("jsonl_utf16_file", "a whole file in UTF-16 (with its BOM)",
               json.dumps(_art(1)).encode("utf-16") + b"\n", answered=(), error=(":1: not UTF-8 (byte 1)",)),
    JsonlClass("jsonl_utf8_bom", "a UTF-8 byte order mark before the first line", b"\xef\xbb\xbf" + _j(_art(1)) + _j(_art(2)),
               answered=(1, 2)),
    JsonlClass("jsonl_blank_lines_and_crlf", "blank lines, CRLF line ends, no newline at the end",
               b"\n" + _j(_art(1)).replace(b"\n", b"\r\n") + b"   \r\n" + _j(_art(2)).rstrip(b"\n"), answered=(1, 2)),
    JsonlClass("jsonl_not_json", "a line that is not JSON", _j(_art(1)) + b"{id: 2,\n" + _j(_art(3)),
               answered=(1,), error=(":2: not a JSON object (",)),
    JsonlClass("jsonl_not_an_object", "a line holding a JSON array", _j(_art(1)) + b"[1, 2]\n",
               answered=(1,), error=(":2: not a JSON object (a JSON list)",)),
    JsonlClass("jsonl_line_too_long", f"a line over input.max_line_bytes ({JSONL_LIMIT} bytes here; 64 MiB by default)",
               _j(_art(1)) + _j(_art(2, body="y" * (JSONL_LIMIT * 3))) + _j(_art(3)), answered=(1, 3), too_long=(2,)),
    JsonlClass("jsonl_missing_fields", "only an id (no url, title, body, date)", _j({"id": 1}) + _j({"id": 2, "body": None}),
               answered=(1, 2)),
    JsonlClass("jsonl_missing_id", "an article without an id", _j(_art(1)) + _j({"title": "no id"}),
               answered=(1,), error=("article without an id",)),
    JsonlClass("jsonl_id_not_an_integer", 'an id "12a"', _j(_art(1)) + _j(_art(2) | {"id": "12a"}),
               answered=(1,), error=("article id '12a' is not an integer",)),
    JsonlClass("jsonl_id_wrong_type", "an id that is a fraction, a boolean or a list",
               _j(_art(1)) + _j(_art(2) | {"id": 2.5}) + _j(_art(3) | {"id": True}),
               answered=(1,), error=("article id 2.5 is not an integer",)),
    JsonlClass("jsonl_id_out_of_range", "an id of 2**70", _j(_art(1)) + _j(_art(2) | {"id": 2**70}),
               answered=(1,), error=("is not an integer",)),
    JsonlClass("jsonl_id_as_digits", 'ids "7" and " 8 " as strings', _j(_art(1) | {"id": "7"}) + _j(_art(2) | {"id": " 8 "}),
               answered=(7, 8)),
    JsonlClass("jsonl_text_as_numbers", "title a number, body a boolean, lang null",
               _j(_art(1, title=42, body=True, lang=None)) + _j(_art(2)), answered=(1, 2), titles=((1, "42"),)),
    JsonlClass("jsonl_nested_text", "a body that is a JSON object", _j(_art(1)) + _j(_art(2, body={"text": "x"})),
               answered=(1,), error=("article 2: body is a JSON object; expected a string",)),
    JsonlClass("jsonl_extra_nested_fields", "extra fields of nested objects and lists (not read)",
               _j(_art(1, meta={"a": [1, {"b": None}]}, tags=["x"])), answered=(1,)),
    JsonlClass("jsonl_bad_published_at", "published_at garbage, an epoch number, a DST-gap naive time",
               _j(_art(1, published_at="not a date")) + _j(_art(2, published_at=1_700_000_000))
               + _j(_art(3, published_at="2024-03-10 02:30:00")) + _j(_art(4, published_at=None)), answered=(1, 2, 3, 4)),
]
