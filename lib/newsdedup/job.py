"""The batch job: read a snapshot, run the cascade, write Delta tables, load Postgres."""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from . import incremental
from .cascade import run_cascade
from .io import pg, pg_documents, store
from .io.input import read_input

if TYPE_CHECKING:
    from .config import Config


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


@dataclass
class Report:
    run_id: str
    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def timed(self, name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - t0, 3)

    def table(self) -> str:
        rows = [("run_id", self.run_id)] + [(k, str(v)) for k, v in self.counts.items()]
        rows += [(f"seconds.{k}", f"{v:.2f}") for k, v in self.seconds.items()]
        width = max(len(k) for k, _ in rows)
        lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({"run_id": self.run_id, "counts": self.counts, "seconds": self.seconds,
                           "notes": self.notes}, indent=2, sort_keys=True)


def run(spark: SparkSession, input_path: str, output: str, conf: "Config", *,
        dsn: str | None = None, dry_run: bool = False, load_pg: bool = True,
        run_id: str | None = None) -> Report:
    report = Report(run_id=run_id or new_run_id())
    now = datetime.now(timezone.utc)
    if spark.sparkContext.getCheckpointDir() is None:
        # A dry run leaves the output untouched: its checkpoints go to a scratch directory.
        ckpt = Path(tempfile.mkdtemp(prefix="newsdedup-ckpt-")) if dry_run else Path(output).resolve() / "_checkpoints"
        spark.sparkContext.setCheckpointDir(str(ckpt))
    if not dry_run:
        Path(output).mkdir(parents=True, exist_ok=True)
    raw = read_input(spark, input_path)
    # A dry run passes no output, so stage 4 keeps its vectors in memory instead of writing them.
    result = run_cascade(spark, raw, conf, report, None if dry_run else output)
    if dry_run:
        report.notes.append("dry run: nothing written to Delta or Postgres")
        return report

    run_col, ts = F.lit(report.run_id), F.lit(now).cast("timestamp")
    # The links computed over stored + new documents replace the active ones (incremental.py).
    report.timed("write_delta", lambda: (
        report.counts.update({f"links.{k}": v for k, v in incremental.write_links(
            spark, result.links, store.table_path(output, "duplicate_links"), report.run_id, now).items()}),
        store.merge_documents(spark, result.documents.withColumn("run_id", run_col),
                              store.table_path(output, "documents")),
        store.insert_quarantine(spark,
                                result.quarantine.withColumn("run_id", run_col).withColumn("quarantined_at", ts),
                                store.table_path(output, "quarantine")),
    ))
    if load_pg:
        dsn = pg.resolve_dsn(conf, output, dsn)
        # Postgres converges to what Delta holds (all runs): links a failed earlier load missed arrive too.
        # Documents (with the vectors of the configured model) first: the links reference them.
        docs = report.timed("load_postgres_documents",
                            lambda: pg_documents.load_from_delta(spark, output, dsn, conf, report.run_id))
        report.counts.update({f"postgres.documents.{k}": v for k, v in docs.items()})
        delta_links = store.read(spark, output, "duplicate_links")
        loaded = report.timed("load_postgres", lambda: pg.load_links(delta_links, dsn, report.run_id))
        report.counts.update({f"postgres.{k}": v for k, v in loaded.items()})
    runs_row = spark.createDataFrame([(report.run_id, now, input_path, report.to_json())],
                                     "run_id string, started_at timestamp, input string, report string")
    store.append(runs_row, store.table_path(output, "runs"))
    reports = Path(output) / "reports"
    reports.mkdir(exist_ok=True)
    (reports / f"{report.run_id}.json").write_text(report.to_json(), encoding="utf-8")
    return report
