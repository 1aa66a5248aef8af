"""What a run has finished, kept under the output so that a crashed run can resume.

One mechanism for every step of a run (prepare, each stage, the Delta write):
`Steps.step(name, compute, measure=...)` runs `compute()` unless the step is
already done, persists the DataFrames it returns as Delta tables under
`<output>/_runs/<run_id>/<step>/<frame>`, runs `measure` (report counters) on
the frames as written, then appends a row to `<output>/_runs/<run_id>/_steps`
(the completion marker) with what the step added to the run report. A resumed
run reads the frames back and replays the report entries instead of recomputing.
Counting what was written, rather than what was computed, means a step's frames
need no cache: they are computed once, by their write.

A step's frames are written with mode overwrite, and its marker only after
every frame is committed, so a step killed half-way is simply run again.

`InMemory` is the same shape without persistence (dry runs, tests that pass
no output): frames are cached, as they were before resumable runs.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Callable

from . import progress
from .errors import UserError
from .io import paths

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .job import Report

RUNS_DIR = "_runs"
MARKERS = "_steps"
MARKER_SCHEMA = "step string, counts string, notes string, seconds string, finished_at timestamp"
Frames = dict[str, "DataFrame"]
Measure = Callable[[Frames], None]


class UnknownRunError(UserError):
    """--resume names a run that has no state under the output."""


@dataclass
class StepOutcome:
    frames: Frames
    resumed: bool


class InMemory:
    """Steps that keep nothing: every step runs, its frames are cached."""

    def finish(self, keep_frames: bool = False) -> None:
        pass

    def step(self, name: str, report: "Report", compute: Callable[[], Frames],
             summary: Callable[["Report"], str] = lambda r: "", measure: Measure | None = None) -> StepOutcome:
        frames = _timed_step(name, report, lambda: {k: v.cache() for k, v in compute().items()}, summary, measure)
        return StepOutcome(frames, resumed=False)


def _timed_step(name: str, report: "Report", compute: Callable[[], Frames],
                summary: Callable[["Report"], str], measure: Measure | None) -> Frames:
    progress.started(name)
    t0 = time.perf_counter()

    def run() -> Frames:
        frames = compute()
        if measure is not None:
            measure(frames)
        return frames

    frames = report.timed(name, run)
    progress.finished(name, time.perf_counter() - t0, summary(report))
    return frames


class Persisted:
    """Steps of one run under <output>/_runs/<run_id>; see the module docstring."""

    def __init__(self, spark: "SparkSession", output: str, run_id: str):
        self.spark = spark
        self.run_id = run_id
        self.root = paths.join(paths.qualified(output), RUNS_DIR, run_id)
        self.markers = paths.join(self.root, MARKERS)
        self._done = self._read_markers()

    # -------------------------------------------------------------- the run's own record

    @classmethod
    def start(cls, spark: "SparkSession", output: str, run_id: str, input_path: str,
              started_at: datetime) -> "Persisted":
        state = cls(spark, output, run_id)
        if "finished" in state._done:
            # Its frames are gone: "reusing" its steps would read tables that no longer exist.
            raise UserError(f"run id {run_id} has already finished under {output}; "
                            "a new run needs a new id (see the runs table)")
        if "run" not in state._done:
            state._mark("run", {"input": input_path, "started_at": started_at.isoformat()}, [], {})
        return state

    @classmethod
    def resume(cls, spark: "SparkSession", output: str, run_id: str) -> "Persisted":
        state = cls(spark, output, run_id)
        if "run" not in state._done:
            raise UnknownRunError(f"--resume {run_id}: no such run under {output} "
                                  f"(runs that can be resumed: {', '.join(list_runs(spark, output)) or 'none'})")
        if "finished" in state._done:
            raise UserError(f"--resume {run_id}: that run has finished; see the runs table")
        return state

    @property
    def input_path(self) -> str:
        return self._done["run"]["counts"]["input"]

    @property
    def started_at(self) -> datetime:
        return datetime.fromisoformat(self._done["run"]["counts"]["started_at"])

    def completed(self) -> list[str]:
        return [s for s in self._done if s != "run"]

    # -------------------------------------------------------------- steps

    def step(self, name: str, report: "Report", compute: Callable[[], Frames],
             summary: Callable[["Report"], str] = lambda r: "", measure: Measure | None = None) -> StepOutcome:
        if name in self._done:
            entry = self._done[name]
            report.counts.update(entry["counts"])
            report.notes.extend(entry["notes"])
            for k, v in entry["seconds"].items():
                report.seconds[k] = round(report.seconds.get(k, 0.0) + v, 3)
            progress.line(f"{name}: done in an earlier attempt, reusing it{_sep(summary(report))}")
            return StepOutcome({f: self._read(name, f) for f in entry["frames"]}, resumed=True)

        before = (dict(report.counts), len(report.notes), dict(report.seconds))
        frames = _timed_step(name, report, lambda: self._write_all(name, compute()), summary, measure)
        counts = {k: v for k, v in report.counts.items() if before[0].get(k) != v}
        seconds = {k: round(v - before[2].get(k, 0.0), 3) for k, v in report.seconds.items()
                   if before[2].get(k) != v}
        self._mark(name, counts, report.notes[before[1]:], seconds, frames=sorted(frames))
        return StepOutcome(frames, resumed=False)

    def _write_all(self, step: str, frames: Frames) -> Frames:
        """Write every frame (overwrite: a half-written earlier attempt is replaced) and read it back.

        Frames the step cached are released once all are written (one may be computed from
        another): the run reads them back from Delta, and a cached prepared frame (every document
        with its text) left the write of the documents table without the heap it needed
        (OutOfMemoryError at 200k documents in a 2g local driver)."""
        for name, df in frames.items():
            df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(
                paths.join(self.root, step, name))
        for df in frames.values():
            df.unpersist()
        return {name: self._read(step, name) for name in frames}

    def _read(self, step: str, frame: str) -> "DataFrame":
        return self.spark.read.format("delta").load(paths.join(self.root, step, frame))

    def _mark(self, step: str, counts: dict, notes: list[str], seconds: dict,
              frames: list[str] | None = None) -> None:
        from datetime import timezone

        entry = {"counts": counts, "notes": notes, "seconds": seconds, "frames": frames or []}
        row = [(step, json.dumps(counts), json.dumps(notes), json.dumps({"seconds": seconds, "frames": frames or []}),
                datetime.now(timezone.utc))]
        self.spark.createDataFrame(row, MARKER_SCHEMA).write.format("delta").mode("append").save(self.markers)
        self._done[step] = entry

    def _read_markers(self) -> dict[str, dict]:
        if not paths.is_delta(self.spark, self.markers):
            return {}
        done: dict[str, dict] = {}
        # A handful of rows, one per finished step.
        for r in self.spark.read.format("delta").load(self.markers).orderBy("finished_at").collect():
            extra = json.loads(r["seconds"])
            done[r["step"]] = {"counts": json.loads(r["counts"]), "notes": json.loads(r["notes"]),
                               "seconds": extra["seconds"], "frames": extra["frames"]}
        return done

    def finish(self, keep_frames: bool = False) -> None:
        """Mark the run finished; its intermediate frames were only kept for --resume and go now."""
        if not keep_frames:
            for step in self.completed():
                paths.delete(self.spark, paths.join(self.root, step))
        if "finished" not in self._done:
            self._mark("finished", {}, [], {})


def list_runs(spark: "SparkSession", output: str) -> list[str]:
    return paths.children(spark, paths.join(paths.qualified(output), RUNS_DIR))


def _sep(text: str) -> str:
    return f": {text}" if text else ""
