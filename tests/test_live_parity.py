"""The live lookup gives the batch's answer (issue 22): articles checked against Postgres loaded
with the archive get the stage, canonical and score of one batch run over archive + articles.

Real Spark, real Delta, a real Postgres; the comparison itself is the lab's live_parity (the
same tool measures it on real news text: docs/operations.md, "Live lookups").
"""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from newsdedup_lab import live_parity
from newsdedup_lab.synth import generate

from semantic_data import ARTICLES, SEM, T0


def _stage_rows(result):
    return {k: v for k, v in result["by_stage"].items() if k != "none"}


def test_every_stage_3_edit_gets_the_batch_canonical_and_score(spark, conf, pg_dsn, tmp_path):
    docs, truth = generate(500, seed=5)
    pq.write_table(docs, tmp_path / "docs.parquet")
    pq.write_table(truth, tmp_path / "truth.parquet")
    result = live_parity.run(str(tmp_path / "docs.parquet"), str(tmp_path / "work"), conf=conf, spark=spark,
                             dsn=pg_dsn, batch_size=64)
    stages = _stage_rows(result)
    # The corpus holds copies the batch links at each of stages 1-3: each stage is under test.
    assert {"url", "content", "simhash"} <= set(stages), stages
    total = result["total"]
    assert total.get("wrong", 0) == 0 and total.get("extra", 0) == 0, result
    assert result["same_canonical_share"] >= 0.99, result
    for stage, c in stages.items():      # one score scale: the batch's own number, to the last bit
        assert c.get("same_score", 0) == c.get("same", 0), (stage, c)


def test_stage_4_live_gives_the_batch_link_and_keeps_other_games_apart(spark, conf, pg_dsn, tmp_path):
    rows = []

    def add(key, hours, outlet):
        title, body = ARTICLES[key]
        i = len(rows) + 1
        rows.append({"id": i, "url": f"https://{outlet}.example/news/{i}", "title": title, "body": body,
                     "published_at": T0 + timedelta(hours=hours), "source": outlet, "lang": "en"})

    # Archive: the earlier reports; probes (the latest half): the same events by other outlets, a
    # rematch of the derby (the same words, another game) and an unrelated flood report.
    for key, hours in (("metro_a", 0), ("derby", 1), ("other_game", 2), ("flood", 3)):
        add(key, hours, "first")
    for key, hours in (("metro_b", 5), ("derby_other_outlet", 6), ("derby_rematch", 7), ("flood", 8)):
        add(key, hours, "second")
    schema = pa.schema([("id", pa.int64()), ("url", pa.string()), ("title", pa.string()), ("body", pa.string()),
                        ("published_at", pa.timestamp("us", tz="UTC")), ("source", pa.string()), ("lang", pa.string())])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp_path / "docs.parquet")
    sem_conf = conf.with_overrides({"semantic": SEM})
    result = live_parity.run(str(tmp_path / "docs.parquet"), str(tmp_path / "work"), conf=sem_conf, spark=spark,
                             dsn=pg_dsn, probe_share=0.5)
    stages = _stage_rows(result)
    assert stages.get("semantic", {}).get("same", 0) >= 2, result     # metro_b and the derby by another outlet
    assert result["total"].get("wrong", 0) == 0 and result["total"].get("extra", 0) == 0, result
    assert result["same_canonical_share"] == 1.0, result
    assert stages["semantic"].get("same_score", 0) == stages["semantic"]["same"], result
