"""Live lookups: is one incoming article (or each of a batch) a duplicate of what Postgres holds?

The cascade runs as the seeds' index lookups on the `documents` table
(io/pg_documents.py), cheapest first, stopping at the first stage that finds
a match:

1. url_hash = $1                         (unique: the URL group's earliest document)
2. content_hash = $1                     (btree)
3. band_0 = $1 OR band_1 = $2 OR ...     (four btrees, BitmapOr) plus exact Hamming
   <= the language's simhash threshold. This is still the seed's lookup on the seed
   fingerprint: the batch stage 3 (Manku tables on simhash_w, MinHash bands, exact
   shingle verification; docs/stage3.md) finds more. Postgres holds neither the
   MinHash bands nor the shingle sets, so a live check finds a subset of what the
   next batch run links.
4. the pgvector query: nearest vectors of the same model_version within
   semantic.window_hours of published_at, cosine >= the same/cross-language threshold

Keys come from the stages' own per-row functions (prepare.Preparer calls
UrlKeys, ContentKeys, SimhashKeys); the vector from stages.semantic.embeddings.

As in the batch job, a document suppressed at an earlier stage takes no part
in later ones, and a match that is itself a duplicate at the same stage
stands for its canonical. The batch keeps a seen-set of its own articles and
never relies on reading back its own inserts (production runs without
autoflush), so two variants of one URL in one batch see each other with or
without --insert. With insert, each article's document and link go in under
their own savepoint with ON CONFLICT DO NOTHING: a unique violation (a
concurrent writer, an id already loaded) never aborts the batch.

Unlike the batch job, a live lookup never re-links what is already stored: an
article older than its match still links to it; the next incremental run
(incremental.py) puts the earliest document first again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping
from zoneinfo import ZoneInfo

import psycopg

from ..errors import UserError
from ..io import pg, pg_documents
from ..prepare import Preparer
from ..stages import STAGE_NAMES

if TYPE_CHECKING:
    from ..config import Config

ACTIVE_LINK = ("LEFT JOIN duplicate_links l ON l.duplicate_id = d.id "
               "AND l.reverted_at IS NULL AND l.superseded_at IS NULL")
URL_SQL = "SELECT id FROM documents WHERE url_hash = %(key)s AND id <> %(id)s"
CONTENT_SQL = (f"SELECT d.id, NULL::double precision, l.stage, l.canonical_id FROM documents d {ACTIVE_LINK} "
               "WHERE d.content_hash = %(key)s AND d.id <> %(id)s LIMIT 50")
SIMHASH_SQL = (f"SELECT d.id, bit_count((d.simhash # %(fp)s::bigint)::bit(64)), l.stage, l.canonical_id "
               f"FROM documents d {ACTIVE_LINK} "
               "WHERE (d.band_0 = %(b0)s OR d.band_1 = %(b1)s OR d.band_2 = %(b2)s OR d.band_3 = %(b3)s) "
               "AND d.lang = %(lang)s AND d.id <> %(id)s AND bit_count((d.simhash # %(fp)s::bigint)::bit(64)) <= %(max)s "
               "ORDER BY 2, d.published_at NULLS LAST, d.id LIMIT 50")
# The inner query is the seed query's shape (ORDER BY distance LIMIT k) so the HNSW index serves it.
SEMANTIC_SQL = (f"SELECT d.id, d.sim, l.stage, l.canonical_id, d.lang FROM ("
                "SELECT id, lang, 1 - (embedding <=> %(vec)s::vector) AS sim FROM documents "
                "WHERE model_version = %(version)s AND id <> %(id)s "
                "AND published_at BETWEEN %(ts)s - %(window)s AND %(ts)s + %(window)s "
                f"ORDER BY embedding <=> %(vec)s::vector LIMIT 20) d {ACTIVE_LINK} ORDER BY d.sim DESC")
INSERT_DOC_SQL = ("INSERT INTO documents ({cols}) VALUES ({vals}) ON CONFLICT DO NOTHING RETURNING id"
                  .format(cols=", ".join(pg_documents.COLUMNS),
                          vals=", ".join(f"%({c})s" for c in pg_documents.COLUMNS)))
INSERT_LINK_SQL = ("INSERT INTO duplicate_links (duplicate_id, canonical_id, stage, score, linked_at, run_id) "
                   "VALUES (%s, %s, %s, %s, now(), %s) ON CONFLICT DO NOTHING")
TEXT_FIELDS = ("url", "title", "body", "html", "source", "lang")


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


def _stage_rank(stage: str | None) -> int:
    return STAGE_NAMES.index(stage) if stage in STAGE_NAMES else len(STAGE_NAMES)


def resolve(stage: str, candidates: Iterable[tuple]) -> list[tuple]:
    """(canonical id, score, *rest) for rows (id, score, link_stage, link_canonical, *rest) that reached `stage`.

    A candidate an earlier stage suppressed is dropped; one linked at this very
    stage stands for its canonical; any other is its own canonical here.
    """
    here = STAGE_NAMES.index(stage)
    out = []
    for cid, score, link_stage, link_canonical, *rest in candidates:
        rank = _stage_rank(link_stage)
        if rank >= here:
            out.append((link_canonical if rank == here else cid, score, *rest))
    return out


class SeenSet:
    """This batch's own articles, each under the keys of the stages it reached (stage canonical as value)."""

    def __init__(self):
        self.url: dict[str, int] = {}
        self.content: dict[str, int] = {}
        self.simhash: list[tuple[int, int, str, tuple]] = []        # canonical, fp, lang, bands
        self.vectors: list[tuple[int, Any, str, datetime]] = []     # canonical, vector, lang, published_at

    def add(self, keys: Mapping[str, Any], verdict: Verdict, vector=None) -> None:
        own, rank = verdict.id, _stage_rank(verdict.stage)

        def canon(stage: str) -> int:
            return verdict.canonical_id if rank == STAGE_NAMES.index(stage) else own

        if keys["url_hash"]:
            self.url.setdefault(keys["url_hash"], canon("url"))
        if rank > 0 and keys["content_hash"]:
            self.content.setdefault(keys["content_hash"], canon("content"))
        if rank > 1 and keys["simhash"] is not None:
            self.simhash.append((canon("simhash"), keys["simhash"], keys["lang"], _bands(keys)))
        if rank > 2 and vector is not None and keys["published_at"] is not None:
            self.vectors.append((canon("semantic"), vector, keys["lang"], keys["published_at"]))


