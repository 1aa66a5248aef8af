"""Stage 4's evidence beyond the cosine: who, where, when and how many, in English and Bangla.

An embedding says two texts are about the same kind of thing. Two match reports of
different games, two road accidents or two ministers speaking on one subject are
the same kind of thing, and every embedding model places them close. What tells
them apart is what a reader checks: the teams and people (who), the places (where),
the day (when) and the score or toll (how many). This module extracts those facts
from one text (`facts_of`, pure Python, no Spark) and decides for a pair whether
they allow a link (`refusal`): no fact may contradict, and at least one must agree.

Rules rather than a model: no named-entity model for Bangla installs offline
from the package index, and names are compared across scripts by a consonant
skeleton (`name_key`) that both an English spelling and a Bangla spelling of one
name reduce to (Tarique/তারেক -> trk). The thresholds live in
`semantic.evidence` and are measured on real labelled pairs (docs/semantic.md).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from ...config import EvidenceConfig

# Why each pair was refused; the order is the order in which `refusal` checks.
REASONS = ("scores_differ", "dates_differ", "numbers_differ", "names_differ", "no_shared_evidence")


def _nfkc(s: str) -> str:
    return unicodedata.normalize("NFKC", s)


_BN_DIGITS = str.maketrans("০১২৩৪৫৬৭৮৯", "0123456789")
_DASHES = str.maketrans({"\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
                         "\u2212": "-"})

# ---------------------------------------------------------------- when

_EN_MONTHS = {m: i + 1 for i, m in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"))}
_EN_MONTHS.update({m[:3]: i for m, i in list(_EN_MONTHS.items())})
_EN_MONTHS["sept"] = 9
# Bangla spellings seen in print, both vowel signs where outlets differ (ী/ি, ষ্ট/স্ট).
_BN_MONTHS = {_nfkc(k): v for k, v in {
    "জানুয়ারি": 1, "জানুয়ারী": 1, "ফেব্রুয়ারি": 2, "ফেব্রুয়ারী": 2, "মার্চ": 3, "এপ্রিল": 4, "মে": 5,
    "জুন": 6, "জুলাই": 7, "আগস্ট": 8, "আগষ্ট": 8, "সেপ্টেম্বর": 9, "অক্টোবর": 10, "নভেম্বর": 11,
    "ডিসেম্বর": 12}.items()}
_EN_WEEKDAYS = {d: i for i, d in enumerate(
    ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))}
_BN_WEEKDAYS = {_nfkc(k): v for k, v in {
    "সোমবার": 0, "মঙ্গলবার": 1, "বুধবার": 2, "বৃহস্পতিবার": 3, "শুক্রবার": 4, "শনিবার": 5, "রবিবার": 6,
    "রোববার": 6}.items()}
# Days relative to the day of publication.
_RELATIVE = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1,
             _nfkc("গতকাল"): -1, _nfkc("আজ"): 0, _nfkc("আজকে"): 0, _nfkc("আগামীকাল"): 1}

_MONTH_ALT = "|".join(sorted(_EN_MONTHS, key=len, reverse=True))
_BN_MONTH_ALT = "|".join(sorted(_BN_MONTHS, key=len, reverse=True))
# "14 February 2026", "Feb. 14, 2026", "১৪ ফেব্রুয়ারি" (digits already Latin when these run).
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_ALT})\.?(?:,?\s+(\d{{4}}))?\b", re.I)
_MONTH_DAY = re.compile(rf"\b({_MONTH_ALT})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?", re.I)
_BN_DAY_MONTH = re.compile(rf"(\d{{1,2}})\s*({_BN_MONTH_ALT})(?:\s*,?\s*(\d{{4}}))?")
_EN_WEEKDAY = re.compile(r"\b(" + "|".join(_EN_WEEKDAYS) + r")\b", re.I)
_BN_WEEKDAY = re.compile("(" + "|".join(_BN_WEEKDAYS) + ")")
_EN_RELATIVE = re.compile(r"\b(yesterday|today|tonight|tomorrow)\b", re.I)
_BN_RELATIVE = re.compile("(?<![\u0980-\u09ff])(" + "|".join(
    sorted((k for k in _RELATIVE if not k.isascii()), key=len, reverse=True)) + ")(?![\u0980-\u09ff])")

# ---------------------------------------------------------------- how many

_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
# Amounts in words of scale: English outlets write billions, Bangla ones crores (Tk 10.08 billion is
# ১ হাজার ৮ কোটি). Read as absolute values so that the two meet.
_SCALES = {"thousand": 1e3, "lakh": 1e5, "lac": 1e5, "crore": 1e7, "million": 1e6, "mn": 1e6, "billion": 1e9,
           "bn": 1e9, _nfkc("হাজার"): 1e3, _nfkc("লাখ"): 1e5, _nfkc("লক্ষ"): 1e5, _nfkc("কোটি"): 1e7}
_SCALE_ALT = "|".join(sorted(map(re.escape, _SCALES), key=len, reverse=True))
_NUM = r"\d+(?:[.,]\d+)*"
# "১ হাজার ৮ কোটি" (1,008 crore), "২ লাখ ৫০ হাজার" (250,000), "১ হাজার ৪৭০" (1,470), "Tk 5.2 billion".
_AMOUNT = re.compile(rf"(?<![\w.])({_NUM})\s*({_SCALE_ALT})(?:\s*({_SCALE_ALT})|\s+({_NUM})(?:\s*({_SCALE_ALT}))?)?"
                     r"(?![\w])", re.I)
# Small counts are often words: "two people", "দুই জন". (এক/one double as articles, নয় as "is not".)
_COUNT_WORDS = {w: str(i) for i, w in enumerate(
    "- - two three four five six seven eight nine ten eleven twelve".split()) if i > 1}
_COUNT_WORDS.update({_nfkc(w): str(i) for i, w in enumerate(
    "- - দুই তিন চার পাঁচ ছয় সাত আট - দশ এগারো বারো".split()) if i > 1 and w != "-"})
_COUNT_WORD = re.compile(r"(?<![\w\u0980-\u09ff])(" + "|".join(sorted(_COUNT_WORDS, key=len, reverse=True))
                         + r")(?![\w\u0980-\u09ff])", re.I)
# A score: two small numbers joined by a dash ("2-1", "৩-০"); four-digit spans (2025-26) are not scores.
_SCORE = re.compile(r"(?<![\d.,])(\d{1,2})\s?-\s?(\d{1,2})(?![\d.,%])")
# 5:30, 5:30pm, 5.30 pm; a bare 8.50 is a quantity.
_TIME = re.compile(r"\b\d{1,2}(?::\d{2}\s*(?:[ap]\.?m\b\.?)?|\.\d{2}\s*[ap]\.?m\b\.?)", re.I)

# ---------------------------------------------------------------- who and where

_EN_NAME = re.compile(r"\b[A-Z][a-zA-Z'’\-]+")
# Capitalised words that are not names: sentence openers, titles, calendar words.
_EN_NOT_NAMES = frozenset("""
a an the this that these those it its he she they we i you his her their our my your there here
in on at by for of from to with as and but or if when while after before since until during about
what which who whom whose where why how all some many most more other another each every any no not
mr mrs ms dr prof sir madam gen col maj capt lt sgt justice minister president chairman chief
secretary general advocate barrister engineer professor police court government ministry
photo file reuters afp ap bss unb staff correspondent reporter report news online desk agency
also however meanwhile moreover according earlier later then now today yesterday tomorrow tonight
monday tuesday wednesday thursday friday saturday sunday
january february march april may june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec
""".split())
_BN_WORD = re.compile("[\u0980-\u09ff]+")
# Common Bangla words and case endings: what is left of a Bangla text after removing them
# is mostly its names, places and content words.
_BN_STOP = frozenset(_nfkc(w) for w in """
এবং ও আর কিন্তু তবে যে যা যার যাদের যিনি যারা এই এ ওই সেই সে তার তাদের তিনি তারা তাঁর তাঁরা তাঁদের
আমি আমরা আমাদের আপনি তুমি এটা এটি ওটা সেটা সেটি এক একটি একজন দুই তিন কোনো কোন কিছু সব সকল
হয় হয়েছে হয়েছিল হবে হচ্ছে হলো হল হলে হয়ে হওয়া হতে করে করেন করেছে করেছেন করা করার করতে করবে করবেন
করেছিল করছে করছেন বলেন বলে বলেছেন বলেছে জানান জানিয়েছেন জানায় জানা গেছে গেছে যায় দেন দিয়ে দিয়েছে
থেকে জন্য সঙ্গে সাথে মধ্যে পর পরে আগে কাছে নিয়ে দিকে ওপর উপর বিরুদ্ধে মাধ্যমে অনুযায়ী প্রতি মতো
না নয় নেই ছিল ছিলেন আছে আছেন থাকবে থাকে এখন তখন যখন আজ গতকাল আগামীকাল বুধবার বৃহস্পতিবার
শুক্রবার শনিবার রবিবার রোববার সোমবার মঙ্গলবার সময় দিন বছর মাস সাল টাকা জন শতাংশ প্রায় বেশি কম
এছাড়া এদিকে অন্যদিকে ফলে কারণ কারণে যদি তাহলে এমন এখানে সেখানে বিষয়ে বিষয় সংবাদ প্রতিবেদক খবর
নিজস্ব সূত্র সূত্রে বাংলাদেশ দেশের দেশে সরকার সরকারের
""".split())
_BN_SUFFIXES = tuple(sorted((_nfkc(s) for s in
                             "গুলোর গুলো দের েরা রা ের তে কে র য় এ ে টি টা".split()), key=len, reverse=True))

# Consonant classes shared by both scripts: a name spelled in English and in Bangla
# reduces to the same skeleton (Rahman/রহমান -> rhmn, Chattogram/চট্টগ্রাম -> ctgrm).
_BN_CONSONANTS = {
    "ক": "k", "খ": "k", "গ": "g", "ঘ": "g", "ঙ": "n", "চ": "c", "ছ": "c", "জ": "j", "ঝ": "j", "ঞ": "n",
    "ট": "t", "ঠ": "t", "ড": "d", "ঢ": "d", "ণ": "n", "ত": "t", "থ": "t", "দ": "d", "ধ": "d", "ন": "n",
    "প": "p", "ফ": "f", "ব": "b", "ভ": "b", "ম": "m", "য": "j", "র": "r", "ল": "l", "শ": "s", "ষ": "s",
    "স": "s", "হ": "h", "ৎ": "t", "ং": "n"}
_BN_KEY = {_nfkc(k): v for k, v in _BN_CONSONANTS.items()}
_NUKTA, _VIRAMA = "\u09bc", "\u09cd"
# NFKC keeps য় ড় ঢ় as a letter plus nukta: য় is a vowel glide, ড় and ঢ় an r.
_BN_NUKTA = {"য": "", "ড": "r", "ঢ": "r"}
# Digraphs first; what is left maps letter by letter; vowels (and w, y, which stand
# for Bangla vowels) drop out.
_EN_DIGRAPHS = (("ch", "c"), ("sh", "s"), ("ph", "f"), ("ck", "k"), ("x", "ks"), ("q", "k"), ("z", "j"),
                ("v", "b"))
_EN_KEEP = frozenset("bcdfghjklmnprst")
MIN_KEY = 3   # shorter skeletons collide by chance


def name_key(word: str) -> str:
    """The consonant skeleton of a name in either script, doubled letters collapsed; '' when too short."""
    if not word:
        return ""
    if word[0].isascii():
        # A hard c (Cox, Comilla) is a k; ch is the Bangla c. A soft c (Cecil) is rare in these names.
        w = re.sub(r"c(?![hei])", "k", word.lower())
        for a, b in _EN_DIGRAPHS:
            w = w.replace(a, b)
        # An h after a consonant marks aspiration (Dhaka, Bhola, Sylhet), which the skeleton ignores.
        w = re.sub(r"(?<=[bcdfgjklmnprst])h", "", w)
        key = "".join(ch for ch in w if ch in _EN_KEEP)
    else:
        out = []
        for i, ch in enumerate(word):
            if ch == _NUKTA:
                continue
            if i + 1 < len(word) and word[i + 1] == _NUKTA:
                out.append(_BN_NUKTA.get(ch, ""))
            elif ch == "য" and i and word[i - 1] == _VIRAMA:
                continue   # the য-phala lengthens the consonant before it (ব্যবসা): no sound of its own
            else:
                out.append(_BN_KEY.get(ch, ""))
        key = "".join(out)
    key = re.sub(r"(.)\1+", r"\1", key)
    return key if len(key) >= MIN_KEY else ""


_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\s*|[\"“‘(]\s*)$")


def english_names(text: str) -> set[str]:
    """Capitalised words that are names: not a common opener, and capitalised somewhere mid-sentence.

    A word capitalised only where a sentence starts is no name (Economists); one the text also
    capitalises mid-sentence is (Rahman), so it counts wherever it stands.
    """
    names = set()
    for m in _EN_NAME.finditer(text):
        word = m.group(0).rstrip("'’").removesuffix("'s").removesuffix("’s")
        if word.lower() not in _EN_NOT_NAMES and not _SENTENCE_START.search(text[max(0, m.start() - 3):m.start()]):
            names.add(word)
    return names


def _bn_stem(word: str) -> str:
    for suffix in _BN_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 2:
            return word[: -len(suffix)]
    return word


# ---------------------------------------------------------------- facts of one text

@dataclass(frozen=True)
class Facts:
    """What one text states: numbers, game scores, event days (ISO dates) and name keys."""

    numbers: frozenset[str]
    scores: frozenset[str]
    days: frozenset[str]
    names: frozenset[str]

    def as_row(self) -> dict[str, list[str]]:
        return {k: sorted(getattr(self, k)) for k in ("numbers", "scores", "days", "names")}

    @staticmethod
    def from_row(row) -> "Facts":
        get = row.get if isinstance(row, dict) else (lambda k: getattr(row, k, None))
        return Facts(*(frozenset(get(k) if get(k) is not None else ()) for k in
                       ("numbers", "scores", "days", "names")))


def normal_number(raw: str) -> str:
    """'300,000' == '300000', '8.0' == '8'."""
    plain = raw.replace(",", "")
    try:
        return f"{float(plain):g}"
    except ValueError:
        return plain


def _amount(first: str, scale: str, then: str | None, second: str | None, second_scale: str | None) -> str:
    """An amount with words of scale as an absolute value, to three significant digits.

    N হাজার কোটি is N thousand crore; N হাজার M কোটি is (N thousand + M) crore; N লাখ M হাজার
    is N lakh + M thousand; N হাজার M is N thousand + M. Three digits: outlets round
    (Tk 70 billion, ৭ হাজার কোটি).
    """
    a, s1 = float(first.replace(",", "")), _SCALES[scale.lower()]
    if then is not None:
        value = a * s1 * _SCALES[then.lower()]
    elif second is None:
        value = a * s1
    else:
        b = float(second.replace(",", ""))
        s2 = _SCALES[second_scale.lower()] if second_scale else 1.0
        value = (a * s1 + b) * s2 if s2 > s1 else a * s1 + b * s2
    return f"{float(f'{value:.3g}'):g}"


def _local_day(published_at: datetime | None, tz: str) -> date | None:
    if published_at is None:
        return None
    if published_at.tzinfo is None:
        published_at = published_at.replace(tzinfo=timezone.utc)
    return published_at.astimezone(ZoneInfo(tz)).date()


def _resolved_day(day: int, month: int, year: int | None, pub: date | None) -> str | None:
    """A stated day and month as an ISO date; the year, when not stated, the one nearest publication."""
    if year is None:
        if pub is None:
            return f"{month:02d}-{day:02d}"
        candidates = [y for y in (pub.year - 1, pub.year, pub.year + 1)]
        try:
            year = min(candidates, key=lambda y: abs((date(y, month, day) - pub).days))
        except ValueError:
            return None
    try:
        return date(year, month, day).isoformat()
    except ValueError:
        return None


def _weekday_day(weekday: int, pub: date | None) -> str:
    """A weekday as the date it most likely names: the last such day up to publication.

    News reports what happened; the seven days ending on the day of publication
    hold every weekday once. Without a publication day it stays a weekday ('weekday-5').
    """
    if pub is None:
        return f"weekday-{weekday}"
    return (pub - timedelta(days=(pub.weekday() - weekday) % 7)).isoformat()


def facts_of(text: str | None, published_at: datetime | None = None, tz: str = "Asia/Dhaka",
             lead_chars: int | None = None) -> Facts:
    """Numbers, scores, event days and name keys a text states; Bangla and English alike.

    lead_chars: read numbers, scores and days from the first lead_chars characters only (the
    headline and lead state the event; the rest of a page adds background dates, figures and,
    in scraped pages, view counts and related-story links). Names come from the whole text.
    """
    whole = _nfkc(text or "").translate(_BN_DIGITS).translate(_DASHES)
    t = whole[:lead_chars] if lead_chars else whole
    pub = _local_day(published_at, tz)
    days: set[str] = set()
    spans: list[tuple[int, int]] = []

    def date_hit(m: re.Match, d: str, mo: int, y: str | None) -> None:
        iso = _resolved_day(int(d), mo, int(y) if y else None, pub)
        if iso:
            days.add(iso)
            spans.append(m.span())

    for m in _DAY_MONTH.finditer(t):
        date_hit(m, m.group(1), _EN_MONTHS[m.group(2).lower()], m.group(3))
    for m in _MONTH_DAY.finditer(t):
        date_hit(m, m.group(2), _EN_MONTHS[m.group(1).lower()], m.group(3))
    for m in _BN_DAY_MONTH.finditer(t):
        date_hit(m, m.group(1), _BN_MONTHS[m.group(2)], m.group(3))
    for m in _EN_WEEKDAY.finditer(t):
        days.add(_weekday_day(_EN_WEEKDAYS[m.group(1).lower()], pub))
    for m in _BN_WEEKDAY.finditer(t):
        days.add(_weekday_day(_BN_WEEKDAYS[m.group(1)], pub))
    if pub is not None:
        for m in _EN_RELATIVE.finditer(t):
            days.add((pub + timedelta(days=_RELATIVE[m.group(1).lower()])).isoformat())
        for m in _BN_RELATIVE.finditer(t):
            days.add((pub + timedelta(days=_RELATIVE[m.group(1)])).isoformat())

    # Dates and clock times are not quantities: blank them before reading numbers.
    chars = list(t)
    for a, b in spans + [m.span() for m in _TIME.finditer(t)]:
        chars[a:b] = " " * (b - a)
    rest = "".join(chars)
    scores = {f"{min(int(a), int(b))}-{max(int(a), int(b))}" for a, b in _SCORE.findall(rest)}
    rest = _SCORE.sub(" ", rest)   # a score's two goals are not two quantities
    numbers = set()
    for m in _AMOUNT.finditer(rest):
        numbers.add(_amount(*m.groups()))
    rest = _AMOUNT.sub(" ", rest)
    for raw in _NUMBER.findall(rest):
        n = normal_number(raw)
        if re.fullmatch(r"(19|20)\d\d", n):   # a year is when, not how many
            continue
        numbers.add(n)
    numbers |= {_COUNT_WORDS[w.lower()] for w in _COUNT_WORD.findall(rest)}

    names = {name_key(w) for w in english_names(whole)}
    names |= {name_key(_bn_stem(w)) for w in _BN_WORD.findall(whole) if w not in _BN_STOP}
    names.discard("")
    return Facts(frozenset(numbers), frozenset(scores), frozenset(days), frozenset(names))


# ---------------------------------------------------------------- the pair

def _overlap(a: frozenset, b: frozenset) -> float:
    return len(a & b) / min(len(a), len(b))


def _weekday_of(day: str) -> str:
    """'weekday-N' of an ISO date; a weekday token, or a day without its year ('12-08'), stays as it is."""
    if day.startswith("weekday-") or len(day) != 10:
        return day
    return f"weekday-{date.fromisoformat(day).weekday()}"


def shared_days(a: frozenset[str], b: frozenset[str]) -> set[str]:
    """Days both texts state. A weekday read without a publication day meets any date on that weekday."""
    both = set(a & b)
    loose_a = {d for d in a if d.startswith("weekday-")}
    loose_b = {d for d in b if d.startswith("weekday-")}
    if loose_a or loose_b:
        both |= {d for d in b if _weekday_of(d) in loose_a} | {d for d in a if _weekday_of(d) in loose_b}
    return both


def refusal(a: Facts, b: Facts, rules: EvidenceConfig, same_language: bool = True) -> str | None:
    """None when the facts allow the link; else the first reason (REASONS) they refuse it.

    A fact both texts state must agree: two scores, two sets of event days, two
    sets of numbers or two casts of names that do not meet say two events. One text
    that states a fact the other omits is no contradiction (outlets differ in
    detail), but a link needs at least one fact in common beyond the cosine.
    Across languages names only count for a link, never against it: a Bangla text's
    words that are not names (inflected, unlisted) outnumber the names an English
    one spells, so few of them meet even when the cast is the same.
    """
    if not rules.enabled:
        return None
    if a.scores and b.scores and not a.scores & b.scores:
        return "scores_differ"
    days = shared_days(a.days, b.days) if a.days and b.days else set()
    if a.days and b.days and not days:
        return "dates_differ"
    if (min(len(a.numbers), len(b.numbers)) >= rules.min_numbers
            and _overlap(a.numbers, b.numbers) < rules.numbers):
        return "numbers_differ"
    if (same_language and min(len(a.names), len(b.names)) >= rules.min_names
            and _overlap(a.names, b.names) < rules.names):
        return "names_differ"
    shared = (a.scores & b.scores) or days or (a.numbers & b.numbers) or len(a.names & b.names) >= 2
    if rules.require_shared and not shared:
        return "no_shared_evidence"
    return None
