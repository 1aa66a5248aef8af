"""Soft revert of duplicate links in Delta and Postgres.

A revert never deletes: it stamps reverted_at and revert_reason on the links
that match (stage, optionally score below a bound, optionally one run).

Delta and Postgres cannot share a transaction, so the order is chosen to make
every failure recoverable by running the same command again:

1. open a Postgres transaction and UPDATE the matching links (not committed);
2. UPDATE the Delta table (one atomic Delta commit);
3. commit Postgres only if the Delta update succeeded.

If step 2 fails, Postgres rolls back and nothing changed anywhere. If the
commit in step 3 fails, Delta is reverted and Postgres is not: a rerun matches
nothing more in Delta but still updates Postgres, and the next `load` also
copies reverted_at from Delta into Postgres (MERGE_LINKS_SQL).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from ..io import pg, store
from ..stages import STAGE_NAMES


@dataclass(frozen=True)
class Selection:
    """Which links a revert (or an undo) touches."""

    stage: str
    below: float | None = None
    run_id: str | None = None
    undo: bool = False  # True: select reverted links to restore, False: active links to revert

    def __post_init__(self):
        if self.stage not in STAGE_NAMES:
            raise ValueError(f"unknown stage {self.stage!r}; expected one of {', '.join(STAGE_NAMES)}")

    def spark_condition(self, columns: Sequence[str] = ()) -> Column:
        """columns: the links table's; superseded links (incremental runs) are never reverted."""
        cond = F.col("stage") == F.lit(self.stage)
        cond &= F.col("reverted_at").isNotNull() if self.undo else F.col("reverted_at").isNull()
        if not self.undo and "superseded_at" in columns:
            cond &= F.col("superseded_at").isNull()
        if self.below is not None:
            cond &= F.col("score") < F.lit(float(self.below))
        if self.run_id is not None:
            cond &= F.col("run_id") == F.lit(self.run_id)
        return cond

    def sql_condition(self) -> tuple[str, dict[str, Any]]:
        # A superseded link is already inactive: there is nothing to revert.
        parts = ["stage = %(stage)s", "reverted_at IS NOT NULL" if self.undo else
                 "reverted_at IS NULL AND superseded_at IS NULL"]
        params: dict[str, Any] = {"stage": self.stage}
        if self.below is not None:
            parts.append("score < %(below)s")
            params["below"] = float(self.below)
        if self.run_id is not None:
            parts.append("run_id = %(run_id)s")
            params["run_id"] = self.run_id
        return " AND ".join(parts), params


@dataclass
class RevertResult:
    delta: int
    postgres: int | None  # None: Postgres was not touched
    reverted_at: datetime | None


def count_delta(spark: SparkSession, output: str, sel: Selection) -> dict[str, int]:
    """Links per stage that the selection matches in Delta (for dry runs)."""
    links = store.read(spark, output, "duplicate_links")
    rows = links.where(sel.spark_condition(links.columns)).groupBy("stage").count().collect()
    return {r["stage"]: int(r["count"]) for r in rows}


def count_postgres(dsn: str, sel: Selection) -> int:
    pg.ensure_schema(dsn)  # an older database gains the superseded_at column the condition reads
    where, params = sel.sql_condition()
    with pg.connect(dsn) as conn:
        return int(conn.execute(f"SELECT count(*) FROM duplicate_links WHERE {where}", params).fetchone()[0])


def _update_postgres(conn, sel: Selection, ts: datetime | None, reason: str | None) -> int:
    where, params = sel.sql_condition()
    cur = conn.execute(
        f"UPDATE duplicate_links SET reverted_at = %(ts)s, revert_reason = %(reason)s WHERE {where}",
        {**params, "ts": ts, "reason": reason})
    return cur.rowcount


def _update_delta(spark: SparkSession, output: str, sel: Selection, ts: datetime | None,
                  reason: str | None) -> int:
    from delta.tables import DeltaTable

    path = store.table_path(output, "duplicate_links")
    table = DeltaTable.forPath(spark, path)
    cond = sel.spark_condition(table.toDF().columns)
    n = table.toDF().where(cond).count()
    if n:
        table.update(cond, {
            "reverted_at": F.lit(ts).cast("timestamp"),
            "revert_reason": F.lit(reason).cast("string"),
        })
    return n


def apply(spark: SparkSession, output: str, sel: Selection, *, dsn: str | None,
          reason: str | None = None, now: datetime | None = None) -> RevertResult:
    """Revert (or, with sel.undo, restore) the selected links; see the module docstring for ordering."""
    ts = None if sel.undo else (now or datetime.now(timezone.utc))
    stamp_reason = None if sel.undo else (reason or "manual revert")
    if dsn is None:
        return RevertResult(_update_delta(spark, output, sel, ts, stamp_reason), None, ts)
    pg.ensure_schema(dsn)
    with pg.connect(dsn) as conn:
        with conn.transaction():
            n_pg = _update_postgres(conn, sel, ts, stamp_reason)
            n_delta = _update_delta(spark, output, sel, ts, stamp_reason)  # raises -> PG rolls back
    return RevertResult(n_delta, n_pg, ts)
