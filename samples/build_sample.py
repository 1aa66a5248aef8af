"""Build samples/articles.parquet: a small hand-written English/Bangla corpus.

Each base story appears in the shapes the cascade must handle: URL variants
(tracking parameters, fragments, www., trailing slash), a syndicated copy
under another URL, a Bangla copy in another Unicode normal form, a lightly
edited copy, plus stories that must stay apart. Run: python samples/build_sample.py
"""

from __future__ import annotations

import json
import unicodedata
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
T0 = datetime(2024, 3, 4, 6, 0, tzinfo=timezone.utc)

STORIES = [
    ("en", "dailystar", "https://www.thedailystar.net/business/economy/news/central-bank-raises-policy-rate",
     "Central bank raises policy rate by 50 basis points",
     "Bangladesh Bank on Monday raised its policy rate by 50 basis points to 8.5 percent, the third increase "
     "this fiscal year, as food and fuel prices kept inflation above nine percent. The governor told reporters "
     "that the monetary policy committee would keep tightening until price pressures eased. Economists said the "
     "move was widely expected after the taka weakened against the dollar last month. Commercial lenders are "
     "expected to raise deposit and lending rates within weeks. Business leaders warned that higher borrowing "
     "costs would hurt small manufacturers already squeezed by energy shortages, while the finance ministry "
     "said it supported the decision to defend the currency and restore confidence in the banking sector."),
    ("en", "bdnews24", "https://bdnews24.com/sport/football/abahani-beat-mohammedan",
     "Abahani beat Mohammedan 2-1 in Dhaka derby",
     "Abahani Limited beat Mohammedan Sporting Club 2-1 in the Dhaka derby at the Bangabandhu National Stadium "
     "on Sunday evening. Striker Rakib Hossain opened the scoring in the 23rd minute with a header from a corner, "
     "and Mohammedan equalised through a penalty just before half-time. The winner came in stoppage time when "
     "substitute Jewel Rana curled a free kick into the top corner. The result lifts Abahani to the top of the "
     "Premier League table, two points clear of Bashundhara Kings, who play on Tuesday. Mohammedan coach Alfaz "
     "Ahmed said his side had deserved at least a draw and criticised the referee for the late free kick."),
    ("en", "bdnews24", "https://bdnews24.com/sport/football/kings-beat-sheikh-russel",
     "Bashundhara Kings beat Sheikh Russel 3-0",
     "Bashundhara Kings beat Sheikh Russel Krira Chakra 3-0 at the Kings Arena on Tuesday evening to move back "
     "level on points with Abahani at the top of the Premier League. Brazilian forward Dorielton scored twice in "
     "the first half, the first from a low cross and the second from the penalty spot, and captain Topu Barman "
     "added a third with a header from a corner late in the game. Sheikh Russel rarely threatened and finished "
     "with ten men after a second yellow card. Kings coach Oscar Bruzon said the clean sheet mattered more than "
     "the goals, and the title race would go to the final week."),
    ("en", "prothomalo", "https://en.prothomalo.com/bangladesh/metro-rail-extends-hours",
     "Metro rail extends operating hours from next week",
     "Dhaka Mass Transit Company Limited will extend metro rail operating hours until 11 pm from next Sunday, "
     "officials said on Thursday. Trains will run every eight minutes during peak hours and every twelve minutes "
     "late in the evening. The decision follows months of requests from commuters who work late shifts in the "
     "garment and service sectors. Ridership has passed three hundred thousand passengers a day since the Motijheel "
     "section opened. The company said additional staff had been recruited and trained for the longer schedule, "
     "and that ticket machines at all stations would accept the new rapid pass cards by the end of the month."),
    ("bn", "prothomalo", "https://www.prothomalo.com/bangladesh/capital/metro-rail-somoy",
     "আগামী সপ্তাহ থেকে মেট্রোরেল চলবে রাত ১১টা পর্যন্ত",
     "আগামী রোববার থেকে রাত ১১টা পর্যন্ত মেট্রোরেল চলাচল করবে বলে জানিয়েছে ঢাকা ম্যাস ট্রানজিট কোম্পানি লিমিটেড। "
     "বৃহস্পতিবার কোম্পানির কর্মকর্তারা জানান, ব্যস্ত সময়ে প্রতি আট মিনিট পরপর এবং রাতে প্রতি বারো মিনিট পরপর ট্রেন ছাড়বে। "
     "পোশাকশিল্প ও সেবা খাতে রাতের পালায় কাজ করা যাত্রীদের দীর্ঘদিনের দাবির পর এই সিদ্ধান্ত নেওয়া হয়েছে। "
     "মতিঝিল অংশ চালু হওয়ার পর দৈনিক যাত্রী তিন লাখ ছাড়িয়েছে। কোম্পানি বলেছে, বাড়তি সময়ের জন্য নতুন কর্মী নিয়োগ ও প্রশিক্ষণ দেওয়া হয়েছে "
     "এবং মাসের শেষ নাগাদ সব স্টেশনের টিকিট যন্ত্রে র‍্যাপিড পাস কার্ড ব্যবহার করা যাবে।"),
    ("bn", "kalerkantho", "https://www.kalerkantho.com/online/national/article.php?news_id=1101",
     "বন্যায় সিলেটে লাখো মানুষ পানিবন্দী",
     "টানা বৃষ্টি ও উজানের ঢলে সিলেট ও সুনামগঞ্জের নিম্নাঞ্চল প্লাবিত হয়ে লাখো মানুষ পানিবন্দী হয়ে পড়েছে। "
     "সুরমা ও কুশিয়ারা নদীর পানি বিপৎসীমার ওপর দিয়ে প্রবাহিত হচ্ছে বলে জানিয়েছে পানি উন্নয়ন বোর্ড। "
     "জেলা প্রশাসন দুই শতাধিক আশ্রয়কেন্দ্র খুলেছে এবং শুকনা খাবার ও বিশুদ্ধ পানি বিতরণ শুরু করেছে। "
     "অনেক এলাকায় বিদ্যুৎ সরবরাহ বন্ধ রয়েছে এবং সড়ক যোগাযোগ বিচ্ছিন্ন হয়ে পড়েছে। আবহাওয়া অধিদপ্তর আগামী তিন দিন ভারী বৃষ্টির পূর্বাভাস দিয়েছে।"),
    ("bn", "kalerkantho", "https://www.kalerkantho.com/online/national/article.php?news_id=1102",
     "রাজশাহীতে আমের বাজারে ধস",
     "রাজশাহী ও চাঁপাইনবাবগঞ্জে এবার আমের ফলন ভালো হলেও দাম পড়ে যাওয়ায় লোকসানে পড়েছেন চাষিরা। "
     "বানেশ্বর হাটে প্রতি মণ ল্যাংড়া আম বিক্রি হচ্ছে গত বছরের অর্ধেক দামে। ব্যবসায়ীরা বলছেন, পরিবহন খরচ বেড়ে যাওয়া এবং ঢাকার পাইকারদের "
     "কম উপস্থিতির কারণে বাজারে চাহিদা কমেছে। কৃষি বিভাগ বলছে, রপ্তানি বাড়াতে নতুন প্যাকহাউস চালু করা হবে এবং চাষিদের প্রশিক্ষণ দেওয়া হবে।"),
]


