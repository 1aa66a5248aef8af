"""Stage 3's live lookup: the batch step's candidate rule, verification and canonical rule, for
articles checked against Postgres (`newsdedup check`) instead of a Spark join.

What Postgres holds for stage 3 (documents columns, written by the documents COPY path from
`stored_columns`, and by `check --insert` from the same function):
- simhash_w, mh_bands: prepare's stored keys (the package docstring);
- sim_buckets bigint[] under a GIN index: one code per Manku table of simhash_w and one per
  MinHash band (`candidates.bucket_codes`): two documents share a code exactly when the batch puts them in
  one bucket (up to a 64-bit hash collision, which the candidate rule below removes again);
- shingles bytea (the sorted shingle set as little-endian int32), nums text[], names text[]:
  what verification reads (verify.Features), computed by verify.PairFeatures as in the batch.

A probe's candidates are the stored documents (and the batch's earlier probes) of its language
that share a code with it and that the batch would pair: simhash_w within the language's
max_hamming bits (the tables), or the same value at the same MinHash band index with simhash_w
within minhash_max_hamming bits (the bands behind the SimHash gate). Each candidate
is verified with verify.measures and verify.passes, the batch's own arithmetic and thresholds.
Of the verified candidates, those an earlier stage suppressed drop out, one linked at stage 3
stands for its canonical, and the probe links to the earliest canonical it reaches, scored by
its Jaccard with that canonical: a batch run holding both links the probe to its component's
earliest member, scored against it.

Where the two paths can still differ (docs/operations.md, "Live lookups"): the batch splits
buckets over simhash.max_band_bucket into chunks and flags their documents, the lookup compares
with every member; a probe earlier than the canonical it reaches would become the canonical in
a batch run, the lookup links it to the stored canonical (stored links are never rewritten live).
"""

from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa

from ...config import settings_digest
from ...io.pg import bigint_array
from ..base import ACTIVE_LINK_COLUMNS, ACTIVE_LINK_JOINS, LiveHit, Probe, canonical_at, stored_of
from .candidates import bucket_codes
from .reference import hamming
from .verify import Features, PairFeatures, features_of, features_with_shingles, pair_measures, passes

if TYPE_CHECKING:
    from ...config import Config, SimhashConfig

NAME = "simhash"
# The stage's own Postgres columns besides prepare's simhash_w and mh_bands (io/pg_documents.py types them).
# stage3_settings: config.settings_digest of the settings those were computed with, so that a reader
# can tell a row made with other settings (the batch's closure reads the shingles only from rows of
# its own, incremental.closure).
STORED = ("sim_buckets", "shingles", "nums", "names", "stage3_settings")


def batch_pairs(lang_a: str | None, fp_a: int, bands_a: Sequence[int] | None,
                lang_b: str | None, fp_b: int, bands_b: Sequence[int] | None, sim_conf: "SimhashConfig") -> bool:
    """Whether the batch makes these two documents a candidate pair: same language, and simhash_w
    within max_hamming bits, or one MinHash band equal at the same index with simhash_w within
    minhash_max_hamming bits (the SimHash gate)."""
    if lang_a != lang_b:
        return False
    spec, dist = sim_conf.language(lang_a), hamming(fp_a, fp_b)
    if dist <= spec.max_hamming:
        return True
    return dist <= spec.minhash_max_hamming and any(x == y for x, y in zip(bands_a or (), bands_b or ()))


def stored_values(features: Features, codes: list[int], settings: str) -> dict[str, Any]:
    """One document's STORED columns as Postgres takes them (settings: config.settings_digest)."""
    return {"sim_buckets": codes, "shingles": features.shingle_bytes(), "nums": list(features.nums),
            "names": list(features.names), "stage3_settings": settings}


# The columns a batch given to stored_batch's function may carry: prepare's verification features
# (prepare.VERIFY_COLUMNS) of the documents marked CARRIED, as the job computed them from the text.
CARRIED = "carried"
CARRIED_COLUMNS = {"shingles": "carried_shingles", "nums": "carried_nums", "names": "carried_names"}


def rows_to_derive(batch: pa.RecordBatch) -> np.ndarray:
    """The positions of the batch's rows whose STORED columns stored_batch derives from the text: those
    with a simhash_w (the others get none) that are not marked CARRIED."""
    derive = batch.column("simhash_w").is_valid().to_numpy(zero_copy_only=False)
    if CARRIED in batch.schema.names:
        derive = derive & ~batch.column(CARRIED).fill_null(False).to_numpy(zero_copy_only=False)
    return np.flatnonzero(derive)


