"""Stage 4 in an incremental run: the slice's closure reaches stored vectors in the window, the
stored vectors are reused, and the active links equal one run's (real all-MiniLM-L6-v2, offline)."""

from __future__ import annotations

import pandas as pd
import pytest

from newsdedup import job
from newsdedup.io import store

from semantic_data import ARTICLES, SEM, T0


def rows(spec):
    out = []
    for i, key, hours in spec:
        title, body = ARTICLES[key]
        out.append({"id": i, "url": f"https://outlet{i}.example/{key}", "title": title, "body": body,
                    "published_at": pd.Timestamp(T0) + pd.Timedelta(hours=hours), "source": f"outlet{i}",
                    "lang": "en"})
    return pd.DataFrame(out).astype({"published_at": "datetime64[us, UTC]"})


STORED = [(1, "metro_a", 0), (3, "derby", 0), (5, "other_game", 24), (6, "derby_rematch", 7 * 24), (7, "flood", 5)]
NEW = [(2, "metro_b", 4), (4, "derby_other_outlet", -1)]   # 4 is older than 3: it takes the derby over


def keyset(df):
    return {(r.duplicate_id, r.canonical_id, r.stage, round(r.score, 6)) for r in df.collect()}


@pytest.fixture(scope="module")
def outcome(spark, conf, tmp_path_factory):
    c = conf.with_overrides({"semantic": SEM})
    root = tmp_path_factory.mktemp("inc-semantic")
    paths = {}
    for name, spec in (("stored", STORED), ("new", NEW), ("all", STORED + NEW)):
        paths[name] = str(root / f"{name}.parquet")
        rows(spec).to_parquet(paths[name])
    full = job.run(spark, paths["all"], str(root / "full"), c, load_pg=False)
    out = str(root / "slices")
    first = job.run(spark, paths["stored"], out, c, load_pg=False)
    second = job.run(spark, paths["new"], out, c, load_pg=False)
    return (keyset(store.read(spark, str(root / "full"), "duplicate_links")), keyset(store.active_links(spark, out)),
            first, second)


def test_semantic_links_of_slices_equal_one_run_and_vectors_are_reused(outcome):
    whole, active, first, second = outcome
    assert {(d, c, s) for d, c, s, _ in whole} == {(2, 1, "semantic"), (3, 4, "semantic")}
    assert active == whole
    assert second.counts["links.superseded"] == 0 and second.counts["links.new"] == 2
    archive = len(STORED) + len(NEW)
    # The rematch is a week away and the flood far in cosine: they stay out of the closure.
    assert len(NEW) < second.counts["incremental.affected_documents"] < archive
    # The closure embedded the new documents; the stage reuses them and the stored ones.
    assert first.counts["semantic.embedded"] == len(STORED)
    assert second.counts["semantic.embedded"] == 0
    assert second.counts["semantic.reused_vectors"] == second.counts["incremental.affected_documents"]
