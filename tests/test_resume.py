"""A run killed (SIGKILL, a real subprocess) in stage 3 and again during the Delta write, then resumed,
ends with exactly the links of an uninterrupted run, nothing duplicated."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from newsdedup import job, runstate
from newsdedup.errors import UserError
from newsdedup.io import store

from conftest import SAMPLE
from servers import REPO, VENV_BIN, newsdedup

pytestmark = pytest.mark.slow

# Every stage-3 bucket of more than one document is split, so that stage 3 flags documents: the
# flags are part of the step's persisted frames and must survive the resume. Stage 4 is off here
# and in the reference run, so both runs have the same stages.
OVERRIDES = {"simhash": {"max_band_bucket": 1}, "semantic": {"enabled": False}}
SMALL = json.dumps({"spark": {"shuffle_partitions": 2, "delta_snapshot_partitions": 1}, **OVERRIDES})


def killed_at(args: list[str], cwd: Path, when, timeout: float = 900) -> tuple[str, str]:
    """Run `newsdedup args`, SIGKILL it as soon as when(stderr_line) is true; return (run_id, stderr)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen([str(VENV_BIN / "newsdedup"), *args], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True, env=env, cwd=cwd, start_new_session=True)
    lines, run_id, deadline = [], None, time.time() + timeout
    try:
        for line in proc.stderr:
            lines.append(line)
            m = re.search(r"run (\S+): ", line)
            run_id = run_id or (m.group(1) if m else None)
            if when(line):
                proc.send_signal(signal.SIGKILL)       # the driver dies mid-step, as in a crash
                break
            assert time.time() < deadline, "".join(lines)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        try:
            os.killpg(proc.pid, signal.SIGKILL)        # the JVM it started, if still there
        except ProcessLookupError:
            pass
    assert proc.returncode == -signal.SIGKILL, "".join(lines)
    return run_id, "".join(lines)


def wait_for_file(path: Path, timeout: float = 600) -> bool:
    deadline = time.time() + timeout
    while not path.exists():
        if time.time() > deadline:
            return False
        time.sleep(0.2)
    return True


def link_rows(spark, out):
    return sorted((r.duplicate_id, r.canonical_id, r.stage, r.score)
                  for r in store.read(spark, str(out), "duplicate_links").collect())


def flag_rows(spark, out):
    return sorted((r.id, f) for r in store.read(spark, str(out), "documents").select("id", "flags").collect()
                  for f in r.flags or [])


