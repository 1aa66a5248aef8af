"""The four stages of the cascade, one module or package each, behind one small shape (base.py).

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
without starting a JVM; `build` imports the stage modules when a run needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# The contract every stage module imports (base.py imports none of them).
from .base import STAGE_NAMES, ExactKeyStage, LiveLookup, Stage, StageContext, StageResult

if TYPE_CHECKING:
    from ..config import Config

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


def lookups(conf: "Config") -> list[LiveLookup]:
    """The live lookups of the stages that run, in cascade order (what `newsdedup check` runs)."""
    return [stage.lookup(conf) for stage in build(conf)]


__all__ = ["STAGE_NAMES", "ExactKeyStage", "LiveLookup", "Stage", "StageContext", "StageResult", "build",
           "lookups"]
