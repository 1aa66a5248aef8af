"""What every stage is: the context it runs in, the result it returns, the shape it has.

See the package docstring (stages/__init__.py) for the contract. This module
imports nothing of the stages, so every stage module can import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from hashlib import blake2b
from typing import TYPE_CHECKING, Any, Protocol, Sequence

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
    # Stage 3's verification features as prepare computed them (id, shingles, nums, names) for this
    # run's documents with simhash_w; verify_complete: they cover every archive document with
    # simhash_w (a first run), so no stage needs to derive them from the text.
    verify: "DataFrame | None" = None
    verify_complete: bool = False


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

    def lookup(self, conf: "Config") -> "LiveLookup": ...     # the same rule, one article at a time


# ---------------------------------------------------------------- the live lookup

# Cascade order, cheapest first: the values of duplicate_links.stage.
STAGE_NAMES = ("url", "content", "simhash", "semantic")
# Where an unknown date sorts: after every real one (clustering.order_key says the same in Spark).
FAR_FUTURE = datetime(9999, 12, 31)


def order_of(published_at: datetime | None, doc_id: int) -> tuple:
    """The canonical order of one document (earliest published_at, unknown last, then lowest id),
    as clustering.order_key orders rows in Spark. Naive UTC, so stored and incoming dates compare."""
    if published_at is None:
        return (FAR_FUTURE, int(doc_id))
    if published_at.tzinfo is not None:
        published_at = published_at.astimezone(timezone.utc).replace(tzinfo=None)
    return (published_at, int(doc_id))


@dataclass
class Probe:
    """One article being looked up: prepare's columns for it (`keys`, the batch job's values), its
    canonical order, and what each lookup computed for it on the way (`extra`, by stage name)."""

    keys: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> int:
        return int(self.keys["id"])

    @property
    def order(self) -> tuple:
        return order_of(self.keys.get("published_at"), self.id)


@dataclass(frozen=True)
class LiveHit:
    """A probe's verdict at one stage: the canonical the batch would link it to, and the score."""

    canonical_id: int
    score: float


@dataclass(frozen=True)
class Stored:
    """A stored document a lookup found, with its active link (if any) as Postgres holds it."""

    id: int
    order: tuple
    link_stage: str | None = None
    link_canonical: int | None = None
    link_canonical_order: tuple | None = None


def canonical_at(stage: str, doc: Stored) -> tuple[int, tuple] | None:
    """(canonical id, its order) that a stored document stands for at `stage`, as the batch sees it.

    A document an earlier stage suppressed never reaches `stage` (None); one linked at `stage`
    itself stands for its canonical; any other reaches `stage` as its own canonical.
    """
    here = STAGE_NAMES.index(stage)
    rank = STAGE_NAMES.index(doc.link_stage) if doc.link_stage in STAGE_NAMES else len(STAGE_NAMES)
    if rank < here:
        return None
    if rank == here and doc.link_canonical is not None:
        return doc.link_canonical, doc.link_canonical_order or order_of(None, doc.link_canonical)
    return doc.id, doc.order


# SQL for a stored document `d`: its active link and its canonical's date (the columns `stored_of` takes).
# A lateral subquery per found document, fenced by OFFSET 0 so that the planner cannot fold it into
# a join of the whole links table: planned as a join, a links table whose statistics were taken
# while it was empty (a fresh database that check --insert then fills) got a nested loop over every
# active link for each found document (measured at 1M documents with 1,279 links: 54 ms for one bulk
# round's URL lookup, 327,314 rows filtered, instead of 0.5 ms). Fenced, each document costs one
# index probe of its duplicate_id, whatever the statistics say. The rows are the join's: at most
# one active link per duplicate (duplicate_links_one_active), and OFFSET 0 changes no result.
ACTIVE_LINK_COLUMNS = "l.stage, l.canonical_id, l.canonical_published_at"
ACTIVE_LINK_JOINS = ("LEFT JOIN LATERAL (SELECT l.stage, l.canonical_id, c.published_at AS canonical_published_at "
                     "FROM duplicate_links l LEFT JOIN documents c ON c.id = l.canonical_id "
                     "WHERE l.duplicate_id = d.id AND l.reverted_at IS NULL AND l.superseded_at IS NULL "
                     "OFFSET 0) l ON true")


def stored_of(doc_id: int, published_at: datetime | None, link_stage: str | None, link_canonical: int | None,
              canonical_published_at: datetime | None) -> Stored:
    return Stored(int(doc_id), order_of(published_at, doc_id), link_stage, link_canonical,
                  order_of(canonical_published_at, link_canonical) if link_canonical is not None else None)


