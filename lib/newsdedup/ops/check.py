"""Live lookups: is each incoming article a duplicate of what Postgres holds, and of what?

`Checker` runs the stages' own live lookups (stages.lookups: each stage's `lookup()`, the
batch step's key functions, candidate rule, verification, canonical rule and score scale)
in cascade order, as the batch job does: an article an earlier stage links takes no part in
later ones. Nothing about any stage lives here: this module prepares each article's keys
with prepare.Preparer (the batch's per-row functions), hands the probes to the lookups, and
writes what --insert asks for.

Articles go in batches (`check_many`, or `check_batch` over any iterable, `batch_size` at a
time): each lookup answers a whole batch in one or two round trips. Within a batch, articles
see the ones before them (each lookup's memory), so two copies in one batch link to each other
with or without --insert; production runs without autoflush, so nothing relies on reading back
a batch's own inserts. Without --insert, the memory lasts the whole call. With --insert, each
batch is one transaction: its articles' document rows (every lookup's columns included) and
links go in under a savepoint each with ON CONFLICT DO NOTHING, so a unique violation undoes
that article only, and the batch commits before its verdicts are handed out; later batches
find it in Postgres (their memory starts empty).

Read-only calls may spread their batches over worker processes (`workers`, check --workers):
ops/check_workers.py says how the verdicts stay those of one process, memory included.

Concurrent writers. Several `check --insert` clients (processes, threads, each with its own
Checker) may send overlapping articles at once. A lookup reads committed rows only, so without a
guard two writers could each miss the other's uncommitted row: two copies of one story at
different ids would both be stored as originals with no link between them, and two ids with
one URL would lose the second document to the url_hash unique index. That is a missing link:
one client sending the same articles in any order would have linked them. The guarantee is
therefore serialisability per key: after the clients finish, documents and links are what one
client would have written running the same batches one after another, in the order they
committed. It holds by claiming keys, two-phase:

- Each lookup names the keys it matches on (LiveLookup.claim_keys): the URL and content
  hashes, stage 3's bucket codes (one per Manku table and MinHash band), stage 4's time slots
  (stages/semantic/live.py); check adds the article id. Any two articles one of them could
  find as the other's match share a key.
- Before its lookups, a batch inserts all of its keys, sorted, into check_claims (one row
  per key, primary key) with ON CONFLICT DO NOTHING. A key another open transaction claimed
  makes the insert wait on the unique index until that transaction ends; the claims are
  deleted just before commit, so they never outlive it. Once the insert returns, every
  earlier writer of a shared key has committed, and no later one can write one until this
  batch commits: the batch looks up and inserts as if alone on its keys.
- Batches with no key in common run side by side. Claims are row locks, not advisory locks:
  a batch of 256 articles holds ~10,000 keys (38 per article with stage 3's 35 codes), and
  16 writers taking that many advisory locks ran the default lock table out of shared
  memory (max_locks_per_transaction 64 x 100 connections); rows have no such limit.
- Claims are taken in ascending order, so two batches cannot deadlock on them; the waits
  after the claims (the documents and links unique indexes, foreign keys) only meet rows
  of keys already claimed. A deadlock with another writer (a load, a revert, someone's
  SQL) or a serialisation failure (a server whose default isolation is SERIALIZABLE) rolls
  the batch back, and it is retried from its claims after a jittered, doubling backoff,
  `max_attempts` times in all. When they are spent, each article is answered from a lookup
  without insert and its verdict says why it was not stored (`error`); nothing is lost
  silently. `Checker.stats` counts batches, retries, deadlocks and give-ups.

What the claims do not cover: stage 4 serialises all writers within a window of each other
(time slots are coarse); the same article sent twice, the second time after the first
committed, is answered again (its verdict computed against what is now stored) and reported
"already stored"; writers that bypass check (loads, incremental runs) are not claimants.

A live lookup never rewrites what is stored: an article older than the canonical it
reaches still links to it, and the next incremental run (incremental.py) puts the earliest
document first again.
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from itertools import chain, islice
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, Iterator, Mapping, Sequence
from zoneinfo import ZoneInfo

import psycopg

from .. import config, stages
from ..errors import UserError
from ..io import pg, pg_documents
from ..prepare import Preparer
from ..stages.base import LiveHit, Probe, claim_key

if TYPE_CHECKING:
    from ..config import Config

INSERT_DOC_SQL = ("INSERT INTO documents ({cols}) VALUES ({vals}) ON CONFLICT DO NOTHING RETURNING id"
                  .format(cols=", ".join(pg_documents.COLUMNS),
                          vals=", ".join(f"%({c})s" for c in pg_documents.COLUMNS)))
INSERT_LINK_SQL = ("INSERT INTO duplicate_links (duplicate_id, canonical_id, stage, score, linked_at, run_id) "
                   "VALUES (%s, %s, %s, %s, now(), %s) ON CONFLICT DO NOTHING")
TEXT_FIELDS = ("url", "title", "body", "html", "source", "lang")
BATCH_SIZE = 256
# The claims of one batch (see the module docstring): sorted, so that two writers take shared keys in one order.
CLAIM_SQL = (f"INSERT INTO {pg_documents.CLAIMS_TABLE} (key) SELECT k FROM unnest(%(keys)s::bigint[]) AS k "
             "ORDER BY k ON CONFLICT DO NOTHING")
RELEASE_SQL = f"DELETE FROM {pg_documents.CLAIMS_TABLE} WHERE key = ANY(%(keys)s::bigint[])"
# What rolls a batch back and is worth retrying: Postgres aborted it to break a lock cycle, or found
# it could not be serialised; the same batch run again normally goes through.
RETRYABLE = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
MAX_ATTEMPTS = 6
BACKOFF_S = 0.05          # first wait; doubled each retry (with jitter), at most BACKOFF_MAX_S
BACKOFF_MAX_S = 2.0
# The interpreter's switch interval `newsdedup check` runs under (see Checker._with_probes).
SWITCH_INTERVAL_S = 0.0005


@dataclass
class CheckStats:
    """What one Checker's batches went through (`Checker.stats`): inserting ones, and with workers the rounds."""

    batches: int = 0                   # batches committed or given up
    retries: int = 0                   # batches run again after a rollback below
    deadlocks: int = 0                 # 40P01 caught
    serialization_failures: int = 0    # 40001 caught
    gave_up: int = 0                   # batches answered without insert after max_attempts
    claim_s: float = 0.0               # time in the claims statement (waiting for other writers included)
    # check --workers (read-only): rounds whose worker's verdicts stood, and rounds answered again in
    # this process because they read what an earlier round left in the memory (ops/check_workers.py).
    rounds_by_workers: int = 0
    rounds_answered_here: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "claim_s": round(self.claim_s, 3)}


