"""Benchmark helpers: size parsing, growth exponents, extrapolation, the Markdown report."""

from __future__ import annotations

import math

import pytest

from newsdedup.lab import baselines, bench


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