def stored_batch(conf: "Config"):
    """A function from an Arrow batch (id, lang, title, body, simhash_w, mh_bands; optionally CARRIED and
    CARRIED_COLUMNS) to one of (id, sim_buckets, shingles, nums, names, stage3_settings): the STORED
    columns, for the documents COPY path.

    A row marked CARRIED takes prepare's features as they are: prepare derives them from the same text
    with the same functions as PairFeatures (keys.verify_features), so deriving them again from the body
    (about 100 s of a 1M load on this machine, docs/benchmarks-incremental.md) would only give the same
    bytes. The other rows (a batch without those columns, a document prepare gave none) derive them from
    title and body."""
    pair_features, sim_conf, settings = PairFeatures(conf), conf.simhash, settings_digest(conf)
    schema = pa.schema([("id", pa.int64()), ("sim_buckets", pa.list_(pa.int64())), ("shingles", pa.binary()),
                        ("nums", pa.list_(pa.string())), ("names", pa.list_(pa.string())),
                        ("stage3_settings", pa.string())])

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        cols = {c: batch.column(c).to_pylist() for c in ("id", "lang", "simhash_w", "mh_bands")}
        n = batch.num_rows
        derive = rows_to_derive(batch)
        shingles, nums, names = [None] * n, [None] * n, [None] * n
        if CARRIED in batch.schema.names:
            kept = np.flatnonzero(batch.column(CARRIED).fill_null(False).to_numpy(zero_copy_only=False))
            for name, target in (("shingles", shingles), ("nums", nums), ("names", names)):
                for i, v in zip(kept, batch.column(CARRIED_COLUMNS[name]).take(kept).to_pylist()):
                    target[i] = v
        if len(derive):
            sub = batch.take(pa.array(derive))
            feats = features_of(pair_features, sub.column("id").to_pylist(), sub.column("lang").to_pylist(),
                                sub.column("title").to_pylist(), sub.column("body").to_pylist())
            for i, f in zip(derive, feats):
                shingles[i], nums[i], names[i] = f.shingle_bytes(), list(f.nums), list(f.names)
        present = [fp is not None for fp in cols["simhash_w"]]
        return pa.RecordBatch.from_pydict({
            "id": cols["id"],
            "sim_buckets": [bucket_codes(lang, fp, bands, sim_conf) if ok else None
                            for ok, lang, fp, bands in zip(present, cols["lang"], cols["simhash_w"], cols["mh_bands"])],
            "shingles": [v if ok else None for ok, v in zip(present, shingles)],
            "nums": [v if ok else None for ok, v in zip(present, nums)],
            "names": [v if ok else None for ok, v in zip(present, names)],
            "stage3_settings": [settings if ok else None for ok in present]}, schema=schema)

    return run, schema


# ---------------------------------------------------------------- the lookup

CANDIDATES_SQL = f"""
SELECT s.i, d.id, d.published_at, {ACTIVE_LINK_COLUMNS}, d.lang, d.simhash_w, d.mh_bands,
       d.shingles, d.nums, d.names
FROM unnest(%(ids)s::bigint[], %(langs)s::text[], %(lo)s::int[], %(hi)s::int[]) WITH ORDINALITY
     AS s(pid, lang, lo, hi, i)
CROSS JOIN LATERAL (
    SELECT x.id, x.published_at, x.lang, x.simhash_w, x.mh_bands, x.shingles, x.nums, x.names
    FROM documents x
    WHERE x.sim_buckets && (%(codes)s::bigint[])[s.lo:s.hi] AND x.lang IS NOT DISTINCT FROM s.lang
      AND x.id <> s.pid) d
{ACTIVE_LINK_JOINS}
"""
FEATURES_SQL = "SELECT id, shingles, nums, names FROM documents WHERE id = ANY(%(ids)s)"


@dataclass
class _Seen:
    """A document the lookup compared: enough to pair it, verify it and follow it to its canonical."""

    id: int
    lang: str | None
    fp: int
    bands: list[int] | None
    features: Features
    canonical: tuple[int, tuple] | None     # (id, order) it stands for at stage 3; None: suppressed earlier


@dataclass
class Memory:
    """The batch's earlier probes that reached stage 3, found by bucket code."""

    by_code: dict[int, list[_Seen]] = field(default_factory=dict)
    features: dict[int, Features] = field(default_factory=dict)    # every probe's, for scoring


