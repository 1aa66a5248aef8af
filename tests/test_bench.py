"""Benchmark helpers: size parsing, growth exponents, extrapolation, the Markdown report."""

from __future__ import annotations

import math

import pytest

from newsdedup_lab import baselines, bench


def test_parse_sizes_accepts_suffixes_and_sorts():
    assert bench.parse_sizes("100k, 10000,1m") == [10_000, 100_000, 1_000_000]
    with pytest.raises(ValueError):
        bench.parse_sizes("0")


def test_growth_exponent_is_one_for_linear_and_two_for_quadratic():
    assert bench.growth((10, 1.0), (100, 10.0)) == pytest.approx(1.0)
    assert bench.growth((10, 1.0), (100, 100.0)) == pytest.approx(2.0)
    assert math.isnan(bench.growth((10, 0.0), (100, 1.0)))


def test_extrapolation_scales_by_pairs_or_documents():
    assert baselines.extrapolate_quadratic(1.0, 1000, 10_000) == pytest.approx(baselines.pairs(10_000) / baselines.pairs(1000))
    assert baselines.extrapolate_linear(2.0, 100, 1000) == pytest.approx(20.0)


def test_markdown_reports_ratios_and_the_command():
    r = bench.SizeResult(n=1000, seconds={"prepare": 4.0, "url": 1.0, "content": 1.0, "simhash": 2.0},
                         counts={}, memory={"driver_mb": 100.0, "jvm_mb": 900.0, "workers_mb": 200.0,
                                            "total_mb": 1200.0, "jvm_heap_mb": 500.0},
                         minhash_seconds=16.0, minhash_finished=True)
    b = bench.Bench([r], allpairs_n=100, allpairs_seconds=0.5,
                    embed=bench.EmbedCost(sample=10, embed_seconds=1.0, cosine_n=100, cosine_seconds=0.01),
                    command="newsdedup bench --sizes 1000", machine="test")
    text = bench.markdown(b)
    assert "newsdedup bench --sizes 1000" in text
    assert "| 1,000 | 250 | 1,000 | 1,000 | 500 | 8.0 | 125 | - |" in text      # docs/s per stage
    ap = baselines.extrapolate_quadratic(0.5, 100, 1000)
    assert f"| {ap:,.1f} | {ap / 2.0:,.1f} |" in text                          # (a) vs stage 3
    assert "| 16.0 | 2.00 |" in text                                            # (b) vs cascade


def test_markdown_reports_the_end_to_end_ratio_and_the_text_cost():
    mem = {"driver_mb": 100.0, "jvm_mb": 900.0, "workers_mb": 200.0, "total_mb": 1200.0, "jvm_heap_mb": 500.0}
    r = bench.SizeResult(n=1000, seconds={"prepare": 4.0}, counts={}, memory=mem, e2e_seconds=30.0,
                         plain_seconds=20.0, plain_memory=dict(mem, workers_mb=100.0), floor_seconds=50.0,
                         text_cost=baselines.TextCost(3 * 1024 * 1024, 1024 * 1024, 4.0, 1.5))
    text = bench.markdown(bench.Bench([r], 0, float("nan"), None, command="x", machine="test"))
    assert "| 1,000 | 20.0 | 30.0 | 1.50 | 50.0 | 2.50 | 33 | 1,000 | 1,100 |" in text   # ratios, executor MB
    assert "| 1,000 | 3.0 | 1.0 | 4.0 | 1.5 | 2.5 |" in text                # text bytes and seconds


def test_plain_job_writes_hashes_and_the_earliest_canonical(spark, tmp_path):
    from datetime import datetime

    rows = [(1, "https://e.com/a", "T", "body", datetime(2024, 1, 2), "s", "en"),
            (2, "https://e.com/a", "T", "body", datetime(2024, 1, 1), "s", "en"),
            (3, "https://e.com/b", "T", "body", datetime(2024, 1, 3), "s", "en"),
            (4, "https://e.com/c", "U", "other", None, "s", "en")]
    src = str(tmp_path / "in.parquet")
    spark.createDataFrame(rows, "id long, url string, title string, body string, published_at timestamp, "
                                "source string, lang string").write.parquet(src)
    n, secs = baselines.plain_sha256_job(spark, src, str(tmp_path / "plain"))
    got = {r.id: (r.url_canonical, r.text_canonical)
           for r in spark.read.format("delta").load(str(tmp_path / "plain")).collect()}
    assert n == 4 and secs > 0
    assert got == {1: (2, 2), 2: (2, 2), 3: (3, 2), 4: (4, 4)}


