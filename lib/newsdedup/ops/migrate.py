"""In-place migration of a Postgres table of documents to canonical URLs.

Only the URL column is rewritten: ids never change, no row is merged or
deleted, so foreign keys that reference the table stay valid. The planned
changes go into a server-side temporary table (COPY, batch by batch, while a
server-side cursor reads the table); collisions are found by SQL over the
whole table; a dry run rolls everything back, --apply updates in batches and
commits once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import psycopg
from psycopg import sql

from ..io import pg
from ..stages import url as urls

if TYPE_CHECKING:
    from ..config import UrlConfig


class MigrationError(ValueError):
    """The migration cannot be applied as asked; nothing was changed."""


@dataclass(frozen=True)
class Target:
    table: str                        # optionally schema-qualified: schema.table
    id_column: str = "id"
    url_column: str = "url"
    source_column: str | None = None  # per-source URL rules when given

    def table_sql(self) -> sql.Composable:
        return sql.Identifier(*self.table.split("."))


@dataclass
class MigrationReport:
    rows: int = 0
    null_urls: int = 0
    changed: int = 0
    malformed: int = 0
    malformed_examples: list[tuple[Any, str, str]] = field(default_factory=list)
    collisions: list[tuple[str, list[Any]]] = field(default_factory=list)
    applied: bool = False
    updated: int = 0
    skipped_for_collision: int = 0

    def text(self, limit: int = 20) -> str:
        lines = [f"rows              {self.rows}",
                 f"null urls         {self.null_urls}",
                 f"malformed urls    {self.malformed}",
                 f"would change      {self.changed}",
                 f"collision groups  {len(self.collisions)}"
                 f" ({sum(len(ids) for _, ids in self.collisions)} rows)"]
        if self.applied:
            lines.append(f"updated           {self.updated}")
            if self.skipped_for_collision:
                lines.append(f"left unchanged    {self.skipped_for_collision} (collisions)")
        else:
            lines.append("dry run: nothing changed (use --apply)")
        for rid, url, err in self.malformed_examples[:limit]:
            lines.append(f"malformed  id={rid}  {err}: {url!r}")
        for url, ids in self.collisions[:limit]:
            lines.append(f"collision  {url}  ids={ids}")
        return "\n".join(lines)


class Planner:
    """Canonical URL for one row, with the per-source rules cached."""

    def __init__(self, url_conf: "UrlConfig"):
        self.url_conf = url_conf
        self.scheme_insensitive = url_conf.scheme_insensitive
        self._rules: dict[tuple, urls.UrlRules] = {}

    def canonical(self, url: str, source: str | None) -> str:
        """The canonical form of url; raises urls.UrlError when it cannot be normalised."""
        key = (source, urls.host_of(url))
        if key not in self._rules:
            self._rules[key] = urls.rules_for(self.url_conf, *key)
        return urls.normalize_url(url, self._rules[key], self.scheme_insensitive).canonical


def plan_changes(rows: Iterable[tuple[Any, str | None, str | None]], planner: Planner,
                 report: MigrationReport, max_examples: int = 1000) -> list[tuple[Any, str]]:
    """(id, url, source) rows -> (id, new_url) for rows whose URL changes; counts into report."""
    out = []
    for rid, url, source in rows:
        report.rows += 1
        if url is None:
            report.null_urls += 1
            continue
        try:
            new = planner.canonical(url, source)
        except urls.UrlError as exc:
            report.malformed += 1
            if len(report.malformed_examples) < max_examples:
                report.malformed_examples.append((rid, url, str(exc)))
            continue
        if new != url:
            out.append((rid, new))
    return out


def _has_unique_index(conn, target: Target) -> bool:
    regclass = target.table_sql().as_string(conn)
    return bool(conn.execute(
        """SELECT EXISTS (
               SELECT 1 FROM pg_index i
               JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
               WHERE i.indrelid = %s::regclass AND i.indisunique AND i.indnatts = 1 AND a.attname = %s)""",
        (regclass, target.url_column)).fetchone()[0])


def _names(target: Target) -> dict[str, sql.Composable]:
    return {"t": target.table_sql(), "id": sql.Identifier(target.id_column),
            "url": sql.Identifier(target.url_column),
            "src": sql.Identifier(target.source_column) if target.source_column else sql.SQL("NULL::text")}


COLLISIONS_SQL = """
SELECT COALESCE(m.new_url, t.{url}) AS final_url, array_agg(t.{id} ORDER BY t.{id})
FROM {t} t LEFT JOIN url_migration m ON m.id = t.{id}
WHERE COALESCE(m.new_url, t.{url}) IS NOT NULL
GROUP BY 1
HAVING count(*) > 1 AND bool_or(m.id IS NOT NULL)
ORDER BY 1
"""


def migrate(dsn: str, target: Target, url_conf: "UrlConfig", *, apply: bool = False,
            batch_size: int = 10_000, skip_collisions: bool = False) -> MigrationReport:
    """Plan (and with apply=True, perform) the migration; see the module docstring."""
    try:
        return _migrate(dsn, target, url_conf, apply, batch_size, skip_collisions)
    except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn) as exc:
        raise MigrationError(f"{target.table}: {str(exc).splitlines()[0]}") from exc


def _migrate(dsn: str, target: Target, url_conf: "UrlConfig", apply: bool, batch_size: int,
             skip_collisions: bool) -> MigrationReport:
    report = MigrationReport()
    planner = Planner(url_conf)
    n = _names(target)
    with pg.connect(dsn) as conn:
        with conn.transaction():
            if apply:  # readers go on; writers wait until the migration commits
                conn.execute(sql.SQL("LOCK TABLE {t} IN SHARE ROW EXCLUSIVE MODE").format(**n))
            conn.execute(sql.SQL(
                "CREATE TEMP TABLE url_migration ON COMMIT DROP AS "
                "SELECT {id} AS id, {url} AS new_url, 0::bigint AS seq FROM {t} WITH NO DATA").format(**n))
            seq = 0
            with conn.cursor(name="url_migration_scan") as scan:
                scan.execute(sql.SQL("SELECT {id}, {url}, {src} FROM {t} ORDER BY {id}").format(**n))
                while batch := scan.fetchmany(batch_size):
                    changes = plan_changes(batch, planner, report)
                    with conn.cursor().copy("COPY url_migration (id, new_url, seq) FROM STDIN") as cp:
                        for rid, new in changes:
                            seq += 1
                            cp.write_row((rid, new, seq))
            report.changed = seq
            conn.execute("CREATE INDEX ON url_migration (id)")
            conn.execute("ANALYZE url_migration")
            report.collisions = [(u, list(ids)) for u, ids in
                                 conn.execute(sql.SQL(COLLISIONS_SQL).format(**n)).fetchall()]
            if not apply:
                raise psycopg.Rollback()  # a dry run leaves no trace; the report is kept
            if report.collisions:
                if not skip_collisions and _has_unique_index(conn, target):
                    raise MigrationError(
                        f"{len(report.collisions)} canonical URL(s) would be shared by several rows and "
                        f"{target.table}.{target.url_column} has a unique index; nothing was changed. "
                        "Rerun with --skip-collisions to leave those rows as they are.")
                if skip_collisions:
                    ids = [i for _, group in report.collisions for i in group]
                    report.skipped_for_collision = conn.execute(
                        "DELETE FROM url_migration WHERE id = ANY(%s)", (ids,)).rowcount
            report.updated = _update_in_batches(conn, n, seq, batch_size)
            report.applied = True
    return report


def _update_in_batches(conn, names: Mapping[str, sql.Composable], last_seq: int, batch_size: int) -> int:
    stmt = sql.SQL("UPDATE {t} t SET {url} = m.new_url FROM url_migration m "
                   "WHERE t.{id} = m.id AND m.seq > %s AND m.seq <= %s").format(**names)
    updated = 0
    for lo in range(0, last_seq, batch_size):
        updated += conn.execute(stmt, (lo, lo + batch_size)).rowcount
    return updated