# Written by the team (not a copy of any article): the rate decision of STORIES[0] told in other words,
# with the same facts (Monday, 50 basis points, 8.5 percent, Bangladesh Bank).
INDEPENDENT = (
    "Bangladesh Bank lifts policy rate to 8.5 percent to fight inflation",
    "The central bank raised its key policy rate by 50 basis points to 8.5 percent on Monday, its third hike in "
    "the current fiscal year, in a bid to bring down inflation that has stayed above nine percent on high food and "
    "fuel prices. Announcing the monetary policy decision, the governor said Bangladesh Bank would continue to "
    "tighten until prices came under control. Bankers expect deposit and lending rates to go up within weeks. "
    "Analysts said the hike had been anticipated since the taka lost ground against the dollar last month, while "
    "trade bodies said costlier loans would put more pressure on small factories already hit by gas and power "
    "shortages.")


def main() -> None:
    rows: list[dict] = []
    next_id = 1

    def add(lang, source, url, title, body, hours, lang_col=None):
        nonlocal next_id
        rows.append({"id": next_id, "url": url, "title": title, "body": body,
                     "published_at": T0 + timedelta(hours=hours), "source": source, "lang": lang_col})
        next_id += 1

    for i, (lang, source, url, title, body) in enumerate(STORIES):
        h = 6 * i
        add(lang, source, url, title, body, h, lang if i % 2 else None)         # the original
        sep = "&" if "?" in url else "?"
        add(lang, source, url + sep + "utm_source=facebook&utm_medium=social#comments", title, body, h + 1)
        add(lang, source, url.replace("https://www.", "http://").rstrip("/") + "/", title, body, h + 2)
        if lang == "bn":
            # Same bytes on screen, another Unicode form underneath.
            add(lang, "syndicated", f"https://news.example.org/bn/{i}",
                unicodedata.normalize("NFD", title), unicodedata.normalize("NFD", body), h + 3)
        else:
            # Syndicated copy: curly quotes, en dashes, extra whitespace, a "Read more" line.
            add(lang, "syndicated", f"https://wire.example.com/story/{i}", title.replace("-", "\u2013"),
                body.replace(" said ", "  said ") + "\nRead more: https://wire.example.com", h + 3)
        # A later edit: one sentence appended (a near-duplicate for stage 3 or 4).
        add(lang, source, url.rstrip("/") + ("-update" if "?" not in url else "&rev=2"), title,
            body + (" Officials will publish details later." if lang == "en" else " বিস্তারিত পরে জানানো হবে।"),
            h + 4)

    # Malformed or empty rows: kept, reported, never fatal.
    rows.append({"id": next_id, "url": "not a url", "title": "Untitled", "body": "", "published_at": T0,
                 "source": "unknown", "lang": None})
    rows.append({"id": next_id + 1, "url": None, "title": None, "body": None, "published_at": None,
                 "source": "unknown", "lang": None})
    next_id += 2

    # The same event written independently by another outlet, three hours after the original:
    # no URL, text or near-text in common, so only stage 4 can link it (run_sample.sh prints the link).
    add("en", "newage", "https://www.newagebd.net/post/economy/bangladesh-bank-lifts-policy-rate",
        INDEPENDENT[0], INDEPENDENT[1], 3, "en")

    schema = pa.schema([("id", pa.int64()), ("url", pa.string()), ("title", pa.string()),
                        ("body", pa.string()), ("published_at", pa.timestamp("us", tz="UTC")),
                        ("source", pa.string()), ("lang", pa.string())])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), HERE / "articles.parquet")
    with open(HERE / "articles.jsonl", "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps({**r, "published_at": r["published_at"].isoformat() if r["published_at"] else None},
                                ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} rows to {HERE / 'articles.parquet'}")


if __name__ == "__main__":
    main()