class SimhashLookup:
    name = NAME

    def __init__(self, conf: "Config"):
        self.sim_conf = conf.simhash
        self.pair_features = PairFeatures(conf)
        self.settings = settings_digest(conf)

    def memory(self) -> Memory:
        return Memory()

    def _prepared(self, probes: Sequence[Probe]) -> None:
        """Features and bucket codes of each probe (kept in probe.extra: --insert stores them)."""
        todo = [p for p in probes if NAME not in p.extra]
        if not todo:
            return
        # Prepare's kernel already computed the shingle sets (Preparer.rows' set_shingles: the same
        # keys_batch pass over the same content key and set features as PairFeatures.of_keys), so
        # only the numbers and names are left to find; probes keyed some other way go the long way.
        keyed = [p for p in todo if p.keys.get("set_shingles") is not None and p.keys.get("content_key") is not None]
        feats = {id(p): features_with_shingles(p.keys["set_shingles"], p.keys["content_key"]) for p in keyed}
        rest = [p for p in todo if id(p) not in feats]
        if rest:
            keys = [p.keys.get("content_key") for p in rest]
            computed = features_of(self.pair_features, [p.id for p in rest], [p.keys.get("lang") for p in rest],
                                   [p.keys.get("title") for p in rest], [p.keys.get("body") for p in rest],
                                   keys if all(k is not None for k in keys) else None)
            feats.update((id(p), f) for p, f in zip(rest, computed))
        for p in todo:
            k = p.keys
            p.extra[NAME] = (feats[id(p)], bucket_codes(k.get("lang"), k.get("simhash_w"), k.get("mh_bands"),
                                                        self.sim_conf))

    def _stored_candidates(self, conn, probes: list[Probe]) -> dict[int, list[_Seen]]:
        """Per probe index: the stored documents that share a bucket code with it."""
        codes, lo, hi = [], [], []
        for p in probes:
            lo.append(len(codes) + 1)
            codes.extend(p.extra[NAME][1])
            hi.append(len(codes))
        rows = conn.execute(CANDIDATES_SQL, {"ids": bigint_array(p.id for p in probes),
                                             "langs": [p.keys.get("lang") for p in probes],
                                             "lo": bigint_array(lo), "hi": bigint_array(hi), "codes": bigint_array(codes)})
        out: dict[int, list[_Seen]] = {}
        for i, doc_id, published, l_stage, l_canon, c_published, lang, fp, bands, shingles, nums, names in rows:
            if fp is None:
                continue
            stored = stored_of(doc_id, published, l_stage, l_canon, c_published)
            out.setdefault(i - 1, []).append(_Seen(doc_id, lang, fp, bands, Features.from_stored(shingles, nums, names),
                                                   canonical_at(NAME, stored)))
        return out

    def find(self, conn, probes: Sequence[Probe], memory: Memory) -> dict[int, LiveHit]:
        todo = [p for p in probes if p.keys.get("simhash_w") is not None]
        self._prepared(todo)
        stored = self._stored_candidates(conn, todo) if todo else {}
        # 1. Each probe's candidate pairs: stored documents, and probes before it (earlier calls'
        #    from memory, this call's as they come). A probe's canonical is not known yet here.
        here: list[_Seen] = []
        pairs: list[tuple[int, _Seen | int]] = []          # (probe index, stored/remembered doc or probe index)
        local: dict[int, list[int]] = {}
        by_code = memory.by_code
        for i, p in enumerate(todo):
            k, (feats, codes), pid = p.keys, p.extra[NAME], p.id
            seen: dict[int, _Seen | int] = {s.id: s for s in stored.get(i, ())}
            # Most probes share none of their ~35 codes with an earlier probe: two set intersections
            # (in C) say so before any per-code work. Where some are shared, the codes are walked in
            # their order as before, so candidates are met in the same order.
            remembered, earlier = by_code.keys() & codes, local.keys() & codes
            if remembered or earlier:
                for code in codes:
                    if code in remembered:
                        for s in by_code[code]:
                            seen.setdefault(s.id, s)
                    if code in earlier:
                        for j in local[code]:
                            seen.setdefault(here[j].id, j)
            for other in seen.values():
                o = here[other] if isinstance(other, int) else other
                if o.id != pid and (isinstance(other, int) or o.canonical is not None) and batch_pairs(
                        k.get("lang"), k["simhash_w"], k.get("mh_bands"), o.lang, o.fp, o.bands, self.sim_conf):
                    pairs.append((i, other))
            here.append(_Seen(pid, k.get("lang"), k["simhash_w"], k.get("mh_bands"), feats, None))
            for code in codes:
                local.setdefault(code, []).append(i)
        # 2. Every pair verified at once, with the batch's measures and thresholds.
        ok = np.zeros(0, bool)
        if pairs:
            right = [here[o].features if isinstance(o, int) else o.features for _, o in pairs]
            ok = passes([todo[i].keys.get("lang") for i, _ in pairs],
                        pair_measures([todo[i].extra[NAME][0] for i, _ in pairs], right), self.sim_conf)
        # 3. In input order, each probe links to the earliest canonical its verified pairs reach.
        reached: dict[int, list[tuple[int, tuple]]] = {}
        # The batch's own features are read through, not copied: memory grows with the whole call.
        known: ChainMap[int, Features] = ChainMap({}, memory.features)
        for (i, other), good in zip(pairs, ok):
            if good:
                reached.setdefault(i, []).append(other)
            if not isinstance(other, int):
                known[other.id] = other.features
        chosen: dict[int, tuple[Probe, int]] = {}
        for i, p in enumerate(todo):
            options = [here[o].canonical if isinstance(o, int) else o.canonical for o in reached.get(i, ())]
            options = [c for c in options if c[0] != p.id]
            best = min(options, key=lambda c: c[1]) if options else None
            if best is not None:
                chosen[p.id] = (p, best[0])
            here[i].canonical = best if best is not None else (p.id, p.order)
            memory.features[p.id] = here[i].features
            for code in p.extra[NAME][1]:
                memory.by_code.setdefault(code, []).append(here[i])
        return self._scored(conn, chosen, known)

    def _scored(self, conn, chosen: dict[int, tuple[Probe, int]],
                known: "ChainMap[int, Features]") -> dict[int, LiveHit]:
        """Each chosen link scored by the probe's Jaccard with its canonical (fetching canonicals
        that were not among the candidates: members link to them, the probe need not)."""
        missing = sorted({c for _, c in chosen.values() if c not in known})
        if missing:
            for doc_id, shingles, nums, names in conn.execute(FEATURES_SQL, {"ids": missing}):
                known[doc_id] = Features.from_stored(shingles, nums, names)
        chosen = {pid: (p, c) for pid, (p, c) in chosen.items() if c in known}
        if not chosen:
            return {}
        probes, canon = zip(*chosen.values())
        jaccard = pair_measures([p.extra[NAME][0] for p in probes], [known[c] for c in canon])["jaccard"]
        return {p.id: LiveHit(c, float(j)) for p, c, j in zip(probes, canon, jaccard)}

    def claim_keys(self, probes: Sequence[Probe]) -> list[list[int]]:
        """Each probe's bucket codes: a stored candidate shares one with it by definition (CANDIDATES_SQL).
        They are 64-bit mixes salted by language, table and band already, so they serve as claims unchanged."""
        with_keys = [p for p in probes if p.keys.get("simhash_w") is not None]
        self._prepared(with_keys)
        return [list(p.extra[NAME][1]) if p.keys.get("simhash_w") is not None else [] for p in probes]

    def memory_meets(self, memory: Memory, later: Memory, ids: set[int]) -> bool:
        """Whether a probe P of `later` has a verified pair Q in `memory` whose canonical would beat
        P's (any canonical, when P links to nothing): find meets remembered probes through shared
        bucket codes, pairs them by batch_pairs, keeps a pair only when verified, and links P to the
        earliest canonical of its kept pairs, so without such a Q its answer, and the canonical it
        hands on to the probes after it, are those of an empty memory. (Sharing a code is common: four
        of the 1M benchmark's seven later rounds share one with an earlier round; one has a verified
        pair.) memory.features is also read when scoring, by the canonical's id: check --workers
        compares those ids itself."""
        # Keyed by the objects, not the ids: an input may hold one id twice, with different texts.
        pairs: dict[tuple[int, int], tuple[_Seen, _Seen]] = {}
        for code in memory.by_code.keys() & later.by_code.keys():
            for p in later.by_code[code]:
                for q in memory.by_code[code]:
                    if (id(p), id(q)) in pairs or q.canonical is None or q.canonical[0] == p.id:
                        continue
                    linked = p.canonical is not None and p.canonical[0] != p.id
                    if linked and q.canonical[1] >= p.canonical[1]:
                        continue     # not earlier than what P links to: min() keeps P's canonical
                    if batch_pairs(p.lang, p.fp, p.bands, q.lang, q.fp, q.bands, self.sim_conf):
                        pairs[(id(p), id(q))] = (p, q)
        if not pairs:
            return False
        ps, qs = zip(*pairs.values())
        measures = pair_measures([p.features for p in ps], [q.features for q in qs])
        return bool(np.asarray(passes([p.lang for p in ps], measures, self.sim_conf)).any())

    def merge_memory(self, memory: Memory, later: Memory) -> None:
        # Appended in round order, as find appends; a later probe's features replace an earlier one's
        # of the same id, as find's assignment does. Most codes are new: later's own list is taken
        # over (later is spent), not copied: a round's ~4,700 fresh lists fed the parent's garbage
        # collector, which then took more CPU than the merge itself.
        by_code = memory.by_code
        for code, seen in later.by_code.items():
            mine = by_code.get(code)
            if mine is None:
                by_code[code] = seen
            else:
                mine.extend(seen)
        memory.features.update(later.features)

    def stored_columns(self, probes: Sequence[Probe]) -> list[dict[str, Any]]:
        with_keys = [p for p in probes if p.keys.get("simhash_w") is not None]
        self._prepared(with_keys)
        return [stored_values(*p.extra[NAME], self.settings) if p.keys.get("simhash_w") is not None
                else dict.fromkeys(STORED) for p in probes]
