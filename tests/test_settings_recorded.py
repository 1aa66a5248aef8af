"""An output records the settings its keys and links were computed with, and a run refuses to mix others.

Stored keys (url_hash, content_hash, the stage-3 fingerprints) computed with other settings match
nothing this run computes; stored links found with other stage-3 thresholds stay as they were outside
a slice's closure. Either way the links would no longer be those of one run over everything, and
nothing would say so.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from delta.tables import DeltaTable

from newsdedup import config, job
from newsdedup.errors import UserError
from newsdedup.io import store

from conftest import SAMPLE


def test_the_keys_and_the_pairing_settings_are_told_apart():
    base = config.load_config()

    def changed(overrides):
        other = base.with_overrides(overrides)
        return (config.changed_settings(config.keys_settings(base), config.keys_settings(other)),
                config.changed_settings(config.pairing_settings(base), config.pairing_settings(other)))

    assert changed({"simhash": {"minhash_rows": 4}}) == (["simhash.minhash_rows"], [])
    assert changed({"simhash": {"languages": {"bn": {"set_ngram": 4}}}}) == (["simhash.languages.bn.set_ngram"], [])
    assert changed({"url": {"tracking_params": ["ref"]}}) == (["url.tracking_params"], [])
    assert changed({"content": {"boilerplate_max_chars": 100}}) == (["content.boilerplate_max_chars"], [])
    assert changed({"input": {"max_text_chars": 1000}}) == (["input.max_text_chars"], [])
    assert changed({"simhash": {"languages": {"en": {"jaccard": 0.5}}}}) == ([], ["simhash.languages.en.jaccard"])
    assert changed({"simhash": {"max_band_bucket": 50}}) == ([], ["simhash.max_band_bucket"])
    # Settings no stored result depends on.
    assert changed({"simhash": {"max_cluster_size": 7}, "input": {"id_collision": "replace"},
                    "layout": {"optimize_after_run": False}}) == ([], [])
    # A language added to the table is a change of both (its documents are fingerprinted and paired by it).
    fr = {"features": "word", "ngram": 3, "max_hamming": 3}
    assert changed({"simhash": {"languages": {"fr": fr}}}) == (["simhash.languages.fr"], ["simhash.languages.fr"])


def test_settings_survive_the_round_trip_through_table_properties(spark, tmp_path):
    """Quotes, backslashes and non-ASCII text in a setting come back as they were recorded."""
    out = str(tmp_path / "out")
    spark.createDataFrame([(1,)], "id long").write.format("delta").save(store.table_path(out, "documents"))
    assert store.recorded_settings(spark, out) == {"keys": None, "pairing": None}
    settings = {"keys": {"content": {"boilerplate_lines": ["it's \\s+\\w", 'say "no"', "আরও পড়ুন\\s*:"]}},
                "pairing": {"simhash": {"max_band_bucket": 100}}}
    store.record_settings(spark, out, settings)
    assert store.recorded_settings(spark, out) == settings


@pytest.fixture()
def stored(spark, conf, tmp_path):
    """The sample stored once (its settings recorded), and a slice of three new articles."""
    out = str(tmp_path / "out")
    job.run(spark, str(SAMPLE), out, conf, load_pg=False)
    articles = pd.read_parquet(SAMPLE)
    part = articles.head(3).copy()
    part["id"] = part["id"] + 1000
    part["url"] = part["url"] + "?copy=1"
    path = tmp_path / "slice.parquet"
    part.to_parquet(path)
    return out, str(path)


def _version(spark, out):
    return DeltaTable.forPath(spark, store.table_path(out, "documents")).history(1).first().version


def test_a_run_records_its_settings_and_refuses_other_keys(spark, conf, stored):
    out, slice_path = stored
    recorded = store.recorded_settings(spark, out)
    assert recorded == json.loads(json.dumps({"keys": config.keys_settings(conf),
                                              "pairing": config.pairing_settings(conf)}))
    before = _version(spark, out)
    other = conf.with_overrides({"simhash": {"minhash_rows": 4}})
    for incremental in ("slice", "archive"):
        with pytest.raises(UserError, match=r"other settings \(simhash\.minhash_rows changed\).*new output"):
            job.run(spark, slice_path, out, other.with_overrides({"input": {"incremental": incremental}}),
                    load_pg=False)
    assert _version(spark, out) == before   # refused before anything was written
    assert store.recorded_settings(spark, out) == recorded
    # A setting no stored result depends on changes nothing of that.
    report = job.run(spark, slice_path, out, conf.with_overrides({"simhash": {"max_cluster_size": 50}}), load_pg=False)
    assert report.counts["documents"] == 3 and store.recorded_settings(spark, out) == recorded


def test_other_thresholds_take_an_archive_run_which_records_them(spark, conf, stored):
    out, slice_path = stored
    looser = conf.with_overrides({"simhash": {"languages": {"en": {"jaccard": 0.5}}}})
    with pytest.raises(UserError, match=r"simhash\.languages\.en\.jaccard changed\).*input\.incremental: archive"):
        job.run(spark, slice_path, out, looser, load_pg=False)
    job.run(spark, slice_path, out, looser.with_overrides({"input": {"incremental": "archive"}}), load_pg=False)
    assert store.recorded_settings(spark, out)["pairing"]["simhash"]["languages"]["en"]["jaccard"] == 0.5
    # From then on the new thresholds are the output's, and the old ones are refused.
    with pytest.raises(UserError, match=r"simhash\.languages\.en\.jaccard changed"):
        job.run(spark, slice_path, out, conf, load_pg=False)


def test_an_output_written_before_settings_were_recorded_gets_them(spark, conf, stored):
    out, slice_path = stored
    names = ", ".join(f"'{n}'" for n in store.SETTINGS_PROPERTIES.values())
    spark.sql(f"ALTER TABLE delta.`{store.table_path(out, 'documents')}` UNSET TBLPROPERTIES ({names})")
    assert store.recorded_settings(spark, out) == {"keys": None, "pairing": None}
    job.run(spark, slice_path, out, conf.with_overrides({"simhash": {"minhash_rows": 4}}), load_pg=False)
    assert store.recorded_settings(spark, out)["keys"]["simhash"]["minhash_rows"] == 4


def test_check_refuses_a_database_loaded_with_other_stage3_settings(spark, conf, tmp_path, pg_dsn):
    """check's probes would get other bucket codes and shingle sets than the stored rows: refused in
    one line; rows loaded before the tag existed (NULL) are taken as they are."""
    import psycopg

    from newsdedup.ops import check

    job.run(spark, str(SAMPLE), str(tmp_path / "out"), conf, dsn=pg_dsn)
    check.Checker(conf, pg_dsn).close()   # the configuration it was loaded with
    for other in ({"simhash": {"minhash_rows": 4}}, {"simhash": {"languages": {"bn": {"jaccard": 0.5}}}}):
        with pytest.raises(UserError, match=r"stage-3 columns other settings made .*configuration the archive"):
            check.Checker(conf.with_overrides(other), pg_dsn)
    with psycopg.connect(pg_dsn) as c:
        c.execute("UPDATE documents SET stage3_settings = NULL")
    check.Checker(conf.with_overrides({"simhash": {"minhash_rows": 4}}), pg_dsn).close()