def test_killed_in_stage_3_and_in_the_delta_write_then_resumed(spark, conf, tmp_path):
    conf_file = tmp_path / "small.yaml"
    conf_file.write_text(SMALL)
    out = tmp_path / "out"
    base = ["--output", str(out), "--no-postgres", "--conf", str(conf_file)]

    # 1. killed while stage 3 (simhash) runs: prepare, url and content are kept.
    run_id, err = killed_at(["run", "--input", str(SAMPLE), *base], tmp_path,
                            lambda line: "simhash: started" in line)
    state = runstate.Persisted(spark, str(out), run_id)
    assert state.completed() == ["prepare", "url", "content"]
    assert not store.exists(spark, store.table_path(str(out), "duplicate_links"))

    # 2. resumed, and killed again once the Delta write has committed its first table.
    def first_commit_then(line):
        if "write_delta: started" not in line:
            return False
        return wait_for_file(out / "documents" / "_delta_log" / "00000000000000000000.json")

    again, err = killed_at(["run", "--resume", run_id, *base], tmp_path, first_commit_then)
    assert again == run_id
    assert "content: done in an earlier attempt" in err and "simhash: done in" in err
    assert "write_delta" not in runstate.Persisted(spark, str(out), run_id).completed()

    # 3. resumed to the end.
    done = newsdedup(["run", "--resume", run_id, *base], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "simhash: done in an earlier attempt" in done.stderr

    # The same links as a run nobody interrupted, once each, all stamped with the one run id.
    reference = tmp_path / "reference"
    job.run(spark, str(SAMPLE), str(reference), conf.with_overrides(OVERRIDES),
            load_pg=False)
    assert link_rows(spark, out) == link_rows(spark, reference)
    split = flag_rows(spark, reference)
    assert any(f.startswith("simhash_bucket_split:") for _, f in split)
    assert flag_rows(spark, out) == split
    links = store.read(spark, str(out), "duplicate_links")
    assert links.select("duplicate_id").distinct().count() == links.count()
    assert [r[0] for r in links.select("run_id").distinct().collect()] == [run_id]
    assert links.select("linked_at").distinct().count() == 1
    docs = store.read(spark, str(out), "documents")
    assert docs.count() == docs.select("id").distinct().count() == 38
    assert store.read(spark, str(out), "runs").where(F.col("run_id") == run_id).count() == 1
    # Finished: the intermediate frames are gone, the markers stay; resuming again is refused.
    assert sorted(p.name for p in (out / "_runs" / run_id).iterdir()) == [runstate.MARKERS]
    refused = newsdedup(["run", "--resume", run_id, *base], cwd=tmp_path)
    assert refused.returncode == 2 and "has finished" in refused.stderr


def test_resume_of_an_unknown_run_is_one_line(tmp_path):
    out = tmp_path / "out"
    done = newsdedup(["run", "--resume", "nope", "--output", str(out), "--no-postgres"], cwd=REPO)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--resume nope: no such run" in done.stderr


def test_a_finished_run_id_is_not_started_again(spark, conf, tmp_path):
    out = tmp_path / "out"
    small = conf.with_overrides({"semantic": {"enabled": False}})
    job.run(spark, str(SAMPLE), str(out), small, load_pg=False, run_id="once")
    with pytest.raises(UserError, match="run id once has already finished"):
        job.run(spark, str(SAMPLE), str(out), small, load_pg=False, run_id="once")
    assert store.read(spark, str(out), "runs").where(F.col("run_id") == "once").count() == 1


def test_a_run_that_died_after_recording_itself_is_recorded_once_when_resumed(spark, conf, tmp_path, monkeypatch):
    """The runs row is appended before the run state is marked finished: a run that dies between the
    two has its row already, and its resumed attempt must not add a second one."""
    out = tmp_path / "out"
    small = conf.with_overrides({"semantic": {"enabled": False}})
    real = runstate.Persisted.finish

    def dies(self, keep_frames=False):
        raise RuntimeError("died after the runs row was appended")

    monkeypatch.setattr(runstate.Persisted, "finish", dies)
    with pytest.raises(RuntimeError, match="died after the runs row"):
        job.run(spark, str(SAMPLE), str(out), small, load_pg=False, run_id="twice")
    monkeypatch.setattr(runstate.Persisted, "finish", real)
    runs = store.read(spark, str(out), "runs")
    assert runs.where(F.col("run_id") == "twice").count() == 1
    job.run(spark, None, str(out), small, load_pg=False, resume="twice")
    assert store.read(spark, str(out), "runs").where(F.col("run_id") == "twice").count() == 1


def test_a_run_state_of_the_older_marker_layout_is_refused_in_one_line(spark, conf, tmp_path):
    """Markers written before report.py (counts/notes/seconds columns, the input in counts)."""
    import json
    from datetime import datetime, timezone

    out, run_id = str(tmp_path / "out"), "old-layout"
    markers = f"{out}/{runstate.RUNS_DIR}/{run_id}/{runstate.DELTA_MARKERS}"
    row = [("run", json.dumps({"input": str(SAMPLE), "started_at": datetime.now(timezone.utc).isoformat()}),
            "[]", json.dumps({"seconds": {}, "frames": []}), datetime.now(timezone.utc))]
    spark.createDataFrame(row, "step string, counts string, notes string, seconds string, finished_at timestamp") \
        .write.format("delta").save(markers)
    small = conf.with_overrides({"semantic": {"enabled": False}})
    with pytest.raises(UserError, match="recorded by an older newsdedup") as err:
        job.run(spark, None, out, small, load_pg=False, resume=run_id)
    assert "\n" not in str(err.value)



def test_a_run_recorded_by_the_delta_markers_version_resumes(spark, conf, tmp_path):
    """Markers were rows of a Delta table (runstate.DELTA_MARKERS) before they were files: a run
    started then resumes from them, and goes on with file markers."""
    from datetime import datetime, timezone

    from newsdedup.report import StepReport

    out, run_id = str(tmp_path / "out"), "delta-markers"
    markers = f"{out}/{runstate.RUNS_DIR}/{run_id}/{runstate.DELTA_MARKERS}"
    now = datetime.now(timezone.utc)
    spark.createDataFrame([("run", [], StepReport().to_json(), str(SAMPLE), now, now)],
                          runstate.MARKER_SCHEMA).write.format("delta").save(markers)
    assert runstate.Persisted(spark, out, run_id).input_path == str(SAMPLE)
    small = conf.with_overrides({"semantic": {"enabled": False}})
    job.run(spark, None, out, small, load_pg=False, resume=run_id)
    assert store.read(spark, out, "runs").where(F.col("run_id") == run_id).count() == 1
    assert store.read(spark, out, "documents").count() == 38
    written = sorted(p.name for p in (tmp_path / "out" / runstate.RUNS_DIR / run_id / runstate.MARKERS).glob("*.json"))
    assert "finished.json" in written and "prepare.json" in written
    with pytest.raises(UserError, match="has finished"):
        runstate.Persisted.resume(spark, out, run_id)


def test_a_marker_torn_by_a_crash_leaves_its_step_unfinished(spark, tmp_path):
    from datetime import datetime, timezone

    from newsdedup.report import StepReport

    out = str(tmp_path / "out")
    state = runstate.Persisted.start(spark, out, "torn", "/in", datetime.now(timezone.utc))
    for step in ("prepare", "url", "content"):
        state._mark(step, runstate._Marker(["links"], StepReport(counts={f"links.{step}": 3})))
    again = runstate.Persisted(spark, out, "torn")
    assert again.completed() == ["prepare", "url", "content"]
    assert again._done["url"].report.counts == {"links.url": 3}
    folder = tmp_path / "out" / runstate.RUNS_DIR / "torn" / runstate.MARKERS
    # Cut short under its checksum (the local FileSystem's .crc), then without one (as on an object store).
    (folder / "url.json").write_text('{"step": "url", "fra')
    assert runstate.Persisted(spark, out, "torn").completed() == ["prepare", "content"]
    (folder / ".url.json.crc").unlink()
    assert runstate.Persisted(spark, out, "torn").completed() == ["prepare", "content"]


def test_frames_are_parquet_on_a_filesystem_and_delta_on_an_object_store():
    assert runstate.frame_format("/data/out") == "parquet"
    assert runstate.frame_format("file:///data/out") == "parquet"
    assert runstate.frame_format("hdfs://nn/dedup") == "parquet"
    # A Parquet commit renames its files: on an object store that is a copy of every byte.
    for uri in ("s3a://archive/dedup", "gs://archive/dedup", "abfss://c@acct.dfs.core.windows.net/dedup"):
        assert runstate.frame_format(uri) == "delta"


def test_a_local_run_keeps_parquet_frames_and_resumes_a_run_whose_frames_are_delta(spark, tmp_path):
    """Runs recorded before the frames' format was chosen wrote Delta tables and markers without a
    format: those frames are read back as Delta. A Delta frame written twice (a killed attempt, then
    the finished one) holds both attempts' files; read as Parquet it would return both."""
    from datetime import datetime, timezone

    out, now = str(tmp_path / "out"), datetime.now(timezone.utc)
    state = runstate.Persisted.start(spark, out, "fresh", "/in", now)
    done = state.step("prepare", lambda: runstate.StepOutput({"prepared": spark.range(3)}))
    frame = tmp_path / "out" / runstate.RUNS_DIR / "fresh" / "prepare" / "prepared"
    assert (frame / "_SUCCESS").exists() and not (frame / "_delta_log").exists()
    assert sorted(r.id for r in done.frames["prepared"].collect()) == [0, 1, 2]
    written = tmp_path / "out" / runstate.RUNS_DIR / "fresh" / runstate.MARKERS
    assert {json.loads((written / f"{m}.json").read_text())["format"] for m in ("run", "prepare")} == {"parquet"}

    older = runstate.Persisted.start(spark, out, "older", "/in", now)
    older.format = "delta"
    older.step("url", lambda: runstate.StepOutput({"links": spark.range(10, 13)}))      # the killed attempt
    older._done.pop("url")
    older.step("url", lambda: runstate.StepOutput({"links": spark.range(3)}))
    marker = tmp_path / "out" / runstate.RUNS_DIR / "older" / runstate.MARKERS / "url.json"
    record = json.loads(marker.read_text())
    del record["format"]                      # as versions before the choice wrote it
    marker.write_text(json.dumps(record))
    (marker.parent / ".url.json.crc").unlink()

    resumed = runstate.Persisted.resume(spark, out, "older")
    outcome = resumed.step("url", lambda: pytest.fail("a finished step was computed again"))
    assert outcome.resumed
    assert sorted(r.id for r in outcome.frames["links"].collect()) == [0, 1, 2]
