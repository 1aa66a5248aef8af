"""Stages 1-3 on real Spark DataFrames."""

from datetime import datetime, timedelta

from pyspark.sql import functions as F

from newsdedup.report import RunReport
from newsdedup import cascade, clustering, job

from conftest import make_df

T0 = datetime(2024, 1, 1, 12, 0)


def links_of(df):
    return {(r.duplicate_id, r.canonical_id, r.stage) for r in df.collect()}


def body(seed, n=250):
    import random

    rng = random.Random(seed)
    vocab = ("minister announced plan river flood police court budget market school hospital election "
             "team coach goal match rail bridge port export price fuel rice farmer garment worker").split()
    return " ".join(rng.choice(vocab) + str(rng.randrange(40)) for _ in range(n))


def run(spark, conf, rows):
    report = RunReport(run_id="test")
    result = cascade.run_cascade(spark, make_df(spark, rows), conf, report)
    return result, report


def test_url_stage_picks_earliest_then_lowest_id(spark, conf):
    b = body(1)
    rows = [
        (10, "https://www.e.com/a?utm_source=x", "T", b + " one", T0 + timedelta(hours=2), "e", "en"),
        (11, "https://e.com/a/", "T", b + " two", T0, "e", "en"),
        (7, "http://e.com/a#frag", "T", b + " three", T0, "e", "en"),       # same time as 11, lower id
    ]
    result, report = run(spark, conf, rows)
    links = links_of(result.links)
    assert links == {(10, 7, "url"), (11, 7, "url")}
    assert report.counts["links.url"] == 2 and report.counts["unique_documents"] == 1


def test_content_stage_sees_only_url_survivors_and_ignores_empty_bodies(spark, conf):
    b = body(2)
    rows = [
        (1, "https://a.com/x", '"Headline" - 2', b, T0, "a", None),
        (2, "https://a.com/x?fbclid=1", '"Headline" - 2', b, T0 + timedelta(minutes=5), "a", None),   # url dup of 1
        (3, "https://b.com/copy", "\u201cHeadline\u201d \u2013 2", b.replace(" ", "  "), T0 + timedelta(hours=1), "b", None),
        (4, "https://c.com/empty1", "Live updates", "", T0, "c", None),
        (5, "https://c.com/empty2", "Live updates", "   ", T0, "c", None),
        (6, "https://d.com/other", "Headline", body(3), T0, "d", None),
    ]
    result, _ = run(spark, conf, rows)
    links = links_of(result.links)
    assert (2, 1, "url") in links
    # 3 differs from 1 only by quotes and whitespace: a content duplicate.
    assert (3, 1, "content") in links
    # 2 was resolved at stage 1, so stage 2 never links it again.
    assert not any(d == 2 and s == "content" for d, _, s in links)
    # Empty bodies carry no content hash and do not collapse into one document.
    assert not any(d in (4, 5) for d, _, _ in links)
    assert not any(d == 6 for d, _, _ in links)


def test_connected_labels_minimum_per_component(spark):
    edges = spark.createDataFrame([(1, 2), (2, 3), (3, 4), (10, 11)], "a long, b long")
    keys = {1: 5, 2: 1, 3: 9, 4: 2, 10: 3, 11: 0}   # id -> rank; smallest rank wins
    vertices = spark.createDataFrame([(k, (v, k)) for k, v in keys.items()],
                                     "id long, key struct<ts:int,id:long>")
    labels = {r.id: r.label.id for r in clustering.connected_labels(edges, vertices, 10).collect()}
    assert labels == {1: 2, 2: 2, 3: 2, 4: 2, 10: 11, 11: 11}


def test_clustering_that_does_not_converge_fails_loudly(spark):
    import pytest

    edges = spark.createDataFrame([(i, i + 1) for i in range(1, 8)], "a long, b long")
    vertices = spark.range(1, 9).select("id", F.struct(F.col("id").alias("ts"), "id").alias("key"))
    with pytest.raises(RuntimeError, match="did not converge"):
        clustering.connected_labels(edges, vertices.select("id", F.struct(
            (-F.col("id")).alias("ts"), "id").alias("key")), 2)


def test_html_pages_with_different_chrome_are_content_duplicates(spark, conf):
    story = "<h1>Storm hits the coast</h1>" + "".join(
        f"<p>Paragraph {i}: the cyclone made landfall near the port on Monday night, officials said, "
        f"and thousands of families moved to shelters before the surge.</p>" for i in range(6))

    def page(nav, footer):
        return (f"<html><head><title>x</title><script>track({nav!r})</script></head><body>"
                f"<nav>{nav}</nav><article>{story}</article><footer>{footer}</footer></body></html>")

    df = spark.createDataFrame(
        [(1, "https://a.com/storm", "Storm hits the coast", page("Home | World", "(c) A"), T0, "a"),
         (2, "https://b.com/cyclone", "Storm hits the coast", page("Sport | Opinion | Video", "(c) B"),
          T0 + timedelta(hours=3), "b")],
        "id long, url string, title string, html string, published_at timestamp, source string")
    result = cascade.run_cascade(spark, df, conf, RunReport(run_id="t"))
    assert links_of(result.links) == {(2, 1, "content")}
    flags = {r.id: r.flags for r in result.documents.collect()}
    assert "from_html" in flags[1]
