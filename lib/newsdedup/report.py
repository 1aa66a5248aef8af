"""What a run tells its operator: counters, timings and notes, per step and for the whole run.

Two shapes, one idea:

- `StepReport` is what one step (prepare, a stage, the Delta write) found. The
  step builds it and returns it; nothing else writes into it. It is what the
  run state persists for `--resume` (runstate.py), so a resumed run replays
  each finished step's report instead of recomputing the step.
- `RunReport` is the sum of the steps' reports plus the few run-level
  counters the job adds itself (existing documents, links.total, ...). It is
  printed by `newsdedup run` and stored as JSON in the runs table.

Counters are ints and keep the value the last step gave them; seconds add up
(a step timed in two attempts, or a sub-step timed twice, sums); notes append.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, TypeVar

T = TypeVar("T")


def new_run_id(now: datetime | None = None) -> str:
    """Sortable by start time, unique by its random tail: 20261204T171406Z-3fa2c1."""
    now = now or datetime.now(timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


@dataclass
class _Tally:
    """Counters, timings and notes, and the two ways they grow (shared by both reports)."""

    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def timed(self, name: str, fn: Callable[[], T]) -> T:
        """fn(), with its wall time added to seconds[name]."""
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self._add_seconds(name, time.perf_counter() - t0)

    def add(self, other: "_Tally") -> None:
        """other's counters win; seconds add up; notes append."""
        self.counts.update(other.counts)
        for k, v in other.seconds.items():
            self._add_seconds(k, v)
        self.notes.extend(other.notes)

    def _add_seconds(self, name: str, seconds: float) -> None:
        self.seconds[name] = round(self.seconds.get(name, 0.0) + seconds, 3)


@dataclass
class StepReport(_Tally):
    """One step's counters, timings and notes."""

    def merged(self, other: "StepReport") -> "StepReport":
        """A new report: self followed by other (see add)."""
        out = StepReport(dict(self.counts), dict(self.seconds), list(self.notes))
        out.add(other)
        return out

    def to_json(self) -> str:
        return json.dumps({"counts": self.counts, "seconds": self.seconds, "notes": self.notes}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "StepReport":
        d = json.loads(text)
        return cls({k: int(v) for k, v in d["counts"].items()}, {k: float(v) for k, v in d["seconds"].items()},
                   list(d["notes"]))


@dataclass(kw_only=True)
class RunReport(_Tally):
    """The whole run's report: every step's (add), in the order they ran, plus run-level counters.

    Its own timed() is for the job's steps that are not persisted (loading Postgres)."""

    run_id: str

    def table(self) -> str:
        rows: list[tuple[str, Any]] = [("run_id", self.run_id)] + [(k, str(v)) for k, v in self.counts.items()]
        rows += [(f"seconds.{k}", f"{v:.2f}") for k, v in self.seconds.items()]
        width = max(len(k) for k, _ in rows)
        lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({"run_id": self.run_id, "counts": self.counts, "seconds": self.seconds,
                           "notes": self.notes}, indent=2, sort_keys=True)
