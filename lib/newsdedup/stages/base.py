"""What every stage is: the context it runs in, the result it returns, the shape it has.

See the package docstring (stages/__init__.py) for the contract. This module
imports nothing of the stages, so every stage module can import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..config import Config


@dataclass
class StageContext:
    """What a stage may read besides the documents it is given."""

    spark: "SparkSession"
    conf: "Config"
    run_id: str
    # Every prepared document with all its columns (text included), for stages that need more
    # than the unresolved rows carry: the slice being run plus, on an output that already holds
    # documents, the stored ones the slice does not replace (incremental.with_stored).
    archive: "DataFrame"
    output: str | None = None         # where a stage may persist its own state (None: dry run)


@dataclass
class StageResult:
    links: "DataFrame"                # duplicate_id, canonical_id, stage, score (+ via_id when clustered)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)       # counters for the run report
    seconds: dict[str, float] = field(default_factory=dict)    # timings of the stage's own parts
    # id, flag: documents the stage could not fully handle (e.g. not compared with every
    # candidate); the cascade appends the flag to their documents row.
    flags: "DataFrame | None" = None


class Stage(Protocol):
    name: str
    columns: tuple[str, ...]          # what run() reads from unresolved besides id, published_at, lang

    def run(self, ctx: StageContext, unresolved: "DataFrame") -> StageResult: ...


class ExactKeyStage:
    """A stage that groups documents by one exact key column (stages 1 and 2)."""

    name: str
    key: str

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.key,)

    def run(self, ctx: StageContext, unresolved: "DataFrame") -> StageResult:
        from ..clustering import exact_groups

        return StageResult(exact_groups(unresolved, self.key, self.name))
