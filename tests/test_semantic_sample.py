"""Stage 4 as it runs by default, on the bundled sample; week-long chains; calibration.

Real Spark, real all-MiniLM-L6-v2 (the packaged fallback: BGE-M3 weights are absent here).
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from newsdedup import cli, clustering, job
from newsdedup.config import load_config
from newsdedup.io import store
from newsdedup_lab import calibrate
from newsdedup.stages.semantic import embeddings as emb
from newsdedup.config import EvidenceConfig
from newsdedup.stages.semantic.evidence import facts_of, refusal

from conftest import REPO, SAMPLE
from semantic_data import DEFAULT_CPU_VERSION, SEM_CONF, T0, VERSION

PAIRS = REPO / "samples" / "semantic_pairs.jsonl"


@pytest.fixture(scope="module")
def sample_run(spark, conf, tmp_path_factory):
    """The job on the sample with the default stage-4 settings (only CPU sizing changed), Delta only."""
    c = conf.with_overrides({"semantic": {"enabled": True, "device": "cpu", "batch_size": 16, "embed_partitions": 1}})
    out = str(tmp_path_factory.mktemp("sample_out"))
    report = job.run(spark, str(SAMPLE), out, c, load_pg=False)
    docs = {r.id: r for r in store.read(spark, out, "documents").select("id", "lang", "title", "body",
                                                                       "published_at").collect()}
    links = [r.asDict() for r in store.read(spark, out, "duplicate_links").collect()]
    return docs, links, report, out


def test_the_english_only_model_links_no_bangla_article(sample_run, spark):
    docs, links, report, out = sample_run
    semantic = [x for x in links if x["stage"] == "semantic"]
    # Stage 4 runs by default. Its links on the sample depend on what stage 3 left: since stage 3
    # verifies exact shingle sets (issue 11) it finds the sample's edited copies itself.
    assert report.counts["semantic.embedded"] > 0, "stage 4 runs by default on the English survivors"
    # The rate decision written independently by a second outlet (id 38) joins the original (id 1).
    assert {(x["duplicate_id"], x["canonical_id"]) for x in semantic} == {(38, 1)}
    assert all(docs[x[k]].lang == "en" for x in semantic for k in ("duplicate_id", "canonical_id"))
    # The Bangla survivors of stages 1-3 were counted, not compared.
    bangla = {i for i, d in docs.items() if d.lang == "bn"} - {x["duplicate_id"] for x in links}
    assert report.counts["semantic.language_not_covered"] == len(bangla) > 0
    # Not embedded either: the stored vectors are exactly those of the English survivors with a body and a date.
    embedded = {r.id for r in store.read(spark, out, "embeddings").select("id").collect()}
    english = {i for i, d in docs.items() if d.lang == "en" and (d.body or "").strip() and d.published_at} - \
        {x["duplicate_id"] for x in links if x["stage"] != "semantic"}
    assert embedded == english and not embedded & bangla
    assert report.counts["semantic.embedded"] == len(english)
    assert any(f"model_version={DEFAULT_CPU_VERSION} " in n and "fallback" in n for n in report.notes)
    assert any("languages all-MiniLM-L6-v2 does not cover (bn)" in n for n in report.notes)


def test_two_reports_of_two_different_games_do_not_link(sample_run):
    """The sample's derby (2-1) and the Kings game (3-0), six hours apart: two defences keep them apart.
    Their cosine (about 0.6) is at the threshold once calibrated on hand-written pairs (0.60), far below
    the one calibrated on real pairs, and were it to pass, their scores would refuse the link."""
    docs, links, report, _ = sample_run
    derby = min(i for i, d in docs.items() if (d.title or "").startswith("Abahani beat Mohammedan"))
    kings = min(i for i, d in docs.items() if (d.title or "").startswith("Bashundhara Kings beat"))
    groups = {x["duplicate_id"]: x["canonical_id"] for x in links}
    root = lambda i: root(groups[i]) if i in groups else i  # noqa: E731
    assert root(derby) != root(kings)
    text = {i: f"{docs[i].title}\n{docs[i].body}" for i in (derby, kings)}
    a, b = emb.encode(emb.model_for(SEM_CONF), [text[derby], text[kings]])
    calibrated = emb.resolve(load_config().semantic).thresholds.same_language   # the packaged model's
    assert 0.55 <= float(a @ b) < calibrated - 0.1
    published = {i: docs[i].published_at for i in (derby, kings)}
    assert refusal(facts_of(text[derby], published[derby]), facts_of(text[kings], published[kings]),
                   EvidenceConfig()) == "scores_differ"


def test_no_semantic_skips_stage_4(spark, tmp_path, capsys):
    code = cli.main(["run", "--input", str(SAMPLE), "--output", str(tmp_path / "o"), "--dry-run", "--no-semantic"])
    out = capsys.readouterr().out
    assert code == 0 and "links.simhash" in out and "links.semantic" not in out


@pytest.mark.slow
def test_the_notebook_runs_against_the_sample_output(sample_run, spark, tmp_path, monkeypatch):
    """A copy of notebooks/explore_links.ipynb (committed without outputs) executed with nbclient."""
    import nbformat
    from nbclient import NotebookClient

    source = REPO / "notebooks" / "explore_links.ipynb"
    nb = nbformat.read(source, as_version=4)
    assert all(not cell.get("outputs") and cell.get("execution_count") is None
               for cell in nb.cells if cell.cell_type == "code"), "commit the notebook with outputs stripped"
    shutil.copy(source, tmp_path / "explore_links.ipynb")
    nb = nbformat.read(tmp_path / "explore_links.ipynb", as_version=4)
    monkeypatch.setenv("NEWSDEDUP_OUTPUT", sample_run[3])
    NotebookClient(nb, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2   # links per day, score histograms
    text = "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
    # The counts the notebook prints are those of the Delta tables the job wrote.
    docs, links, _, out = sample_run
    active = [x for x in links if x["reverted_at"] is None]
    assert f"{len(docs)} documents, {len(links)} links ({len(active)} active), 1 run(s)\n" in text
    per_stage = {s: sum(x["stage"] == s for x in active) for s in ("url", "content", "simhash", "semantic")}
    assert all(per_stage.values())
    for stage, n in per_stage.items():
        assert re.search(rf"^{stage}\s+{n}$", text, re.M), (stage, n)
    assert f"stage 4 links: {per_stage['semantic']}\n" in text
    refusals = store.table_path(out, "semantic_refusals")
    n_refused = store.read(spark, out, "semantic_refusals").count() if store.exists(spark, refusals) else 0
    assert f"stage 4 refusals: {n_refused}\n" in text
    assert f"stage 4: {VERSION}" in text
    assert "simhash" in text and "url" in text
    # The one-day query over the clustered documents table, with the files it reads (conf layout).
    assert re.search(r"^documents: \d+ file\(s\), clustered by published_at; one day \(2024-03-04\): "
                     r"\d+ documents: 1 file\(s\) read$", text, re.M), text
    assert re.search(r"^duplicate_links: \d+ file\(s\), clustered by stage, linked_at; stage content: "
                     r"1 file\(s\) read$", text, re.M), text
    # Stage 4's one link, with both titles, and no Bangla document in any stage-4 line.
    assert "stage 4 links: 1\n" in text
    line = next(x for x in text.splitlines() if x.startswith("  38 [en] -> 1 [en]"))
    assert "'Bangladesh Bank lifts policy rate to 8.5 percent to fight inflation'" in line
    assert "'Central bank raises policy rate by 50 basis points'" in line
    assert not [x for x in text.splitlines() if x.startswith("  ") and "[bn]" in x and "cosine" in x]


# ---------------------------------------------------------------- week-long chains

def chain_edges():
    """Seven daily reports of one story, each similar to the day before; day 2 also to day 0."""
    edges = [(k, k + 1, 0.9) for k in range(6)] + [(0, 2, 0.7)]
    order = {k: (k * 86400, k) for k in range(7)}
    return edges, order


def test_a_week_long_story_does_not_chain_day_7_to_day_1():
    edges, order = chain_edges()
    links = clustering.earliest_canonicals(edges, order)
    # Day 2 links to day 0 directly, with day 0's score (0.7), not with its neighbour's 0.9;
    # day 3's only earlier neighbour is a duplicate, so it starts a group of its own.
    assert links == [(1, 0, 0.9), (2, 0, 0.7), (4, 3, 0.9), (6, 5, 0.9)]


def test_earliest_canonical_links_on_spark(spark):
    edges, order = chain_edges()
    e = spark.createDataFrame(edges, "a long, b long, score double")
    vertices = spark.createDataFrame([(k, T0 + timedelta(days=k)) for k in order], "id long, published_at timestamp")
    vertices = vertices.select("id", clustering.order_key().alias("key"))
    got = {(r.duplicate_id, r.canonical_id): (r.score, r.stage)
           for r in clustering.earliest_canonical_links(e, vertices, "semantic", 30).collect()}
    assert got == {(1, 0): (0.9, "semantic"), (2, 0): (0.7, "semantic"), (4, 3): (0.9, "semantic"),
                   (6, 5): (0.9, "semantic")}
    # Connected components would have put day 6 under day 0.
    labels = {r.id: r.label.id for r in clustering.connected_labels(e, vertices, 30).collect()}
    assert labels[6] == 0


# ---------------------------------------------------------------- calibration

def test_choose_takes_the_lowest_threshold_that_keeps_the_target_precision():
    labels = np.array([1, 1, 1, 0, 0])
    scores = np.array([0.9, 0.8, 0.6, 0.7, 0.5])
    sw = calibrate.sweep(labels, scores)
    assert calibrate.choose(sw, 0.95) == pytest.approx(0.705)
    assert calibrate.choose(sw, 0.5) == pytest.approx(0.30)
    vetoed = np.array([False, False, False, True, False])    # the evidence refuses the negative at 0.7
    assert calibrate.choose(calibrate.sweep(labels, scores, vetoed), 0.95) == pytest.approx(0.505)
    assert calibrate.choose(sw, 1.0) == pytest.approx(0.705)


def test_wilson_interval_of_a_proportion():
    assert calibrate.wilson(0, 0) == (0.0, 1.0)
    lo, hi = calibrate.wilson(0, 99)
    assert lo == 0.0 and hi == pytest.approx(0.0373, abs=1e-3)    # no false link in 99 still allows 3.7%
    lo, hi = calibrate.wilson(33, 63)
    assert lo == pytest.approx(0.403, abs=1e-3) and hi == pytest.approx(0.642, abs=1e-3)


def test_calibrate_command_prints_precision_recall_and_writes_plot_and_thresholds(tmp_path, capsys):
    rows = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines()]
    subset = [r for r in rows if r["domain"] in ("football", "extra")]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in subset), encoding="utf-8")
    out = tmp_path / "cal"
    assert cli.main(["calibrate", "--pairs", str(pairs), "--output", str(out), "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert f"model_version {DEFAULT_CPU_VERSION}" in text and "en-en:" in text
    assert "bn-bn:" in text and "not covered" in text
    assert "threshold  precision  recall" in text
    assert (out / "calibration.png").stat().st_size > 10_000
    snippet = (out / "calibration.yaml").read_text()
    assert f"{DEFAULT_CPU_VERSION}: {{same_language: " in snippet and "pairs: {en-en: " in snippet
    assert "chosen en-en:" in text and "different events linked 0/" in text
    result = json.loads((out / "calibration.json").read_text())
    assert result["covered"] == {"bn-bn": False, "en-bn": False, "en-en": True}
    sweep = pd.DataFrame(result["sweeps"]["en-en"])
    assert sweep["recall"].is_monotonic_decreasing and sweep["tp"].iloc[0] > 0
