"""Stage 4's live lookup: the batch step's rule for articles checked against Postgres.

The batch (step.py) links a document to the earliest document it is directly similar to
(cosine at or above its language pair's threshold, within the window, same model_version)
whose facts allow the link (evidence.refusal) and that is not itself a stage-4 duplicate
(clustering.earliest_canonicals); the score is that pair's cosine. The lookup applies the same
rule to a probe: pgvector's nearest vectors of the same model_version within the window
(HNSW, `semantic.live_neighbours` of them), the same thresholds, the same evidence (the stored
documents' facts are a Postgres column, written by the documents COPY path from `facts_json`),
the same canonical choice. Stored documents an earlier stage suppressed take no part.

The vector and facts of a probe are computed as the batch computes them: emb.document_text, the
resolved model, evidence.facts_of on the same text and published_at.

Imports torch and the model code only through embeddings.model_for, when a Checker with
stage 4 on is built.
"""

from __future__ import annotations

import json
from datetime import timedelta, timezone
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..base import ACTIVE_LINK_COLUMNS, ACTIVE_LINK_JOINS, LiveHit, Probe, claim_key, order_of
from . import embeddings as emb
from .embeddings import vector_literal
from .evidence import Facts, facts_of, refusal

if TYPE_CHECKING:
    from ...config import Config

NAME = "semantic"
STORED = ("model_version", "embedding", "facts")
NEIGHBOURS = 20     # nearest vectors read per probe (the HNSW query's LIMIT)

# The inner query is the seed query's shape (ORDER BY distance LIMIT k) so that the HNSW index serves it.
NEAREST_SQL = f"""
SELECT d.id, d.published_at, {ACTIVE_LINK_COLUMNS}, d.lang, d.sim, d.facts FROM (
    SELECT id, published_at, lang, facts, 1 - (embedding <=> %(vec)s::vector) AS sim FROM documents
    WHERE model_version = %(version)s AND id <> %(id)s
      AND published_at BETWEEN %(ts)s - %(window)s AND %(ts)s + %(window)s
    ORDER BY embedding <=> %(vec)s::vector LIMIT {NEIGHBOURS}) d
{ACTIVE_LINK_JOINS}
"""


def facts_json(text: str, published_at, rules) -> str:
    """A document's facts as Postgres stores them (jsonb): what with_facts gives the batch."""
    return json.dumps(facts_of(text, published_at, rules.timezone, rules.lead_chars).as_row(), ensure_ascii=False)


class SemanticLookup:
    name = NAME

    def __init__(self, conf: "Config"):
        self.conf = conf.semantic
        # The model stage 4 runs (fallback, coverage, calibrated thresholds), decided as in the job.
        self.resolved = emb.resolve(conf.semantic)
        self.model, self.version = emb.model_for(self.resolved.sem), self.resolved.version
        self.thresholds = self.resolved.pair_thresholds()
        self.window = timedelta(hours=float(conf.semantic.window_hours))

    def memory(self) -> list[tuple[int, tuple, np.ndarray, str, Any, Facts, bool]]:
        return []     # (id, order, vector, lang, published_at, facts, is a stage-4 duplicate) of earlier probes

    def _prepared(self, probes: Sequence[Probe]) -> None:
        """Vector and facts of each probe the batch would embed: dated, with text, a covered language."""
        todo = [p for p in probes if NAME not in p.extra]
        texts = [emb.document_text(p.keys.get("title"), p.keys.get("body"), self.conf.max_chars) for p in todo]
        wanted = [i for i, (p, t) in enumerate(zip(todo, texts))
                  if t and p.keys.get("published_at") is not None and p.keys.get("lang") in self.resolved.spec.languages]
        vectors = emb.encode(self.model, [texts[i] for i in wanted], 32) if wanted else []
        for p in todo:
            p.extra[NAME] = None
        for i, vec in zip(wanted, vectors):
            p = todo[i]
            facts = facts_of(texts[i], p.keys["published_at"], self.conf.evidence.timezone, self.conf.evidence.lead_chars)
            p.extra[NAME] = (np.asarray(vec, np.float32), facts)

    def _threshold(self, a: str | None, b: str | None) -> float:
        t = self.thresholds.for_pair(a or "", b or "")
        return float("inf") if t is None else t

    def _allowed(self, lang: str, facts: Facts, other_lang: str, other: Facts) -> bool:
        return refusal(facts, other, self.conf.evidence, lang == other_lang) is None

    def find(self, conn, probes: Sequence[Probe], memory: list) -> dict[int, LiveHit]:
        self._prepared(probes)
        hits: dict[int, LiveHit] = {}
        for p in probes:
            if p.extra[NAME] is None:
                continue
            vec, facts = p.extra[NAME]
            lang, ts = p.keys.get("lang"), p.keys["published_at"]
            options: list[tuple[tuple, int, float]] = []
            rows = conn.execute(NEAREST_SQL, {"vec": vector_literal(vec), "version": self.version, "id": p.id,
                                              "ts": ts, "window": self.window})
            for doc_id, published, l_stage, l_canon, c_published, o_lang, sim, o_facts in rows:
                if l_stage is not None or sim is None or sim < self._threshold(lang, o_lang):
                    continue   # suppressed earlier, or itself a stage-4 duplicate: never a canonical
                if self._allowed(lang, facts, o_lang, Facts.from_row(o_facts or {})):
                    options.append((order_of(published, doc_id), doc_id, min(1.0, sim)))
            for o_id, o_order, o_vec, o_lang, o_ts, o_facts, o_dup in memory:
                sim = float(np.dot(o_vec, vec))
                if (not o_dup and o_id != p.id and abs(o_ts - ts) <= self.window and sim >= self._threshold(lang, o_lang)
                        and self._allowed(lang, facts, o_lang, o_facts)):
                    options.append((o_order, o_id, min(1.0, sim)))
            earlier = [o for o in options if o[0] < p.order]
            if earlier:
                order, canonical, score = min(earlier)
                hits[p.id] = LiveHit(canonical, float(score))
            memory.append((p.id, p.order, vec, lang, ts, facts, bool(earlier)))
        return hits

    def claim_keys(self, probes: Sequence[Probe]) -> list[list[int]]:
        """Vectors have no key to share: the claims are time slots instead. With w = window_hours and
        b = floor(published_at / w), a probe claims slots b and b + 1. Two articles this stage could pair
        are at most w apart, so their b differ by at most 1 and they share a slot. Every article of the
        last window shares slots with every other, so with stage 4 on, inserting calls serialise."""
        window = self.window.total_seconds()
        out = []
        for p in probes:
            ts = p.keys.get("published_at")
            if ts is None:           # the batch leaves undated articles out of stage 4 (_prepared)
                out.append([])
                continue
            slot = int((ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)).timestamp() // window)
            out.append([claim_key(NAME, slot), claim_key(NAME, slot + 1)])
        return out

    def stored_columns(self, probes: Sequence[Probe]) -> list[dict[str, Any]]:
        self._prepared(probes)
        out = []
        for p in probes:
            if p.extra[NAME] is None:
                out.append(dict.fromkeys(STORED))
            else:
                vec, facts = p.extra[NAME]
                out.append({"model_version": self.version, "embedding": vector_literal(vec),
                            "facts": json.dumps(facts.as_row(), ensure_ascii=False)})
        return out
