"""The four stages of the cascade, one module each, behind one small shape.

A stage is an object with a `name` (the value written to duplicate_links.stage),
the `columns` it reads from the unresolved rows besides id, published_at and
lang, and a `run(ctx, unresolved)` method: it takes the documents earlier
stages could not resolve and returns a `StageResult` with its links
(duplicate_id, canonical_id, stage, score) and everything it wants in the run
report. A stage never writes into the run report itself: what it returns is
what the run state persists for --resume. What it hands on is the cascade's
business: the unresolved documents minus the ones it linked as duplicates.
Stages that need per-document keys also provide a pure per-row function that
`prepare` calls in its single Python pass over the snapshot.

This module imports no Spark so that the command line can list stage names
without starting a JVM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..config import Config

# The values of duplicate_links.stage, in cascade order (cheapest first).
STAGE_NAMES = ("url", "content", "simhash", "semantic")


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


def build(conf: "Config") -> list[Stage]:
    """The stages that run, in order, from the configuration."""
    from .content import ContentStage
    from .simhash import SimhashStage
    from .url import UrlStage

    stages: list[Stage] = [UrlStage(), ContentStage(), SimhashStage()]
    if conf.semantic.enabled:
        from .semantic.step import SemanticStage  # torch & co. load only when stage 4 is on

        stages.append(SemanticStage())
    return stages
