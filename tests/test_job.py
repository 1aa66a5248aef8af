"""End to end on the bundled sample: Delta tables, Postgres rows, reruns, the CLI."""

import json
from pathlib import Path

import psycopg
import pytest
from pyspark.sql import functions as F

from newsdedup.report import RunReport
from newsdedup import cascade, cli, job
from newsdedup.io import paths, store

from conftest import SAMPLE


def sample_rows():
    with open(SAMPLE.with_suffix(".jsonl"), encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def ids_where(pred):
    return {r["id"] for r in sample_rows() if pred(r)}


@pytest.fixture(scope="module")
def first_run(spark, conf, module_pg_dsn, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    dsn = module_pg_dsn
    report = job.run(spark, str(SAMPLE), str(out), conf, dsn=dsn)
    return out, dsn, report


def pg_links(dsn):
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT duplicate_id, canonical_id, stage, score, run_id FROM duplicate_links").fetchall()


def test_sample_run_counts_and_every_row_accounted_for(first_run, spark):
    out, dsn, report = first_run
    c = report.counts
    assert c["input_rows"] == len(sample_rows()) == c["documents"] + c["quarantined"]
    assert c["links.url"] == 12          # 2 tracking/www variants per story; kalerkantho's slash variant is a new id
    assert c["links.content"] == 9       # 7 syndicated copies (NFD Bangla among them) + 2 kalerkantho variants
    assert c["links.simhash"] >= 1
    assert c["url_unparseable"] == 2     # 'not a url' and a null url: kept as documents
    assert store.read(spark, out, "documents").count() == c["documents"]


def test_links_point_to_the_earliest_document(first_run, spark):
    out, _, _ = first_run
    links = store.read(spark, out, "duplicate_links")
    docs = store.read(spark, out, "documents").select("id", "published_at")
    joined = (links.join(docs.withColumnRenamed("id", "duplicate_id").withColumnRenamed("published_at", "dup_at"),
                         "duplicate_id")
              .join(docs.withColumnRenamed("id", "canonical_id").withColumnRenamed("published_at", "can_at"),
                    "canonical_id"))
    assert joined.count() == links.count()
    assert joined.where(F.col("can_at") > F.col("dup_at")).count() == 0
    # Each document is suppressed at most once and no canonical is itself a duplicate.
    assert links.groupBy("duplicate_id").count().where("count > 1").count() == 0
    dup_ids = {r.duplicate_id for r in links.collect()}
    assert not dup_ids & {r.canonical_id for r in links.collect()}


def test_nfd_bangla_copy_is_a_content_duplicate(first_run, spark):
    out, _, _ = first_run
    nfd_ids = ids_where(lambda r: r["source"] == "syndicated" and "/bn/" in r["url"])
    assert len(nfd_ids) == 3
    links = store.read(spark, out, "duplicate_links").where(F.col("duplicate_id").isin(*nfd_ids)).collect()
    assert {r.stage for r in links} == {"content"}


def test_postgres_holds_exactly_the_delta_links(first_run, spark):
    out, dsn, _ = first_run
    delta = {(r.duplicate_id, r.canonical_id, r.stage) for r in store.read(spark, out, "duplicate_links").collect()}
    assert {(d, c, s) for d, c, s, _, _ in pg_links(dsn)} == delta


def test_rerun_is_idempotent_in_delta_and_postgres(first_run, spark, conf):
    out, dsn, report = first_run
    before_delta = store.read(spark, out, "duplicate_links").count()
    before_pg = sorted(pg_links(dsn))
    again = job.run(spark, str(SAMPLE), str(out), conf, dsn=dsn)
    assert again.run_id != report.run_id
    assert store.read(spark, out, "duplicate_links").count() == before_delta
    assert store.read(spark, out, "documents").count() == report.counts["documents"]
    assert sorted(pg_links(dsn)) == before_pg          # same rows, original run ids kept
    assert again.counts["postgres.inserted"] == 0
    assert store.read(spark, out, "runs").count() == 2


def test_dry_run_writes_nothing(spark, conf, tmp_path):
    report = job.run(spark, str(SAMPLE), str(tmp_path / "dry"), conf, dry_run=True)
    assert report.counts["links.url"] == 12
    assert not (tmp_path / "dry" / "duplicate_links").exists()
    assert not (tmp_path / "dry" / "pgdata").exists()
    assert not (tmp_path / "dry").exists()          # not even the directory, nor checkpoints in it


def test_a_run_removes_its_checkpoints_and_those_a_dead_run_left(spark, conf, tmp_path):
    out = tmp_path / "out"
    dead = out / "_checkpoints" / "a-killed-session" / "rdd-3"     # what a SIGKILLed run leaves
    dead.mkdir(parents=True)
    (dead / "part-00000").write_bytes(b"x")
    where = Path(paths.local_path(spark.sparkContext.getCheckpointDir()))
    before = {p.name for p in where.iterdir()} if where.exists() else set()
    report = job.run(spark, str(SAMPLE), str(out), conf, load_pg=False)
    assert report.counts["links.url"] == 12             # the run checkpointed its frames on the way
    assert {p.name for p in where.iterdir()} == before   # and removed them when it ended
    assert not (out / "_checkpoints" / "a-killed-session").exists()


def test_delta_input_and_detected_language(spark, conf, tmp_path):
    table = str(tmp_path / "snapshot")
    spark.read.parquet(str(SAMPLE)).write.format("delta").save(table)
    result = cascade.run_cascade(spark, spark.read.format("delta").load(table), conf, RunReport(run_id="t"))
    langs = {r.id: (r.lang, r.lang_detected) for r in result.documents.collect()}
    bangla_null = ids_where(lambda r: r["lang"] is None and r["source"] == "prothomalo" and "/bangladesh/capital/" in r["url"])
    assert bangla_null and all(langs[i] == ("bn", True) for i in bangla_null)
    english_given = ids_where(lambda r: r["lang"] == "en")
    assert english_given and all(langs[i] == ("en", False) for i in english_given)


def test_cli_missing_column_is_a_clear_error(spark, tmp_path, capsys):
    bad = tmp_path / "bad.parquet"
    spark.createDataFrame([(1, "https://e.com/a")], "id long, url string").write.parquet(str(bad))
    code = cli.main(["run", "--input", str(bad), "--output", str(tmp_path / "o"), "--no-postgres"])
    err = capsys.readouterr().err
    assert code == 2
    assert "missing required column(s): published_at, source, body or html" in err


@pytest.mark.parametrize("flag", [["--resume", "20261206T000000Z-abcdef"], ["--dry-run"]])
def test_cli_several_slices_refuse_resume_and_dry_run(tmp_path, capsys, flag):
    code = cli.main(["run", "--input", "a.parquet", "b.parquet", "--output", str(tmp_path / "o"), "--no-postgres",
                     "--no-semantic", *flag])
    assert code == 2
    assert capsys.readouterr().err == ("newsdedup: error: several --input slices exclude --resume and --dry-run: "
                                       "give one slice\n")
    assert not (tmp_path / "o").exists()


def test_cli_load_dry_run_prints_counts_per_stage(first_run, capsys):
    out, _, report = first_run
    assert cli.main(["load", "--output", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert f"url        {report.counts['links.url']}" in text
    assert "dry run: nothing loaded" in text