def test_fingerprint_floor_runs_stage_3s_kernel_on_the_raw_text(spark, tmp_path, conf):
    """(e) computes the fingerprints pinned for these texts before the compiled kernel (fingerprint_reference:
    English word 3-grams, Bangla char 4-grams; no title, so the raw text is the body)."""
    from fingerprint_reference import BN, EN, KERNEL

    ref = {(c, i, kind): (fp, n) for c, i, kind, _, fp, n, _ in KERNEL}
    rows = [(1, None, EN[0], "en"), (2, None, BN[0], "bn"), (3, None, EN[6], "en"), (4, None, None, None),
            (5, None, EN[4], None)]                                  # no lang: the default spec (word 3-grams)
    src = str(tmp_path / "in.parquet")
    spark.createDataFrame(rows, "id long, title string, body string, lang string").write.parquet(src)
    _, secs = baselines.fingerprint_floor_job(spark, src, conf, str(tmp_path / "floor"))
    got = {r.id: (r.simhash, r.n_features) for r in spark.read.format("delta").load(str(tmp_path / "floor")).collect()}
    assert secs > 0
    assert got == {1: ref["EN", 0, "word"], 2: ref["BN", 0, "char"],
                   3: (None, ref["EN", 6, "word"][1]),               # 2 features, below min_features 8
                   4: (None, 0), 5: ref["EN", 4, "word"]}


def test_memory_kinds_leave_out_a_jvm_fork_and_helper_programs():
    from newsdedup_lab.memory import process_kind

    jvm = ["/usr/lib/jvm/java-17/bin/java", "-cp", "x", "org.apache.spark.deploy.SparkSubmit", "pyspark-shell"]
    assert process_kind(jvm, ["/usr/bin/bash", "spark-submit"]) == "jvm"
    assert process_kind(jvm, jvm) is None                      # forked by the JVM, not yet exec'd
    assert process_kind(["/venv/bin/python", "-m", "pyspark.daemon", "pyspark.worker"], jvm) == "worker"
    assert process_kind(["chmod", "644", "/tmp/part-0"], jvm) is None
    assert process_kind([], jvm) is None


def test_memory_sampler_sees_the_jvm_and_the_python_workers(spark):
    from pyspark.sql import functions as F

    from newsdedup_lab.memory import MemorySampler

    spark.range(100, numPartitions=2).select(F.udf(lambda x: x + 1, "long")("id")).collect()  # workers up
    sample = MemorySampler().sample()
    assert sample["jvm_mb"] > 100 and sample["workers_mb"] > 10
    assert sample["total_mb"] == sample["driver_mb"] + sample["jvm_mb"] + sample["workers_mb"]


def test_spill_is_read_from_sparks_status_store_and_taken_between_two_readings(spark):
    from newsdedup_lab.memory import spill_between, spilled_mb

    before = spilled_mb(spark)
    assert set(before) == {"spill_memory_mb", "spill_disk_mb", "shuffle_write_mb", "stages"}, \
        "the status store's API moved"
    spark.range(0, 20_000, numPartitions=2).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    after = spilled_mb(spark)
    assert after["stages"] > before["stages"]          # the job's stages were read
    delta = spill_between(before, after)
    assert set(delta) == {"spill_memory_mb", "spill_disk_mb", "shuffle_write_mb"} and min(delta.values()) >= 0
    assert delta["shuffle_write_mb"] > 0                 # the groupBy's exchange wrote its shuffle files
    assert spill_between({}, after) == {}


def test_the_e2e_table_states_spill_shuffle_and_stage_3_candidates_per_document():
    r = bench.SizeResult(n=1000, seconds={"prepare": 4.0}, counts={"simhash.candidates_per_doc_x1000": 877},
                         memory={"driver_mb": 1.0, "jvm_mb": 2.0, "workers_mb": 3.0, "total_mb": 6.0,
                                 "spill_memory_mb": 1536.0, "spill_disk_mb": 512.0, "shuffle_write_mb": 2048.0,
                                 "cpu_s": 42.0},
                         e2e_seconds=10.0, plain_seconds=2.0, plain_memory={"jvm_mb": 1.0, "workers_mb": 1.0})
    row = bench.e2e_table(bench.Bench([r], 0, 0.0, None, "", "test")).splitlines()[-1]
    assert row.endswith("| 1,536 | 512 | 2,048 | 0.877 | 42 |")


def test_cpu_seconds_count_the_work_of_child_processes():
    import subprocess
    import sys

    from newsdedup_lab.memory import cpu_seconds

    before = cpu_seconds()
    subprocess.run([sys.executable, "-c", "x = 0\nfor i in range(3_000_000): x += i"], check=True)
    assert cpu_seconds() - before > 0.05    # the reaped child's CPU is in its parent's children times
