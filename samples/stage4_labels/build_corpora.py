"""Rebuild the two local corpora the stage-4 labels were read from (SOURCES.md), from fetched snapshots.

    python samples/stage4_labels/build_corpora.py --clir-en MIRROR/akilahjahin+CLIR_Bangla-English_210041252/repo \
        --clir-mh MIRROR/muntasirhossain2003+CLIR-News-Retrieval-System/repo --out /work/data

MIRROR is where a bare snapshot of each public repository lies (git directories). Writes
clir_en.json (the English file as published) and bn_clir_mh/articles.jsonl (one article per
line: doc_id, lang, source, title, body, url, date, date_source). Articles dated 29 or 30
December 2025 are dropped: those days are kept for an independent check.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
from pathlib import Path

CLIR_EN_COMMIT = "80932d0641228b2dc5958df2adcd0ac7f09bebfb"
CLIR_MH_COMMIT = "a07f25519c08cc378ab1ae28e0b0f81b2827eb81"
HELD_OUT = {"2025-12-29", "2025-12-30"}
_BN_DIGITS = str.maketrans("০১২৩৪৫৬৭৮৯", "0123456789")
_BN_MONTHS = {"জানুয়ারি": 1, "ফেব্রুয়ারি": 2, "মার্চ": 3, "এপ্রিল": 4, "মে": 5, "জুন": 6, "জুলাই": 7, "আগস্ট": 8,
              "সেপ্টেম্বর": 9, "অক্টোবর": 10, "নভেম্বর": 11, "ডিসেম্বর": 12}
_EN_MONTHS = {m: i + 1 for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())}
_BN_WEEKDAYS = "শনিবার|রবিবার|রোববার|সোমবার|মঙ্গলবার|বুধবার|বৃহস্পতিবার|শুক্রবার"
_MONTH_ALT = "|".join(_BN_MONTHS)


def _git(git_dir: str, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", "--git-dir", git_dir, *args], input=data, capture_output=True, check=True).stdout


def _bn_full_date(text: str) -> dt.date | None:
    m = re.search(rf"(\d{{1,2}}) ({_MONTH_ALT}) (\d{{4}})", text.translate(_BN_DIGITS))
    return dt.date(int(m.group(3)), _BN_MONTHS[m.group(2)], int(m.group(1))) if m else None


def _bn_weekday_mention(body: str, crawled: dt.datetime) -> dt.date | None:
    """'মঙ্গলবার (১৬ ডিসেম্বর)' near the top of a body: the event day, year from the crawl."""
    m = re.search(rf"(?:{_BN_WEEKDAYS})\s*\((\d{{1,2}}) ({_MONTH_ALT})", body[:1500].translate(_BN_DIGITS))
    if not m:
        return None
    day, month = int(m.group(1)), _BN_MONTHS[m.group(2)]
    year = crawled.year if (month, day) <= (crawled.month, crawled.day) else crawled.year - 1
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def article_date(record: dict, lang: str) -> tuple[dt.date | None, str | None]:
    """The publication day of one crawled article, and which rule found it."""
    crawled = dt.datetime.fromisoformat(record["crawled_at"])
    value = record.get("date") or ""
    if re.match(r"\d{4}-\d\d-\d\d", value):
        return dt.date.fromisoformat(value[:10]), "field"
    if "ঘণ্টা আগে" in value or "মিনিট আগে" in value:   # "3 hours ago" at crawl time
        n = int(re.search(r"\d+", value.translate(_BN_DIGITS)).group())
        ago = dt.timedelta(hours=n) if "ঘণ্টা" in value else dt.timedelta(minutes=n)
        return (crawled - ago).date(), "field_relative_to_crawl"
    if value and lang == "bn":
        return _bn_full_date(value), "field"
    if value:
        m = re.search(r"(\d{1,2})\s+([A-Za-z]{3})[a-z]*,?\s+(\d{4})", value)
        if m:
            return dt.date(int(m.group(3)), _EN_MONTHS[m.group(2).lower()], int(m.group(1))), "field"
    if lang == "bn":
        if record["body"].lstrip().startswith("প্রকাশ"):
            found = _bn_full_date(record["body"][:80])
            if found:
                return found, "body_dateline"
        found = _bn_weekday_mention(record["body"], crawled)
        if found:
            return found, "body_weekday_mention"
    return None, None


def build_clir_mh(git_dir: str, out: Path) -> int:
    listing = _git(git_dir, "ls-tree", "-r", CLIR_MH_COMMIT, "data/raw/").decode().splitlines()
    entries = [line.split(None, 3) for line in listing if line.endswith(".json")]
    blobs = _git(git_dir, "cat-file", "--batch", data=("\n".join(e[2] for e in entries) + "\n").encode())
    pos, seen, rows = 0, set(), []
    for entry in entries:
        header_end = blobs.index(b"\n", pos)
        size = int(blobs[pos:header_end].split()[2])
        record = json.loads(blobs[header_end + 1:header_end + 1 + size])
        pos = header_end + 2 + size
        if record["url"] in seen:
            continue
        seen.add(record["url"])
        lang = "bn" if record["language"] == "bangla" else "en"
        day, how = article_date(record, lang)
        if day is not None and day.isoformat() in HELD_OUT:
            continue
        stem = entry[3].rsplit("/", 1)[1][:-len(".json")]
        rows.append({"doc_id": f"{record['language']}/{record['source']}/{stem}", "lang": lang,
                     "source": record["source"], "title": record["title"], "body": record["body"],
                     "url": record["url"], "date": day.isoformat() if day else None, "date_source": how})
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return len(rows)


def build_clir_en(git_dir: str, out: Path) -> int:
    articles = json.loads(_git(git_dir, "show", f"{CLIR_EN_COMMIT}:english_articles_only.json"))
    kept = [a for a in articles if str(a.get("date"))[:10] not in HELD_OUT]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(kept, ensure_ascii=False), encoding="utf-8")
    return len(kept)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clir-en", required=True, help="git dir of akilahjahin/CLIR_Bangla-English_210041252")
    ap.add_argument("--clir-mh", required=True, help="git dir of muntasirhossain2003/CLIR-News-Retrieval-System")
    ap.add_argument("--out", default="/work/data")
    args = ap.parse_args()
    out = Path(args.out)
    print("clir_en.json:", build_clir_en(args.clir_en, out / "clir_en.json"), "articles")
    print("bn_clir_mh/articles.jsonl:", build_clir_mh(args.clir_mh, out / "bn_clir_mh" / "articles.jsonl"), "articles")


if __name__ == "__main__":
    main()