@dataclass(frozen=True)
class Verdict:
    id: int
    canonical_id: int | None = None
    stage: str | None = None
    score: float | None = None
    error: str | None = None      # why an --insert did not happen (the lookup itself still stands)

    def json(self) -> str:
        out = {k: v for k, v in asdict(self).items() if k != "error" or v is not None}
        return json.dumps(out, ensure_ascii=False)


def parse_time(value: Any, naive_tz: str) -> datetime | None:
    """An ISO-8601 string or datetime as an aware datetime; naive values are in naive_tz."""
    if value is None or value == "":
        return None
    ts = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return ts if ts.tzinfo else ts.replace(tzinfo=ZoneInfo(naive_tz))


def article_id_of(value: Any) -> int:
    """An article's id as the batch job reads one (io.input.conform): an integer in int64's range,
    its digits in a string (blanks and a sign allowed), or a whole number; a UserError otherwise
    (int() would take True as 1 and 2.5 as 2: another article's id)."""
    n: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text[:1] in "+-" else text
        n = int(text) if digits.isascii() and digits.isdigit() else None
    if n is None or not -(2**63) <= n < 2**63:
        raise UserError(f"article id {value!r} is not an integer (-2**63 to 2**63-1, or its digits as a string)")
    return n


def _text_bytes(article_id: int, name: str, value: Any) -> bytes | None:
    """A text field as prepare's raw bytes. Lone surrogates (a JSON escape such as "\\ud800" decodes
    to one) are kept as the bytes they stand for, which are not UTF-8: prepare repairs and flags
    them (invalid_utf8:<field>) as it does in the batch job. Numbers and booleans are their JSON
    text (the batch job reads such a column as its text); objects and arrays are refused."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, (int, float, bool)):
        return json.dumps(value).encode("ascii")
    kind = "object" if isinstance(value, Mapping) else "array"
    raise UserError(f"article {article_id}: {name} is a JSON {kind}; expected a string")


class Checker:
    """The live cascade against one Postgres database."""

    def __init__(self, conf: "Config", dsn: str, *, insert: bool = False, run_id: str | None = None,
                 batch_size: int = BATCH_SIZE, max_attempts: int = MAX_ATTEMPTS, workers: int = 1):
        self.conf, self.dsn, self.insert = conf, dsn, insert
        self.batch_size = max(1, int(batch_size))
        self.max_attempts = max(1, int(max_attempts))
        self.workers = _workers(workers, insert, conf)
        self.stats = CheckStats()
        self.run_id = run_id or "check-" + datetime.now().strftime("%Y%m%dT%H%M%S")
        self._conn: psycopg.Connection | None = None
        self._pool: Any = None                  # check --workers: started by the first call that needs it
        self._keys_pool: Any = None             # the next round's keys (_with_probes): started likewise
        self.worker_pids: dict[int, int] = {}   # worker pid -> its server backend's pid (benchmarks read them)
        self._check_database()     # before a model is loaded: a refusal comes in a second
        self.preparer = Preparer(conf)
        self.lookups = stages.lookups(conf)

    def _check_database(self) -> None:
        """The tables exist with every column check uses, and the role may do what was asked.

        Only a database without them (empty, or loaded by an older version) gets DDL: a role that may
        only read must be able to run check against a loaded database, so nothing is created or
        altered when nothing is missing."""
        with pg.connect(self.dsn, autocommit=True) as conn:
            missing = pg_documents.missing_columns(
                conn, pg_documents.CHECK_COLUMNS + (pg_documents.INSERT_COLUMNS if self.insert else ()))
            if missing:
                try:
                    pg_documents.ensure_schema(self.dsn)
                except psycopg.errors.InsufficientPrivilege as exc:
                    raise pg.PostgresUnavailable(
                        f"Postgres ({pg.redact(self.dsn)}) lacks {', '.join(missing[:3])}"
                        f"{f' and {len(missing) - 3} more columns' if len(missing) > 3 else ''}, and role "
                        f"{self._role(conn)} may not create them ({exc.diag.message_primary}): run `newsdedup load` "
                        "(or `run`) with the loader role first (docs/postgres-roles.md)") from None
            wanted = [(t, "SELECT") for t in self.TABLES] + [(t, "INSERT") for t in self.TABLES if self.insert]
            if self.insert:      # the claims: inserted, then deleted by key (which reads them)
                wanted += [(pg_documents.CLAIMS_TABLE, p) for p in ("SELECT", "INSERT", "DELETE")]
            denied = pg_documents.denied_privileges(conn, wanted)
            if denied:
                raise pg.PostgresUnavailable(
                    f"Postgres ({pg.redact(self.dsn)}): role {self._role(conn)} lacks {', '.join(denied)}; "
                    f"check{' --insert' if self.insert else ''} needs "
                    f"{' and '.join(sorted({p for t, p in wanted if t in self.TABLES}, reverse=True))} on "
                    f"{' and '.join(self.TABLES)}"
                    f"{f' and SELECT, INSERT and DELETE on {pg_documents.CLAIMS_TABLE}' if self.insert else ''} "
                    "(docs/postgres-roles.md)")
            # Stored stage-3 columns that other settings made would meet this configuration's probes:
            # other bucket codes and shingle sets, so not the batch's answers. Rows without a tag (loaded
            # before it existed) cannot tell, and are taken as they are.
            mine = config.settings_digest(self.conf)
            other = conn.execute("SELECT stage3_settings FROM documents WHERE stage3_settings <> %s LIMIT 1",
                                 (mine,)).fetchone()
            if other:
                raise UserError(
                    f"Postgres ({pg.redact(self.dsn)}) holds documents whose stage-3 columns other settings made "
                    f"(stage3_settings {other[0]}, this configuration's {mine}): check would not give the batch's "
                    "answers; check with the configuration the archive was loaded with, or load it again with this "
                    "one (docs/operations.md, \"Settings across slices\")")

    TABLES = ("documents", "duplicate_links")

    @staticmethod
    def _role(conn) -> str:
        return repr(conn.execute("SELECT current_user").fetchone()[0])

    def _input_row(self, article: Mapping[str, Any]) -> dict[str, Any]:
        """An article as prepare's input row; a UserError when it is not one."""
        if not isinstance(article, Mapping) or article.get("id") is None:
            raise UserError(f"article without an id: {json.dumps(article, default=str)[:200]}")
        article_id = article_id_of(article["id"])
        row: dict[str, Any] = {c: _text_bytes(article_id, c, article.get(c)) for c in TEXT_FIELDS}
        try:
            row["published_at"] = parse_time(article.get("published_at"), self.conf.input.naive_timezone)
        except ValueError:
            row["published_at"], row["raw_published_at"] = None, article.get("published_at")
        row["id"] = article_id
        return row

    def keys(self, article: Mapping[str, Any]) -> dict[str, Any]:
        """Every stage's keys for one article (the same functions as the batch job)."""
        return self.preparer.rows([self._input_row(article)])[0]

    def _verdicts(self, conn, probes: Sequence[Probe], memories: list) -> list[Verdict]:
        """Each lookup in cascade order over the probes no earlier one linked."""
        found: dict[int, tuple[str, LiveHit]] = {}
        for lookup, memory in zip(self.lookups, memories):
            left = [p for p in probes if p.id not in found]
            if not left:
                break
            for pid, hit in lookup.find(conn, left, memory).items():
                found[pid] = (lookup.name, hit)
        return [Verdict(p.id, found[p.id][1].canonical_id, found[p.id][0], found[p.id][1].score)
                if p.id in found else Verdict(p.id) for p in probes]

    def _insert(self, conn, probes: Sequence[Probe], verdicts: list[Verdict],
                columns: list[list[dict[str, Any]]]) -> list[Verdict]:
        out = []
        for i, (p, verdict) in enumerate(zip(probes, verdicts)):
            row = {c: pg.pg_text(p.keys.get(c)) for c in pg_documents.COLUMNS}
            for per_stage in columns:
                row.update(per_stage[i])
            # Only the URL group's first document holds url_hash (see pg_documents).
            row.update(run_id=self.run_id, url_hash=None if verdict.stage == "url" else p.keys["url_hash"])
            try:
                with conn.transaction():     # a savepoint: a failure undoes this article only
                    inserted = conn.execute(INSERT_DOC_SQL, row).fetchone()
                    if inserted is not None and verdict.canonical_id is not None:
                        conn.execute(INSERT_LINK_SQL, (verdict.id, verdict.canonical_id, verdict.stage,
                                                       verdict.score, self.run_id))
            except psycopg.errors.IntegrityError as exc:
                verdict = Verdict(**{**asdict(verdict), "error": f"not inserted: {exc.diag.message_primary}"})
            else:
                if inserted is None:
                    verdict = Verdict(**{**asdict(verdict), "error": "not inserted: id or url_hash already stored"})
            out.append(verdict)
        return out

    def claim_keys(self, probes: Sequence[Probe]) -> list[int]:
        """The batch's claims, sorted and distinct: each article's id and every lookup's keys."""
        keys = {claim_key("id", p.id) for p in probes}
        for lookup in self.lookups:
            for per_probe in lookup.claim_keys(probes):
                keys.update(per_probe)
        return sorted(keys)

    def _stored_batch(self, conn, probes: Sequence[Probe]) -> list[Verdict]:
        """One batch looked up and inserted in a transaction of its own, under its claims; retried
        after a deadlock or serialisation failure, answered without insert when attempts run out."""
        # The costly per-article work (features, vectors) is done before claiming: claims are held
        # from here to commit and every writer sharing a key waits that long.
        columns = [lookup.stored_columns(probes) for lookup in self.lookups]
        keys = pg.bigint_array(self.claim_keys(probes))
        failure = ""
        for attempt in range(1, self.max_attempts + 1):
            if attempt > 1:
                self.stats.retries += 1
                wait = min(BACKOFF_MAX_S, BACKOFF_S * 2 ** (attempt - 2))
                time.sleep(wait * random.uniform(0.5, 1.5))   # jitter: the writers that collided part ways
            try:
                with conn.transaction():
                    t = time.perf_counter()
                    conn.execute(CLAIM_SQL, {"keys": keys})
                    self.stats.claim_s += time.perf_counter() - t
                    # A fresh memory: the batches before this one are committed, the lookups find them.
                    memories = [lookup.memory() for lookup in self.lookups]
                    verdicts = self._insert(conn, probes, self._verdicts(conn, probes, memories), columns)
                    conn.execute(RELEASE_SQL, {"keys": keys})
            except psycopg.errors.DeadlockDetected:
                self.stats.deadlocks += 1
                failure = "deadlock detected"
            except psycopg.errors.SerializationFailure:
                self.stats.serialization_failures += 1
                failure = "could not serialize access"
            else:
                self.stats.batches += 1
                return verdicts
        self.stats.batches += 1
        self.stats.gave_up += 1
        why = f"not inserted: {failure} on each of {self.max_attempts} attempts; send it again"
        return self._unstored(conn, probes, why)

    def _unstored(self, conn, probes: Sequence[Probe], why: str) -> list[Verdict]:
        """The batch's verdicts from a lookup alone, each saying why nothing of it was stored."""
        memories = [lookup.memory() for lookup in self.lookups]
        return [Verdict(**{**asdict(v), "error": why}) for v in self._verdicts(conn, probes, memories)]

    def _rounds(self, articles: Iterable[Mapping[str, Any]]) -> Iterator[tuple[list[dict[str, Any]], UserError | None, bool]]:
        """The input, batch_size articles at a time, as (prepare's input rows, the bad line that cut
        the round short or None, whether the input ends with this round)."""
        it = iter(articles)
        while True:
            chunk, failure = [], None
            try:
                chunk.extend(islice(it, self.batch_size))
            except UserError as exc:   # a bad input line: the articles before it are still answered
                failure = exc
            rows = []
            for article in chunk:
                try:
                    rows.append(self._input_row(article))
                except UserError as exc:   # not an article: the same, from this one on
                    failure = exc
                    break
            ended = failure is not None or len(chunk) < self.batch_size
            yield rows, failure, ended
            if ended:
                return

    def check_batch(self, articles: Iterable[Mapping[str, Any]]) -> Iterator[Verdict]:
        """Verdicts in input order, `batch_size` articles per round of lookups; with insert, each
        batch commits before its verdicts are yielded. With workers > 1 (read-only), the rounds
        are spread over that many processes, and the verdicts are the same."""
        if self.workers > 1 and not self.insert:     # (__init__ refuses both at once)
            return self._check_spread(articles)
        return self._check_here(self._rounds(articles))

    def _check_here(self, rounds: Iterable[tuple[list[dict[str, Any]], UserError | None, bool]]) -> Iterator[Verdict]:
        """check_batch in this process, on this Checker's connection, over _rounds' rounds."""
        memories = [lookup.memory() for lookup in self.lookups]   # without insert: the call's memory
        conn = self._connection()
        for probes, failure in self._with_probes(rounds):
            if probes:
                if not self.insert:
                    yield from self._verdicts(conn, probes, memories)
                elif failure is None:
                    yield from self._stored_batch(conn, probes)
                else:       # the batch a bad line cut short is answered, not stored: the call stops here
                    yield from self._unstored(conn, probes, "not inserted: the input stopped at a bad line after it")
            if failure is not None:
                raise failure

    def _probes(self, rows: list[dict[str, Any]]) -> list[Probe]:
        """The lookups' probes of prepare's input rows (every stage's keys, the batch's functions)."""
        return [Probe(keys) for keys in self.preparer.rows(rows)] if rows else []

    def _with_probes(self, rounds: Iterable[tuple[list[dict[str, Any]], UserError | None, bool]]
                     ) -> Iterator[tuple[list[Probe], UserError | None]]:
        """_rounds' rounds as (probes, the bad line that cut the round short or None).

        While the caller looks one round up, the next round's keys are computed in a helper thread:
        a round's lookups wait on Postgres for about 40% of their time (docs/benchmarks_check.md),
        and the keys depend on the article alone, so that wait and the next keys overlap (psycopg
        releases the GIL while it waits). The input is read one round ahead of the verdicts handed
        out; a single round (`check`) takes no thread. The thread that waited gets the GIL back
        after the interpreter's switch interval at most: `newsdedup check` sets SWITCH_INTERVAL_S, a
        caller of the Python API may do the same (sys.setswitchinterval)."""
        it = iter(rounds)
        rows, failure, ended = next(it)
        if ended:
            yield self._probes(rows), failure
            return
        ahead = self._keys_thread()
        pending = ahead.submit(self._probes, rows), failure
        while not ended:
            rows, failure, ended = next(it)
            following = ahead.submit(self._probes, rows), failure
            yield pending[0].result(), pending[1]
            pending = following
        yield pending[0].result(), pending[1]

    def _keys_thread(self):
        """The helper thread of _with_probes, started once per Checker (closed by close())."""
        if self._keys_pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._keys_pool = ThreadPoolExecutor(1, thread_name_prefix="newsdedup-check-keys")
        return self._keys_pool

    def _check_spread(self, articles: Iterable[Mapping[str, Any]]) -> Iterator[Verdict]:
        """check_batch over the worker processes (ops/check_workers.py says how the verdicts stay
        one process's). Up to two rounds per worker are in flight, so that a worker finds its next
        round waiting while this process hands out the last one's verdicts; the input is read no
        further ahead than that."""
        from concurrent.futures.process import BrokenProcessPool

        rounds = self._rounds(articles)
        head = [next(rounds)]
        if not head[0][2]:
            head.append(next(rounds))
        if head[0][2] or (head[1][2] and not head[1][0]):    # one round of articles at most: no worker is worth starting
            yield from self._check_here(head)
            return
        try:
            yield from self._spread(chain(head, rounds))
        except BrokenProcessPool:
            # A worker was killed (the OOM killer, an operator): the pool cannot be used again, and the
            # rounds it held are lost. The verdicts printed so far stand; this call stops here.
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            raise UserError("a check worker process ended abruptly (killed, or out of memory?); the verdicts "
                            "before this line stand: send the rest again, or run with --workers 1") from None

    def _spread(self, pending: Iterator[tuple[list[dict[str, Any]], UserError | None, bool]]) -> Iterator[Verdict]:
        """_check_spread's rounds (as _rounds gives them) through the workers, verdicts in input order."""
        from collections import deque

        from . import check_workers

        pool = self._worker_pool()
        memories = [lookup.memory() for lookup in self.lookups]   # every earlier round's, merged in order
        ids: set[int] = set()          # every earlier round's article ids
        in_flight: deque = deque()
        reading = True
        while True:
            while reading and len(in_flight) < 2 * self.workers:
                rows, failure, ended = next(pending)
                in_flight.append((rows, failure, pool.submit(check_workers.lookup, rows) if rows else None))
                reading = not ended
            if not in_flight:
                return
            rows, failure, future = in_flight.popleft()
            if future is not None:
                answered, theirs, round_ids, chosen, (pid, backend) = future.result()
                self.worker_pids[pid] = backend
                round_ids = set(round_ids)
                if (not ids.isdisjoint(round_ids) or not ids.isdisjoint(chosen)
                        or any(lookup.memory_meets(mine, later, round_ids)
                               for lookup, mine, later in zip(self.lookups, memories, theirs))):
                    # The round would have read what an earlier one left in the memory: answered here
                    # from all of it (which find adds this round to).
                    probes = self._probes(rows)
                    self.stats.rounds_answered_here += 1
                    yield from self._verdicts(self._connection(), probes, memories)
                else:
                    for lookup, mine, later in zip(self.lookups, memories, theirs):
                        lookup.merge_memory(mine, later)
                    self.stats.rounds_by_workers += 1
                    yield from (Verdict(*v) for v in answered)
                ids.update(round_ids)
            if failure is not None:
                raise failure

    def _worker_pool(self):
        """The worker processes, started once per Checker and kept for its later calls (closed by close())."""
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            from . import check_workers

            # spawn, not fork: a forked child would share this process's Postgres connection (check_workers).
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=check_workers.start,
                                             initargs=(Checker, self.conf, self.dsn, self.batch_size))
        return self._pool

    def _connection(self) -> psycopg.Connection:
        """One connection per Checker, opened on first use and kept: a single lookup must not
        pay for a connection (several ms) each time."""
        if self._conn is None or self._conn.closed:
            self._conn = pg.connect(self.dsn, autocommit=True)   # each inserting batch is its own transaction
            # psycopg prepares a statement run five times; Postgres may then settle on a generic plan,
            # and a generic plan of stage 3's array-slice overlap cannot use the GIN index (measured at
            # 1M documents: 240 lookups/s fell to 6/s). Plans stay built for the actual parameters.
            self._conn.execute("SET plan_cache_mode = force_custom_plan")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._keys_pool is not None:
            self._keys_pool.shutdown(wait=True, cancel_futures=True)
            self._keys_pool = None

    def __enter__(self) -> "Checker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def check_many(self, articles: Iterable[Mapping[str, Any]]) -> list[Verdict]:
        """The Python API's bulk form: every article's verdict, in input order."""
        return list(self.check_batch(articles))

    def check(self, article: Mapping[str, Any]) -> Verdict:
        """One article, in this process whatever `workers` says: a single lookup pays no hand-off."""
        return list(self._check_here(self._rounds([article])))[0]


