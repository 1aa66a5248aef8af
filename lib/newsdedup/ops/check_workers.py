"""The worker side of `check --workers N` (read-only bulk lookups over several processes).

One process answers a round as fast as its client CPU (keys, features, verification) and its
server's CPU (the index probes) allow, one after the other: each waits while the other works
(docs/benchmarks_check.md). Several worker processes, each with its own Checker, connection and
Preparer, let one round's client work run while another round's queries run on the server.

What makes that more than a split of the input is the lookups' memory: an article answered
without --insert sees every article before it in the call, not only those of its own round
(ops/check.py). A worker answers a round from an empty memory and sends back, with the verdicts,
what that round left in the memory. The parent holds the memory of every round before it, and
asks each lookup whether the round's remembered articles meet it (MergeableLookup.memory_meets:
an equal exact key, a verified stage-3 pair), and whether the round chose as canonical, or
itself holds, the id of an earlier round's article (stage 3 scores by the canonical's features,
read from the memory by id). When nothing meets, the round read nothing an earlier round wrote:
its verdicts are those one process would have given, and its memory is merged in. When something
does (a copy of an article two rounds back, say), the parent answers the round again itself, from
the whole memory, as one process would have.

Workers are started with 'spawn': a forked child would share the parent's Postgres socket (and
any JVM), and the Preparer's numba kernels load from their on-disk cache in each child (~1.5 s
per worker, once per Checker, not per round).
"""

from __future__ import annotations

import gc
import os
from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    from ..config import Config
    from .check import Checker

_checker: "Checker | None" = None
_failure: BaseException | None = None


def start(checker_class: "type[Checker]", conf: "Config", dsn: str, batch_size: int) -> None:
    """Each worker's initializer: its own Checker (read-only) and connection, kept for every round.
    (The class comes as an argument, pickled by name: this module imports nothing of check.py,
    which imports it.)

    A failure here (the server went away, the role lost a right) is kept and raised by the first
    round instead: an initializer that raises leaves the parent a 'process pool is broken' with no
    reason given."""
    global _checker, _failure
    from multiprocessing.util import Finalize

    try:
        _checker = checker_class(conf, dsn, batch_size=batch_size)
        _checker._connection()
        # A pool worker leaves through os._exit, past atexit: closed here, the server logs no lost client.
        Finalize(_checker, _checker.close, exitpriority=10)
        # What start-up built (modules, numba's and pyarrow's objects: most of the heap) lives as long as
        # the worker: kept out of the collector's full passes, which otherwise walk it every few rounds.
        # (This process is ours; the caller's process is left as it is.)
        gc.freeze()
    except BaseException as exc:  # noqa: BLE001 (re-raised by lookup(), in the parent)
        _failure = exc


def lookup(rows: list[dict[str, Any]]) -> tuple:
    """One round of prepare's input rows looked up from an empty memory.

    Returns (verdicts as (id, canonical_id, stage, score) tuples, the round's memories (one per
    lookup), the articles' ids, the canonical ids chosen, (worker pid, backend pid))."""
    if _failure is not None:
        raise _failure
    checker = _checker
    assert checker is not None
    conn = checker._connection()
    probes = checker._probes(rows)
    memories = [lookup.memory() for lookup in checker.lookups]
    verdicts = checker._verdicts(conn, probes, memories)
    return ([(v.id, v.canonical_id, v.stage, v.score) for v in verdicts], memories, [p.id for p in probes],
            [v.canonical_id for v in verdicts if v.canonical_id is not None], (os.getpid(), conn.info.backend_pid))
