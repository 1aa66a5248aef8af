"""Real news text (bn_clir_mh, not in the repository) run once and as three slices: the same active links.

The corpus is derived from real Bangla and English articles by newsdedup_lab.realtext (typos,
appended updates, headline changes, light word edits, cuts, boilerplate copies, and must-not-link
templates). Skipped when the data file is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

CLIR = Path(os.environ.get("NEWSDEDUP_CLIR", "/work/data/bn_clir_mh/articles.jsonl"))
ORIGINS = 120   # articles per language: about 1,300 documents, a few minutes for four runs


@pytest.mark.skipif(not CLIR.exists(), reason=f"{CLIR} (bn_clir_mh articles.jsonl) is not on this machine; "
                                              "set NEWSDEDUP_CLIR to its path")
def test_real_text_in_three_slices_ends_with_the_links_of_one_run(spark, conf, tmp_path):
    from newsdedup_lab import realtext
    from newsdedup_lab.realtext_slices import compare

    arts = realtext.read_clir(CLIR)
    picked = [a for lang in ("bn", "en") for a in [x for x in arts if x.lang == lang][:ORIGINS]]
    docs, _, _ = realtext.write(tmp_path / "corpus", picked)
    # realtext's copies are all stage-3 edits: add exact ones for stages 1 and 2, a day earlier or
    # later than their original (so that a later slice may bring the older copy).
    table = pd.read_parquet(docs)
    copies = table.iloc[::15].copy()
    copies["id"] = table["id"].max() + 1 + np.arange(len(copies))
    same_text = np.arange(len(copies)) % 2 == 1
    copies.loc[same_text, "url"] = [f"https://copies.example/{i}" for i in copies.loc[same_text, "id"]]
    copies["published_at"] += pd.to_timedelta(np.where(np.arange(len(copies)) % 3 == 0, -1, 1), unit="D")
    pd.concat([table, copies]).astype({"published_at": "datetime64[us, UTC]"}).to_parquet(docs)
    result = compare(spark, conf, docs, tmp_path / "work", k=3)
    print(result)
    assert min(result["stages"].values()) > 0          # every stage links something
    assert result["only_full"] == result["only_slices"] == 0
    assert result["links_slices"] == result["links_full"]
    assert any(s["affected"] < s["documents"] + sum(t["documents"] for t in result["slices"][:i])
               for i, s in enumerate(result["slices"]) if i)