def _workers(workers: int, insert: bool, conf: "Config") -> int:
    """The number of worker processes a Checker may use, or a UserError saying why not."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UserError(f"--workers must be a whole number of processes, 1 or more (got {workers!r})")
    if workers > 1 and insert:
        # Each inserting batch is one transaction under its claims, and a batch's lookups must find the
        # batches before it committed; batches of one call spread over processes would commit in any order.
        raise UserError("--workers > 1 is for read-only lookups: check --insert runs with --workers 1 "
                        "(several check --insert clients may run side by side)")
    if workers > 1 and conf.semantic.enabled:
        raise UserError("--workers > 1 needs stage 4 off (semantic.enabled: false): stage 4's memory spans its "
                        "time window, so each round would wait for the one before it")
    return workers


@dataclass(frozen=True)
class Refusal:
    """An input line that was not read as an article: longer than input.max_line_bytes."""

    line: int
    size: int                   # bytes, without the line break
    limit: int
    id: int | None = None       # when the line starts with {"id": N

    def json(self) -> str:
        out = {"line": self.line, **({"id": self.id} if self.id is not None else {}),
               "refused": f"line of {self.size} bytes is longer than input.max_line_bytes={self.limit}"}
        return json.dumps(out)


_LEADING_ID = re.compile(rb'\s*\{\s*"id"\s*:\s*(-?\d{1,19})\s*[,}]')


def _lines(fh: BinaryIO, limit: int) -> Iterator[tuple[int, bytes | None, int, bytes]]:
    """(line number, the line or None when longer than limit bytes, its size, its first bytes), reading
    at most limit + 1 bytes of any line at a time: a line of gigabytes costs no memory."""
    n = 0
    while chunk := fh.readline(limit + 1):
        n += 1
        if chunk.endswith(b"\n") or len(chunk) <= limit:
            yield n, chunk, len(chunk.rstrip(b"\r\n")), chunk[:64]
            continue
        size = len(chunk)
        while (more := fh.readline(1 << 20)) and not more.endswith(b"\n"):
            size += len(more)
        size += len(more.rstrip(b"\r\n"))
        yield n, None, size, chunk[:64]


def read_jsonl(path: str, max_line_bytes: int | None = None,
               refused: list[Refusal] | None = None) -> Iterator[dict[str, Any]]:
    """The articles of a JSON-lines file. A line longer than max_line_bytes is not parsed: it goes
    to refused (and the others on), so that one oversized article neither stops a stream nor fills
    the memory."""
    limit = max_line_bytes or sys.maxsize - 1
    with open(path, "rb") as fh:
        for n, line, size, head in _lines(fh, limit):
            if line is None:
                m = _LEADING_ID.match(head)
                if refused is not None:
                    refused.append(Refusal(n, size, limit, int(m.group(1)) if m else None))
                continue
            if n == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]   # a UTF-8 byte order mark (Windows tools write one) is no part of the JSON
            if line.strip():
                try:
                    value = json.loads(line.decode("utf-8"))
                except UnicodeDecodeError as exc:
                    raise UserError(f"{path}:{n}: not UTF-8 (byte {exc.start + 1})") from None
                except json.JSONDecodeError as exc:
                    raise UserError(f"{path}:{n}: not a JSON object ({exc.msg})") from None
                if not isinstance(value, dict):
                    raise UserError(f"{path}:{n}: not a JSON object (a JSON {type(value).__name__})")
                yield value


def gave_up_summary(checker: Checker) -> str:
    """One line for the operator when batches were rolled back more often than a Checker retries."""
    st = checker.stats
    return (f"{st.gave_up} batch{'es' * (st.gave_up != 1)} not inserted after {checker.max_attempts} attempts each "
            f"({st.deadlocks} deadlocks, {st.serialization_failures} serialization failures in all): "
            "their lines carry an error; send those articles again")


def refusal_summary(refused: Sequence[Refusal]) -> str:
    """One line for the operator: how many lines were refused, which, and what to do."""
    lines = ", ".join(str(r.line) for r in refused[:10]) + (f" and {len(refused) - 10} more" if len(refused) > 10 else "")
    return (f"{len(refused)} line{'s' * (len(refused) != 1)} refused, longer than input.max_line_bytes="
            f"{refused[0].limit} bytes (line {lines}): shorten those articles or raise input.max_line_bytes")