def _bands(keys: Mapping[str, Any]) -> tuple:
    return tuple(keys[f"band_{i}"] for i in range(4))


class Checker:
    """Runs the lookup cascade for articles against one Postgres database."""

    def __init__(self, conf: "Config", dsn: str, *, insert: bool = False, run_id: str | None = None):
        self.conf, self.dsn, self.insert = conf, dsn, insert
        self.run_id = run_id or "check-" + datetime.now().strftime("%Y%m%dT%H%M%S")
        self.preparer = Preparer(conf)
        self.model = self.version = self.resolved = None
        if conf.semantic.enabled:
            from ..stages.semantic import embeddings as emb

            # The model stage 4 runs (fallback, coverage, calibrated thresholds), decided as in the job.
            self.resolved = emb.resolve(conf.semantic)
            self.model, self.version = emb.model_for(self.resolved.sem), self.resolved.version
        pg_documents.ensure_schema(dsn)

    # ------------------------------------------------------------------ keys

    def keys(self, article: Mapping[str, Any]) -> dict[str, Any]:
        """Every stage's keys for one article (the same per-row functions as the batch job)."""
        if article.get("id") is None:
            raise UserError(f"article without an id: {json.dumps(article, default=str)[:200]}")
        row: dict[str, Any] = {c: (v.encode("utf-8") if isinstance(v := article.get(c), str) else v)
                               for c in TEXT_FIELDS}
        try:
            row["published_at"] = parse_time(article.get("published_at"), self.conf.input.naive_timezone)
        except ValueError:
            row["published_at"], row["raw_published_at"] = None, article.get("published_at")
        row["id"] = int(article["id"])
        return self.preparer.row(row)

    def vector(self, keys: Mapping[str, Any]):
        from ..stages.semantic import embeddings as emb
        from ..stages.semantic.step import embedding_text

        if self.model is None or keys["published_at"] is None or keys["lang"] not in self.resolved.spec.languages:
            return None   # a language the model does not cover is never compared
        text = embedding_text(keys["title"], keys["body"], self.conf.semantic.max_chars)
        return emb.encode(self.model, [text], 1)[0] if text else None

    # ------------------------------------------------------------------ stages

    def _url(self, cur, k, seen: SeenSet):
        row = cur.execute(URL_SQL, {"key": k["url_hash"], "id": k["id"]}).fetchone() if k["url_hash"] else None
        hit = row[0] if row else seen.url.get(k["url_hash"]) if k["url_hash"] else None
        return (hit, 1.0) if hit is not None else None

    def _content(self, cur, k, seen: SeenSet):
        if not k["content_hash"]:
            return None
        found = resolve("content", cur.execute(CONTENT_SQL, {"key": k["content_hash"], "id": k["id"]}))
        hit = found[0][0] if found else seen.content.get(k["content_hash"])
        return (hit, 1.0) if hit is not None else None

    def _simhash(self, cur, k, seen: SeenSet):
        if k["simhash"] is None:
            return None
        from ..stages.simhash import hamming

        limit = self.conf.simhash.language(k["lang"]).max_hamming
        params = {"fp": k["simhash"], "lang": k["lang"], "id": k["id"], "max": limit,
                  **{f"b{i}": b for i, b in enumerate(_bands(k))}}
        found = [(c, d) for c, d in resolve("simhash", cur.execute(SIMHASH_SQL, params))]
        mine = _bands(k)
        found += [(c, hamming(fp, k["simhash"])) for c, fp, lang, bands in seen.simhash
                  if lang == k["lang"] and any(a == b for a, b in zip(bands, mine))]
        found = [(c, d) for c, d in found if d <= limit]
        if not found:
            return None
        cid, dist = min(found, key=lambda x: x[1])
        return cid, 1.0 - dist / 64.0

    def _semantic(self, cur, k, seen: SeenSet, vec):
        if vec is None:
            return None
        import numpy as np

        from ..io.pg_vectors import vector_literal

        sem = self.conf.semantic
        window = timedelta(hours=float(sem.window_hours))

        thresholds = self.resolved.pair_thresholds()

        def threshold(lang):
            # Another language than the article's is compared only by a cross-language model.
            t = thresholds.for_pair(k["lang"] or "", lang or "")
            return float("inf") if t is None else t

        rows = cur.execute(SEMANTIC_SQL, {"vec": vector_literal(vec), "version": self.version, "id": k["id"],
                                          "ts": k["published_at"], "window": window})
        found = [(c, sim) for c, sim, lang in resolve("semantic", rows) if sim >= threshold(lang)]
        found += [(c, float(np.dot(v, vec))) for c, v, lang, ts in seen.vectors
                  if abs(ts - k["published_at"]) <= window and float(np.dot(v, vec)) >= threshold(lang)]
        if not found:
            return None
        cid, score = max(found, key=lambda x: x[1])
        return cid, min(1.0, float(score))

    # ------------------------------------------------------------------ the cascade

    def _one(self, conn, article: Mapping[str, Any], seen: SeenSet) -> Verdict:
        k = self.keys(article)
        vec = None
        with conn.cursor() as cur:
            hit, stage = None, None
            for stage in ("url", "content", "simhash"):
                hit = getattr(self, "_" + stage)(cur, k, seen)
                if hit:
                    break
            if not hit and self.model is not None:
                vec = self.vector(k)
                stage, hit = "semantic", self._semantic(cur, k, seen, vec)
        verdict = Verdict(k["id"], hit[0], stage, hit[1]) if hit else Verdict(k["id"])
        if self.insert:
            verdict = self._insert(conn, k, verdict, vec)
        seen.add(k, verdict, vec)
        return verdict

    def _insert(self, conn, k: Mapping[str, Any], verdict: Verdict, vec) -> Verdict:
        from ..io.pg_vectors import vector_literal

        row = {c: k.get(c) for c in pg_documents.COLUMNS}
        row.update(run_id=self.run_id, model_version=self.version if vec is not None else None,
                   embedding=vector_literal(vec) if vec is not None else None,
                   # Only the URL group's first document holds url_hash (see pg_documents).
                   url_hash=None if verdict.stage == "url" else k["url_hash"])
        try:
            with conn.transaction():     # a savepoint: a failure undoes this article only
                inserted = conn.execute(INSERT_DOC_SQL, row).fetchone()
                if inserted is not None and verdict.canonical_id is not None:
                    conn.execute(INSERT_LINK_SQL, (verdict.id, verdict.canonical_id, verdict.stage,
                                                   verdict.score, self.run_id))
        except psycopg.errors.IntegrityError as exc:
            return Verdict(**{**asdict(verdict), "error": f"not inserted: {exc.diag.message_primary}"})
        if inserted is None:
            return Verdict(**{**asdict(verdict), "error": "not inserted: id or url_hash already stored"})
        return verdict

    def check_batch(self, articles: Iterable[Mapping[str, Any]]) -> Iterator[Verdict]:
        """Verdicts in input order; with insert, everything commits once at the end of the batch."""
        seen = SeenSet()
        with pg.connect(self.dsn) as conn:
            for article in articles:
                yield self._one(conn, article, seen)

    def check(self, article: Mapping[str, Any]) -> Verdict:
        return list(self.check_batch([article]))[0]


def read_jsonl(path: str) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise UserError(f"{path}:{n}: not a JSON object ({exc.msg})") from None
                if not isinstance(value, dict):
                    raise UserError(f"{path}:{n}: not a JSON object (a JSON {type(value).__name__})")
                yield value
