"""What a run has finished, kept under the output so that a crashed run can resume.

One mechanism for every step of a run (prepare, each stage, the Delta write):
`step(name, compute, measure=...)` runs `compute()` unless the step is already
done. `compute` returns a `StepOutput`: the DataFrames the step produced and
the step's own `StepReport`. The frames are persisted under
`<output>/_runs/<run_id>/<step>/<frame>` (Parquet on a local disk or HDFS, Delta
tables on object stores: `frame_format`), `measure` reads counters from the
frames as written, and then the step's completion marker is written: one small
JSON file, `<output>/_runs/<run_id>/_markers/<step>.json`, holding the frame
names and the step's report. A resumed run reads the frames back and returns
the stored report instead of recomputing: the caller adds either to the run
report the same way. Counting what was written, rather than what was computed,
means a step's frames need no cache: they are computed once, by their write.

A step's frames are written with mode overwrite, and its marker only after
every frame is committed, so a step killed half-way is simply run again; a
marker that cannot be read (torn by a crash while written) counts as not
written. Markers are plain files, not rows of a Delta table: an append and its
commit cost about a second per step, a file a few milliseconds. Runs recorded
by earlier versions (marker rows in the Delta table `_steps`) are still read.

`InMemory` is the same shape without persistence (dry runs, tests that pass
no output): frames are cached.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable

from . import progress
from .errors import UserError
from .io import paths
from .report import StepReport

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RUNS_DIR = "_runs"
# One file per finished step; the marker of step "run" (written first) records the run's input and start.
MARKERS = "_markers"
# Where earlier versions kept the markers, as rows of a Delta table of this schema (read on --resume).
DELTA_MARKERS = "_steps"
MARKER_SCHEMA = ("step string, frames array<string>, report string, input string, started_at timestamp, "
                 "finished_at timestamp")
RUN, FINISHED = "run", "finished"     # marker rows that are not steps
Frames = dict[str, "DataFrame"]
# Outputs whose frames are written as Parquet: filesystems where a rename is a metadata operation,
# so a Parquet write commits by renaming its task files. There a Delta commit costs a small frame
# more than its data (its log, checksum and snapshot: 1.1-1.9 s a frame here, newsdedup_lab.bench_frames;
# about 12 s of a fresh sample run). On object stores a rename copies every byte, and the prepared frame holds every text:
# there the frames stay Delta tables, which commit by writing one log file.
PARQUET_SCHEMES = (None, "file", "hdfs")     # None: a plain local path
Measure = Callable[[Frames], dict[str, int]]


def frame_format(output: str) -> str:
    """How a run under output keeps its frames: "parquet" or "delta" (PARQUET_SCHEMES)."""
    return "parquet" if paths.scheme(output) in PARQUET_SCHEMES else "delta"


class UnknownRunError(UserError):
    """--resume names a run that has no state under the output."""


@dataclass
class StepOutput:
    """What a step computes: its frames and what it found."""

    frames: Frames
    report: StepReport = field(default_factory=StepReport)


@dataclass
class StepOutcome:
    """A finished step: its frames (as persisted), its report (with the step's total seconds), whether reused."""

    frames: Frames
    report: StepReport
    resumed: bool


Compute = Callable[[], StepOutput]
Summary = Callable[[StepReport], str]


def _run_step(name: str, compute: Compute, persist: Callable[[Frames], Frames], summary: Summary,
              measure: Measure | None) -> StepOutcome:
    """compute, persist, measure, timed as one step, with its progress lines."""
    progress.started(name)
    timer = StepReport()

    def run() -> StepOutput:
        out = compute()
        frames = persist(out.frames)
        measured = measure(frames) if measure is not None else {}
        # What was measured on the written frames leads the step's counters (links.<stage> first).
        return StepOutput(frames, StepReport(counts=measured).merged(out.report))

    out = timer.timed(name, run)
    report = out.report.merged(timer)
    progress.finished(name, timer.seconds[name], summary(report))
    return StepOutcome(out.frames, report, resumed=False)


class InMemory:
    """Steps that keep nothing: every step runs, its frames are cached."""

    def finish(self, keep_frames: bool = False) -> None:
        pass

    def step(self, name: str, compute: Compute, summary: Summary = lambda r: "",
             measure: Measure | None = None) -> StepOutcome:
        return _run_step(name, compute, lambda frames: {k: v.cache() for k, v in frames.items()}, summary, measure)


@dataclass
class _Marker:
    frames: list[str]
    report: StepReport
    input: str | None = None
    started_at: datetime | None = None
    # How the step's frames were written; runs recorded before there was a choice wrote Delta.
    format: str = "delta"


class Persisted:
    """Steps of one run under <output>/_runs/<run_id>; see the module docstring."""

    def __init__(self, spark: "SparkSession", output: str, run_id: str):
        self.spark = spark
        self.run_id = run_id
        self.output = output
        self.root = paths.join(paths.qualified(output), RUNS_DIR, run_id)
        self.markers = paths.join(self.root, MARKERS)
        self.delta_markers = paths.join(self.root, DELTA_MARKERS)
        self.format = frame_format(output)
        self._done = self._read_markers()
        # An attempt of this run began before this one (it may have written any of its records); read
        # here, before start() marks this attempt.
        self.attempted_before = RUN in self._done

    # -------------------------------------------------------------- the run's own record

    @classmethod
    def start(cls, spark: "SparkSession", output: str, run_id: str, input_path: str,
              started_at: datetime) -> "Persisted":
        state = cls(spark, output, run_id)
        if FINISHED in state._done:
            # Its frames are gone: "reusing" its steps would read tables that no longer exist.
            raise UserError(f"run id {run_id} has already finished under {output}; "
                            "a new run needs a new id (see the runs table)")
        if RUN not in state._done:
            state._mark(RUN, _Marker([], StepReport(), input=input_path, started_at=started_at,
                                     format=state.format))
        return state

    @classmethod
    def resume(cls, spark: "SparkSession", output: str, run_id: str) -> "Persisted":
        state = cls(spark, output, run_id)
        if RUN not in state._done:
            raise UnknownRunError(f"--resume {run_id}: no such run under {output} "
                                  f"(runs that can be resumed: {', '.join(list_runs(spark, output)) or 'none'})")
        if FINISHED in state._done:
            raise UserError(f"--resume {run_id}: that run has finished; see the runs table")
        return state

    @property
    def input_path(self) -> str:
        return self._done[RUN].input

    @property
    def started_at(self) -> datetime:
        return self._done[RUN].started_at

    def completed(self) -> list[str]:
        return [s for s in self._done if s not in (RUN, FINISHED)]

    # -------------------------------------------------------------- steps

    def step(self, name: str, compute: Compute, summary: Summary = lambda r: "",
             measure: Measure | None = None) -> StepOutcome:
        if name in self._done:
            done = self._done[name]
            progress.line(f"{name}: done in an earlier attempt, reusing it{_sep(summary(done.report))}")
            return StepOutcome({f: self._read(name, f, done.format) for f in done.frames}, done.report,
                               resumed=True)
        outcome = _run_step(name, compute, lambda frames: self._write_all(name, frames), summary, measure)
        self._mark(name, _Marker(sorted(outcome.frames), outcome.report, format=self.format))
        return outcome

    def _write_all(self, step: str, frames: Frames) -> Frames:
        """Write every frame (overwrite: a half-written earlier attempt is replaced) and read it back.

        Frames the step cached are released once all are written (one may be computed from
        another): the run reads them back from Delta, and a cached prepared frame (every document
        with its text) left the write of the documents table without the heap it needed
        (OutOfMemoryError at 200k documents in a 2g local driver)."""
        for name, df in frames.items():
            writer = df.write.format(self.format).mode("overwrite")
            if self.format == "delta":
                writer = writer.option("overwriteSchema", "true")
            writer.save(paths.join(self.root, step, name))
        for df in frames.values():
            df.unpersist()
        return {name: self._read(step, name, self.format) for name in frames}

    def _read(self, step: str, frame: str, fmt: str) -> "DataFrame":
        return self.spark.read.format(fmt).load(paths.join(self.root, step, frame))

    def _mark(self, step: str, marker: _Marker) -> None:
        record = {"step": step, "frames": marker.frames, "format": marker.format,
                  "report": marker.report.to_json(), "input": marker.input,
                  "started_at": marker.started_at.isoformat() if marker.started_at else None,
                  "finished_at": datetime.now(timezone.utc).isoformat()}
        paths.write_text(self.spark, paths.join(self.markers, f"{step}.json"), json.dumps(record))
        self._done[step] = marker

    def _read_markers(self) -> dict[str, _Marker]:
        found: list[tuple[datetime, str, _Marker]] = []
        if paths.is_delta(self.spark, self.delta_markers):
            found += self._read_delta_markers()
        for name in paths.children(self.spark, self.markers):
            if name.startswith(".") or not name.endswith(".json"):   # the local FileSystem's .crc files
                continue
            try:
                text = paths.read_text(self.spark, paths.join(self.markers, name))
            except Exception as exc:
                if not _torn(exc):    # the store itself failing is not a step left unfinished
                    raise
                continue
            try:
                r = json.loads(text)
                marker = _Marker(list(r["frames"] or []), StepReport.from_json(r["report"]), r["input"],
                                 _parsed(r["started_at"]), r.get("format", "delta"))
                found.append((_parsed(r["finished_at"]), r["step"], marker))
            except (ValueError, KeyError, TypeError):   # torn by a crash while written: the step did not finish
                continue
        return {step: marker for _, step, marker in sorted(found, key=lambda f: f[0])}

    def _read_delta_markers(self) -> list[tuple[datetime, str, _Marker]]:
        """Markers of a run recorded by an earlier version: rows of a Delta table."""
        table = self.spark.read.format("delta").load(self.delta_markers)
        if "report" not in table.columns:
            # Markers of the layout before report.py (counts/notes/seconds columns).
            raise UserError(f"run {self.run_id} under {self.output} was recorded by an older newsdedup; "
                            "it cannot be resumed by this version: start the run again")
        return [(_utc(r["finished_at"]), r["step"],
                 _Marker(list(r["frames"] or []), StepReport.from_json(r["report"]), r["input"], _utc(r["started_at"])))
                for r in table.collect()]   # a handful of rows, one per finished step

    def finish(self, keep_frames: bool = False) -> None:
        """Mark the run finished; its intermediate frames were only kept for --resume and go now."""
        if not keep_frames:
            for step in self.completed():
                paths.delete(self.spark, paths.join(self.root, step))
        if FINISHED not in self._done:
            self._mark(FINISHED, _Marker([], StepReport(), format=self.format))


def _torn(exc: BaseException) -> bool:
    """A marker file cut short by a crash: its checksum (the local FileSystem's .crc) or length is wrong."""
    text = paths.java_failure_text(exc) or ""
    return "ChecksumException" in text or "EOFException" in text


def _parsed(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _utc(ts: datetime | None) -> datetime | None:
    """PySpark's collect() hands a timestamp back naive, in the Python process's local time."""
    if ts is None or ts.tzinfo is not None:
        return ts
    return ts.astimezone(timezone.utc)   # a naive datetime is taken as local time here


def list_runs(spark: "SparkSession", output: str) -> list[str]:
    return paths.children(spark, paths.join(paths.qualified(output), RUNS_DIR))


def _sep(text: str) -> str:
    return f": {text}" if text else ""