def claim_key(tag: str, value: Any) -> int:
    """A signed 64-bit claim key (ops/check.py) for one value a lookup matches on, salted by tag so
    that the keys of different stages do not meet. Two equal (tag, value) give the same key in every
    process; an unequal pair sharing a key (2^-64) only makes two writers wait for each other."""
    digest = blake2b(f"{tag}\0{value}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


class LiveLookup(Protocol):
    """A stage's live lookup: what its batch step would link each probe to, given Postgres and the
    articles checked before it in the same batch.

    `find` gets the probes that reached this stage, in input order, and returns a hit for those it
    links. `memory()` is the state of one batch: the probes that reached the stage earlier, with
    their canonical at this stage; `find` adds each probe it sees to it. `stored_columns` are the
    stage's Postgres columns for a probe (written by --insert).

    `claim_keys` gives, per probe, 64-bit keys such that whenever this lookup could find a stored
    document D for a probe P, P and D (looked up as a probe) share at least one key. `check --insert`
    claims them before looking up (ops/check.py): two writers whose articles could match each other
    then never look up at the same time, so neither misses the other's uncommitted row."""

    name: str

    def memory(self) -> Any: ...

    def find(self, conn, probes: Sequence[Probe], memory: Any) -> dict[int, LiveHit]: ...

    def stored_columns(self, probes: Sequence[Probe]) -> list[dict[str, Any]]: ...

    def claim_keys(self, probes: Sequence[Probe]) -> list[list[int]]: ...


class MergeableLookup(LiveLookup, Protocol):
    """A lookup whose memory can be built in pieces (`check --workers`, ops/check_workers.py): each
    worker answers a round from an empty memory, and the rounds' memories are joined in input order.

    `memory_meets(memory, later, ids)`: whether `find`, answering the round whose probes (ids) left
    `later`, with `memory` (earlier rounds') in front of them, could have answered one of them
    differently: False only when each answer, and what the round leaves in the memory, would be
    the same. It may say True when they would be (the round is then answered again, at some cost,
    never wrongly).
    `merge_memory(memory, later)` adds a later round's memory to an earlier one, leaving what the
    same rounds run one after the other in one memory would have left; `later` is spent (its parts
    may become memory's)."""

    def memory_meets(self, memory: Any, later: Any, ids: set[int]) -> bool: ...

    def merge_memory(self, memory: Any, later: Any) -> None: ...


class ExactKeyLookup:
    """The live lookup of an exact-key stage: stored documents and earlier probes with the same key.

    The canonical is the earliest document the key's group holds at this stage (earlier
    stages' duplicates left out, this stage's duplicates standing for their canonical): the
    batch's exact_groups rule. Score 1.0."""

    def __init__(self, name: str, key: str):
        self.name, self.key = name, key
        self.sql = (f"SELECT d.{key}, d.id, d.published_at, {ACTIVE_LINK_COLUMNS} FROM documents d "
                    f"{ACTIVE_LINK_JOINS} WHERE d.{key} = ANY(%(keys)s)")

    def memory(self) -> dict[str, tuple[int, tuple]]:
        return {}       # key -> (canonical id, order) among the batch's earlier probes

    def find(self, conn, probes: Sequence[Probe], memory: dict) -> dict[int, LiveHit]:
        keys = sorted({p.keys[self.key] for p in probes if p.keys.get(self.key)})
        stored: dict[str, list[tuple[int, tuple]]] = {}
        if keys:
            for key, *row in conn.execute(self.sql, {"keys": keys}):
                found = canonical_at(self.name, stored_of(*row))
                if found is not None:
                    stored.setdefault(key, []).append(found)
        hits: dict[int, LiveHit] = {}
        for p in probes:
            key = p.keys.get(self.key)
            if not key:
                continue
            options = [c for c in (*stored.get(key, ()), memory.get(key)) if c is not None and c[0] != p.id]
            best = min(options, key=lambda c: c[1]) if options else None
            if best is not None:
                hits[p.id] = LiveHit(best[0], 1.0)
            mine = best if best is not None else (p.id, p.order)
            if key not in memory or mine[1] < memory[key][1]:
                memory[key] = mine
        return hits

    def stored_columns(self, probes: Sequence[Probe]) -> list[dict[str, Any]]:
        return [{} for _ in probes]     # the key column is among prepare's columns already

    def claim_keys(self, probes: Sequence[Probe]) -> list[list[int]]:
        # A match is an equal key: the key itself is the claim.
        return [[claim_key(self.name, k)] if (k := p.keys.get(self.key)) else [] for p in probes]

    def memory_meets(self, memory: dict, later: dict, ids: set[int]) -> bool:
        """find reads memory[key] of its probes' keys only, and a probe links to the earliest of the
        stored documents and the remembered canonical of its key. Where the round's canonical for a
        shared key is a stored document (every probe of the round with that key then links to it)
        and the remembered one is later, nothing changes; where it is one of the round's probes
        (the first probe with the key found no stored document), the remembered one would become
        its canonical."""
        for key in memory.keys() & later.keys():
            (was, was_order), (now, now_order) = memory[key], later[key]
            if now in ids or was in ids or was_order < now_order:
                return True
        return False

    def merge_memory(self, memory: dict, later: dict) -> None:
        for key, found in later.items():     # find's own rule: the earliest canonical holds the key
            if key not in memory or found[1] < memory[key][1]:
                memory[key] = found


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

    def lookup(self, conf: "Config") -> ExactKeyLookup:
        return ExactKeyLookup(self.name, self.key)
