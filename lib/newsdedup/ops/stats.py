"""Link statistics: counts and score histograms per stage per day, active vs reverted.

The same numbers come from Delta (Spark) or from the Postgres views
link_stats_daily / link_score_histogram (created by pg.ensure_schema); the
score bins are one SQL expression shared by both (pg.score_bin_sql). Days are
UTC days of linked_at.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..io import pg, store


@dataclass(frozen=True)
class Filter:
    stage: str | None = None
    day: date | None = None     # exactly this day
    since: date | None = None   # this day and later
    until: date | None = None   # up to and including this day

    def sql(self) -> tuple[str, dict[str, Any]]:
        parts, params = ["TRUE"], {}
        for name, op in (("stage", "="), ("day", "="), ("since", ">="), ("until", "<=")):
            value = getattr(self, name)
            if value is not None:
                column = "stage" if name == "stage" else "day"
                parts.append(f"{column} {op} %({name})s")
                params[name] = value
        return " AND ".join(parts), params

    def spark(self, df: DataFrame) -> DataFrame:
        if self.stage is not None:
            df = df.where(F.col("stage") == self.stage)
        if self.day is not None:
            df = df.where(F.col("day") == F.lit(self.day))
        if self.since is not None:
            df = df.where(F.col("day") >= F.lit(self.since))
        if self.until is not None:
            df = df.where(F.col("day") <= F.lit(self.until))
        return df


DAILY_COLUMNS = ("day", "stage", "active", "reverted", "min_score", "avg_score", "max_score")
HIST_COLUMNS = ("day", "stage", "bin_lower", "active", "reverted")


def _with_day(links: DataFrame) -> DataFrame:
    # The session time zone is UTC (spark.get_spark), so to_date gives the UTC day.
    return links.withColumn("day", F.to_date("linked_at"))


def _state_counts(links: DataFrame) -> list:
    """active (not reverted, not superseded) and reverted counts."""
    reverted = F.col("reverted_at").isNotNull()
    return [F.sum(store.is_active(links).cast("long")).alias("active"), F.sum(reverted.cast("long")).alias("reverted")]


def delta_stats(spark: SparkSession, output: str, flt: Filter) -> tuple[list[dict], list[dict]]:
    links = flt.spark(_with_day(store.read(spark, output, "duplicate_links"))).cache()
    daily = (links.groupBy("day", "stage")
             .agg(*_state_counts(links), F.min("score").alias("min_score"), F.avg("score").alias("avg_score"),
                  F.max("score").alias("max_score"))
             .orderBy("day", "stage").collect())
    hist = (links.withColumn("bin_lower", F.expr(pg.score_bin_sql()))
            .groupBy("day", "stage", "bin_lower").agg(*_state_counts(links))
            .orderBy("day", "stage", "bin_lower").collect())
    links.unpersist()
    return [r.asDict() for r in daily], [r.asDict() for r in hist]


REFUSAL_COLUMNS = ("day", "lang_pair", "reason", "pairs", "min_score", "max_score")


def delta_refusals(spark: SparkSession, output: str, flt: Filter) -> list[dict]:
    """Stage-4 pairs whose cosine passed and whose evidence refused them, per day, language pair and reason.

    Empty when the output has no semantic_refusals table (stage 4 off, or nothing refused yet)
    or the filter asks for another stage.
    """
    path = store.table_path(output, "semantic_refusals")
    if (flt.stage not in (None, "semantic")) or not store.exists(spark, path):
        return []
    rows = flt.spark(spark.read.format("delta").load(path).withColumn("day", F.to_date("refused_at"))
                     .withColumn("stage", F.lit("semantic")))
    out = (rows.groupBy("day", "lang_pair", "reason")
           .agg(F.count("*").alias("pairs"), F.min("score").alias("min_score"), F.max("score").alias("max_score"))
           .orderBy("day", "lang_pair", "reason").collect())
    return [r.asDict() for r in out]


def format_refusals(refusals: Sequence[dict]) -> str:
    if not refusals:
        return ""
    lines = ["stage 4 pairs refused by their evidence (cosine passed; <output>/semantic_refusals)",
             f"{'day':<10}  {'langs':<6}  {'reason':<18}  {'pairs':>6}  {'min':>6}  {'max':>6}"]
    for r in refusals:
        lines.append(f"{r['day']!s:<10}  {r['lang_pair'] or '-':<6}  {r['reason']:<18}  {r['pairs']:>6}  "
                     f"{_num(r['min_score']):>6}  {_num(r['max_score']):>6}")
    return "\n".join(lines)


def postgres_stats(dsn: str, flt: Filter) -> tuple[list[dict], list[dict]]:
    """The views' rows. The loader's role refreshes the views first (an older database gets this
    version's); any other role reads them as they are, so a role that may only read runs stats."""
    with pg.connect(dsn, autocommit=True) as conn:
        may_load = pg.loader_refusal(conn, dsn) is None
        have_views = all(conn.execute("SELECT to_regclass(%s) IS NOT NULL", (v,)).fetchone()[0]
                         for v in ("link_stats_daily", "link_score_histogram"))
    if may_load:
        pg.ensure_schema(dsn)
    elif not have_views:
        raise pg.PostgresUnavailable(f"Postgres ({pg.redact(dsn)}) has no link_stats_daily view yet: run "
                                     "`newsdedup load` (or `run`) with the loader role first (docs/postgres-roles.md)")
    where, params = flt.sql()
    with pg.connect(dsn) as conn:
        daily = conn.execute(f"SELECT {', '.join(DAILY_COLUMNS)} FROM link_stats_daily WHERE {where} "
                             "ORDER BY day, stage", params).fetchall()
        hist = conn.execute(f"SELECT {', '.join(HIST_COLUMNS)} FROM link_score_histogram WHERE {where} "
                            "ORDER BY day, stage, bin_lower", params).fetchall()
    return [dict(zip(DAILY_COLUMNS, r)) for r in daily], [dict(zip(HIST_COLUMNS, r)) for r in hist]


def _bin_label(stage: str, lower: float | None) -> str:
    if lower is None:
        return "no score"
    if stage == "simhash":
        return f"{lower:.4f} (hamming {round((1 - lower) * 64)})"
    width = pg.SCORE_BIN_WIDTH.get(stage, 1.0)
    return f"[{lower:.2f}, {min(lower + width, 1.0):.2f}{']' if lower + width >= 1.0 else ')'}"


def _num(x: Any) -> str:
    return "-" if x is None else f"{float(x):.4f}"


def format_stats(daily: Sequence[dict], hist: Sequence[dict]) -> str:
    if not daily:
        return "no links match"
    lines = [f"{'day':<10}  {'stage':<8}  {'active':>8}  {'reverted':>8}  {'min':>6}  {'avg':>6}  {'max':>6}"]
    for r in daily:
        lines.append(f"{r['day']!s:<10}  {r['stage']:<8}  {r['active']:>8}  {r['reverted']:>8}  "
                     f"{_num(r['min_score']):>6}  {_num(r['avg_score']):>6}  {_num(r['max_score']):>6}")
    lines.append("")
    lines.append("score histogram (active / reverted)")
    for r in hist:
        lines.append(f"{r['day']!s:<10}  {r['stage']:<8}  {_bin_label(r['stage'], r['bin_lower']):<24}  "
                     f"{r['active']:>8}  {r['reverted']:>8}")
    return "\n".join(lines)
