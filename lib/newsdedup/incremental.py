"""Incremental runs: a new slice deduplicated against everything already in the output.

A backfill runs in slices (a year at a time, ...). Each run:

1. reads the stored keys of the documents already in <output>/documents
   (url_hash, content_hash, simhash_w and mh_bands, lang, published_at; text
   only for the documents it reruns): nothing is fingerprinted again, and
   stage 4 reuses the stored vectors whose text is unchanged (semantic.vectors_for);
2. finds the documents the slice can change (`closure`, below) and runs the
   cascade over those only, so the link set it computes for them is exactly
   the one a single run over the whole archive would compute;
3. diffs that link set with the active links of the same documents, in one
   MERGE: links no longer computed are superseded (superseded_at,
   superseded_by_run stamped, never deleted), new ones inserted, and a link
   superseded earlier that is computed again is made active again (its stamp
   cleared) rather than written twice under the same key. A link computed
   again with another score (a cluster's best edge changes as members arrive)
   keeps its row and linked_at and takes the new score. Links of documents
   outside the closure get no action.

So a new document older than an existing canonical becomes the canonical: the
old links to the former canonical are superseded and the new links point to
the newcomer. Reverted links stay reverted (a revert is a person's decision).

Why the closure is exact
------------------------
Every relation the cascade reads is a property of a PAIR of documents,
whatever else the archive holds: same url_hash (stage 1); same content_hash
(stage 2); stage 3's "candidate and verified" (same language, within
max_hamming bits of simhash_w on a Manku table, or sharing a MinHash band
within minhash_max_hamming bits, and passing verify's thresholds); stage 4's
"same model, within the window, cosine >= threshold, evidence agrees". Call R
their union. What a full run links a document to depends only on its
connected component under R: the exact
groups, the stage-3 clusters and stage 4's earliest-canonical groups all lie
inside it, and so do the canonical (earliest by order_key), the scores and
via_id, and which member an earlier stage suppressed. So with A = the closure
under R of the slice over slice ∪ stored, a run over A gives A's documents the
links of a full run, and every document outside A keeps the links it has (by
induction, those of a full run over the stored archive, whose components
outside A are unchanged). The closure may be larger than needed (a superset
only costs time): it follows

- url_hash and content_hash equal to a frontier document's (key joins);
- a stage-3 bucket shared with a frontier document (candidates.code_rows: a Manku table
  within max_hamming bits, or a MinHash band within minhash_max_hamming bits, in the same
  language) and the pair verified as
  stage 3 verifies it (verify.py; the text is read for those pairs' documents only): R's
  stage-3 pairs themselves;
- with stage 4 on, a stored vector of the configured model_version within
  semantic.window_hours of a frontier vector with a cosine at or above the
  lowest threshold of any language pair (the evidence is not checked). The
  frontier's vectors are embedded first when missing, so stage 4 then reuses
  them. A document outside A without a vector is one stage 4 never compared
  in the earlier runs (stages 1-3 suppressed it, or it has no text, no date or
  an uncovered language) and its stages 1-3 component did not change, so stage
  4 does not compare it now either;
- every document of an active link touching the frontier, and the other
  members of that link's canonical (cheap insurance: the links are on the driver).

Each round takes the documents added by the previous one as its frontier and
stops when a round adds none (incremental.rounds, incremental.affected_documents
in the report).

Stored components: one pass instead of a pass per round
-------------------------------------------------------
Every run stores, for the documents it computed links for, their connected
component under the stages 1-3 part of R (<output>/components, component_rows):
its links of stages 1-3 span it. A run over A rewrites A's rows; the others keep
theirs, which stay true because A is closed. So the closure needs one pass over
the stored keys, from the slice: what it reaches brings its whole stored component
(Components.expand), and a stored pair relation inside a component needs no pass.
That holds for the relations of documents whose part in the cascade cannot change
when a slice arrives, and the cases where it can are these:

- a stage-1 duplicate stays one unless its URL group loses its first document,
  which only a slice replacing stored documents does (a re-crawl, or
  input.id_collision: replace): such a slice takes rounds;
- a stage-2 duplicate becomes its text's first when a newcomer takes its
  canonical's URL group over. Its text is its canonical's, so its stage-3 pairs
  are its canonical's, in the same component, unless the two languages differ
  (stage 3 pairs within a language only): then it is stored unsettled, and when
  reached it takes a pass of its own;
- stage 4's pairs are not in the components: with stage 4 on, each round still
  asks stage 4 for the frontier's neighbours (and follows the active links) as
  above, and expands what they reach by component.

A stored document without a component (an output written before them, or a run
that died between its documents and its components) sends the whole closure to
rounds, as does input.closure: rounds. incremental.keys_passes and
incremental.by_components in the report say which it took.

Where it is not exact: a stage-3 bucket over simhash.max_band_bucket members is
cut into chunks of consecutive fingerprints, and which chunk a document falls
in depends on every member of the bucket; over A the bucket holds fewer
members than over the archive, so split buckets (flagged
simhash_bucket_split on their documents) may pair differently than a full run.
Stage 4 after a change of model_version: documents outside A have no vector of
the new version, so their pairs are not searched; rerun the archive
(input.incremental: archive) or backfill the vectors first. A change of stage
4's thresholds or window needs an archive run too. input.incremental: archive runs the cascade over the
whole archive as before (the benchmark's baseline, and a way to converge).
Stages 1-3 are guarded: the job refuses a slice whose settings differ from those
the stored keys, links and components were computed with (job._settings_to_record).

Work: the closure keeps the stored keys (no text) in memory from its second pass on. A pass is one scan
of them against the frontier's keys and bucket codes, broadcast (round_hits, numpy); only pairs
to documents not yet in the closure are verified; the closure's ids, the stored components and
the active links are numpy arrays on the driver. The stages, the link diff and the documents MERGE see only A and the
slice. A closure of more than MAX_AFFECTED documents gives up and takes the whole archive.
The stored text is read twice (the new pairs' stored side's features: the slice's side has prepare's,
and a run that loads Postgres reads the stored side's there where Postgres holds them for the same
text and settings, _with_stored_features, so that read skips them, and is skipped when none is left;
then A's rows); where the slice's own days
name few of the documents table's files (a backfill run in time order), the second read is
filtered by A's days, so Delta skips the other files (read_by_date, incremental.read_by_date in
the report).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Callable

from delta.tables import DeltaTable
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from .clustering import component_labels, cut_lineage, rows_in
from .io import layout, store
from .stages.simhash.candidates import code_bitmap, code_rows, code_rows_passing
from .stages.simhash.verify import pair_features, similarity, verified

if TYPE_CHECKING:
    from .config import Config, SimhashConfig

SUPERSEDE_FIELDS = (T.StructField("superseded_at", T.TimestampType(), True),
                    T.StructField("superseded_by_run", T.StringType(), True))
TABLE_SCHEMA = T.StructType(list(store.LINKS_SCHEMA.fields) + list(SUPERSEDE_FIELDS))

# What write_links does to each link, decided once per link (link_actions) and read by both the
# counts and the MERGE. A link that needs nothing (active and unchanged, reverted, or already
# superseded and not computed) gets no action and is not in the MERGE's source at all.
INSERT, SUPERSEDE, REVIVE, RESCORE = "insert", "supersede", "revive", "rescore"
ACTIONS = (INSERT, SUPERSEDE, REVIVE, RESCORE)
# The run report's names for them (links.new, links.superseded, ...).
REPORTED_AS = {INSERT: "new", SUPERSEDE: "superseded", REVIVE: "revived", RESCORE: "rescored"}


@dataclass
class Archive:
    """What a run deduplicates: its slice against the documents already stored."""

    # The slice's accepted documents plus the stored ones they do not replace. Not materialised:
    # read once per closure round (keys only) and once to cut out the affected documents.
    documents: DataFrame
    accepted: DataFrame          # the slice's documents that go on (to the stages and the documents table)
    collisions: DataFrame | None  # the slice's documents refused by the id-collision policy (id, url, ...)
    counts: dict[str, int]       # existing_documents, recrawled, id_collisions (absent on a first run)
    stored: bool = False         # whether the output held documents (an incremental run)
    # The stored documents this run keeps (every stored id but those the slice replaces), sorted.
    kept_ids: np.ndarray | None = None
    # Every accepted document's id is new to the documents table, and no earlier attempt of this run
    # wrote any: the documents write may append instead of MERGE (store.merge_documents).
    all_new: bool = True


# Up to this many rows a frontier (or a slice's ids) is broadcast to the stored side's scan; above it
# (a first slice as large as the archive) the joins shuffle instead.
BROADCAST_ROWS = 200_000


def _small(df: DataFrame, n: int, limit: int = BROADCAST_ROWS) -> DataFrame:
    """df (n rows, or n documents) broadcast when n <= limit."""
    return F.broadcast(df) if n <= limit else df


def same_article(new_url_hash: Column, old_url_hash: Column, new_url: Column, old_url: Column) -> Column:
    """One article seen twice: the same canonical URL (url_hash), or, where neither URL could be
    normalised, the same stored URL string."""
    return (new_url_hash == old_url_hash) | (new_url_hash.isNull() & old_url_hash.isNull() & new_url.eqNullSafe(old_url))


def with_stored(spark: SparkSession, docs: DataFrame, output: str | None,
                id_collision: str = "quarantine", run_id: str | None = None) -> Archive:
    """The archive for this run: docs against the stored documents of output (same columns).

    A document of docs whose id is already stored is a re-crawl when it is the same article
    (same_article): it replaces the stored row (Delta's history keeps the old one). Otherwise
    another article reuses the id, and id_collision decides: "quarantine" keeps the stored one
    and hands the newcomer back in `collisions`; "replace" lets it replace the stored one.

    run_id: the run's own documents, written by an earlier attempt of it that died after its
    Delta write had begun, are not stored documents: a resumed first run would otherwise become
    an incremental run over its own slice (a closure step, and stage 4 embedding the documents
    the closure compares), and end with other outputs than the run nobody interrupted.

    The stored ids are read once, as an array (the id column alone; 1M ids: 1.0-1.6 s), and answer
    every question asked of them here and by the closure (Archive.kept_ids, which spares the closure
    a scan of its own); the stored URLs are read only for the slice's ids that are stored, and a
    backfill's slices mostly bring none.
    """
    path = store.table_path(output, "documents") if output else None
    if path is None or not store.exists(spark, path):
        return Archive(docs, docs, None, {})
    stored = store.read(spark, output, "documents")
    own = (F.col("run_id").eqNullSafe(F.lit(run_id)) if run_id is not None and "run_id" in stored.columns
           else F.lit(False))
    stored_ids, own_rows = _stored_ids(stored.select("id", own.alias("own")))
    stored = stored.where(~own)
    if not len(stored_ids):   # a first run (perhaps resumed after its documents were written)
        return Archive(docs, docs, None, {}, all_new=not own_rows)
    missing = [c for c in docs.columns if c not in stored.columns]
    if missing:
        raise ValueError(f"{path} lacks columns {missing}: written by an older version; rerun the whole archive")
    slice_ids = _column(docs.select("id"), "id")
    n_docs = len(slice_ids)
    shared = np.intersect1d(slice_ids, stored_ids)
    counts = {"recrawled": 0, "id_collisions": 0}
    collisions, replaced = None, shared
    if len(shared):
        ids = F.broadcast(_ids_frame(spark, shared))
        # Collected at once: the job later rewrites the documents table these rows come from.
        flags = (docs.select("id", "url_hash", "url").join(ids, "id", "left_semi").alias("n")
                 .join(stored.select("id", "url_hash", "url").join(ids, "id", "left_semi").alias("o"), "id")
                 .select("id", F.coalesce(same_article(F.col("n.url_hash"), F.col("o.url_hash"), F.col("n.url"),
                                                       F.col("o.url")), F.lit(False)).alias("same"))
                 .toArrow())
        same = np.asarray(flags["same"].to_numpy(zero_copy_only=False), bool)
        refused_ids = np.asarray(flags["id"].to_numpy(), np.int64)[~same]
        counts = {"recrawled": int(same.sum()), "id_collisions": len(refused_ids)}
        if id_collision == "quarantine" and len(refused_ids):
            refused = F.broadcast(_ids_frame(spark, refused_ids))
            collisions = docs.join(refused, "id", "left_semi")
            docs = docs.join(refused, "id", "left_anti")
            replaced = np.setdiff1d(shared, refused_ids)
    kept_ids = np.setdiff1d(stored_ids, replaced)
    old = stored.join(_small(docs.select("id"), n_docs), "id", "left_anti").select(*docs.columns)
    counts["existing_documents"] = len(kept_ids)
    return Archive(docs.unionByName(old), docs, collisions, counts, stored=True, kept_ids=kept_ids,
                   all_new=not len(replaced) and not own_rows)


def _stored_ids(rows: DataFrame) -> tuple[np.ndarray, bool]:
    """The ids of rows (id, own) whose own flag is false, and whether any row's is true."""
    table = rows.toArrow()
    if not table.num_rows:
        return np.zeros(0, np.int64), False
    own = np.asarray(table["own"].to_numpy(zero_copy_only=False), bool)
    return np.asarray(table["id"].to_numpy(), np.int64)[~own], bool(own.any())


# ---------------------------------------------------------------- stored components

# <output>/components: one row per stored document. component: the smallest id of its connected
# component under the stages 1-3 relations as the run that last reran it computed them (url and
# content groups, stage 3's verified pairs: its links span them); settled: whether every stages
# 1-3 pair the document can take part in is inside that component (see component_rows).
COMPONENTS_SCHEMA = T.StructType([T.StructField("id", T.LongType(), False),
                                  T.StructField("component", T.LongType(), False),
                                  T.StructField("settled", T.BooleanType(), False)])
LABELLED_STAGES = ("url", "content", "simhash")


@dataclass(frozen=True)
class Components:
    """The stored components on the driver (1M documents: 17 MB), for the closure to expand by."""

    ids: np.ndarray          # sorted
    component: np.ndarray    # by ids
    settled: np.ndarray      # by ids
    by_component: np.ndarray  # indices into ids, sorted by component
    sorted_components: np.ndarray  # component[by_component]

    @classmethod
    def of(cls, table: pa.Table) -> "Components":
        ids = np.asarray(table["id"].to_numpy(), np.int64)
        order = np.argsort(ids, kind="stable")
        ids, comp = ids[order], np.asarray(table["component"].to_numpy(), np.int64)[order]
        settled = np.asarray(table["settled"].to_numpy(zero_copy_only=False), bool)[order]
        by_component = np.argsort(comp, kind="stable")
        return cls(ids, comp, settled, by_component, comp[by_component])

    def covers(self, ids: np.ndarray) -> bool:
        """Whether every one of ids has a component."""
        return bool(rows_in(self.ids, ids)[1].all())

    def expand(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(every member of the components of ids, and ids themselves; those of them that need a pass
        over the stored keys: the unsettled members, and ids without a component)."""
        ids = np.asarray(ids, np.int64)
        if not len(self.ids) or not len(ids):
            return ids, ids
        at, known = rows_in(self.ids, ids)
        comps = np.unique(self.component[at[known]])
        lo = np.searchsorted(self.sorted_components, comps, "left")
        rows = self.by_component[_spans(lo, np.searchsorted(self.sorted_components, comps, "right") - lo)]
        members = np.union1d(self.ids[rows], ids)
        return members, np.union1d(self.ids[rows[~self.settled[rows]]], ids[~known])


def _spans(lo: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The indices lo[0] .. lo[0]+n[0]-1, lo[1] .. lo[1]+n[1]-1, ... in one array: the rows of a
    sorted array that equal each looked-up value (lo, n from its searchsorted left and right)."""
    return np.repeat(lo, n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)


def read_components(spark: SparkSession, output: str) -> Components | None:
    """The components stored in output (None: none stored, an output written before them)."""
    path = store.table_path(output, "components")
    if not store.exists(spark, path):
        return None
    return Components.of(spark.read.format("delta").load(path).select("id", "component", "settled").toArrow())


def component_rows(spark: SparkSession, ids: DataFrame, links: DataFrame, docs: DataFrame) -> DataFrame:
    """The components rows of the documents a run computed links for (ids: all of them, or its
    closure; links: the links it computed; docs: id, lang of at least those documents).

    A component spans the run's stages 1-3 links, which span the relations a later slice can meet
    among these documents: stage 1 groups every document by URL, stage 2 the stage-1 survivors by
    content, and stage 3 clusters the stage-2 survivors by connected components of their verified
    pairs. A stage-1 duplicate never takes part in a later stage unless a slice replaces a stored
    document (the closure then takes rounds). A stage-2 duplicate may (a slice's document can take
    its canonical's URL group over): its text is its canonical's, so its stage-3 pairs are its
    canonical's unless their languages differ, which leaves it unsettled. Stage 4's relation is
    left out: the closure follows it round by round.
    """
    kept = links.where(F.col("stage").isin(*LABELLED_STAGES)).select("duplicate_id", "canonical_id", "stage")
    lang = F.coalesce("lang", F.lit("default"))   # stage 3 pairs a null language with null ones
    dup_lang = docs.select(F.col("id").alias("duplicate_id"), lang.alias("l_dup"))
    can_lang = docs.select(F.col("id").alias("canonical_id"), lang.alias("l_can"))
    unsettled = (kept.where(F.col("stage") == "content").join(dup_lang, "duplicate_id").join(can_lang, "canonical_id")
                 .where(F.col("l_dup") != F.col("l_can")).select(F.col("duplicate_id").alias("id")))
    vertices = _column(ids.select("id"), "id")
    edges = kept.select("duplicate_id", "canonical_id").toArrow()
    labels = component_labels(vertices, np.asarray(edges["duplicate_id"].to_numpy(), np.int64),
                              np.asarray(edges["canonical_id"].to_numpy(), np.int64))
    settled = ~np.isin(vertices, _column(unsettled, "id"))
    table = pa.table({"id": pa.array(vertices, pa.int64()), "component": pa.array(labels, pa.int64()),
                      "settled": pa.array(settled)})
    return spark.createDataFrame(table, COMPONENTS_SCHEMA)


def write_components(spark: SparkSession, rows: DataFrame, path: str, scope: DataFrame | None) -> None:
    """Make the table at path hold rows for their documents: the whole table (scope None, a run over
    the archive) or the rows of scope's ids (a closure) replaced; one overwrite, so the table never
    holds half a run. Repeating it (a resumed write) gives the same table."""
    if scope is not None and store.exists(spark, path):
        kept = spark.read.format("delta").load(path).join(scope.select("id"), "id", "left_anti")
        rows = cut_lineage(kept.unionByName(rows.select(*COMPONENTS_SCHEMA.names)))   # read before overwritten
    rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)


# ---------------------------------------------------------------- the closure of a slice

# What a closure pass reads of every document: the keys of stages 1-3's relations (round_hits).
KEY_COLUMNS = ("id", "url_hash", "content_hash", "lang", "simhash_w", "mh_bands")
# What a stored document has in common with the frontier, in a round's hits.
KEY, PAIR = 0, 1      # a shared url_hash or content_hash (b only); a stage-3 candidate pair (a, b)
# b_content: b's content_hash, on PAIR rows (what a stored copy of b's features must have been made from).
HITS_ARROW = pa.schema([("a", pa.int64()), ("b", pa.int64(), False), ("lang", pa.string()),
                        ("kind", pa.int32(), False), ("b_content", pa.string())])
HITS_SCHEMA = from_arrow_schema(HITS_ARROW)
# Above this many affected documents the closure stops and the run takes the whole archive: a slice
# that touches so much of it gains nothing from a closure, and the driver keeps the closure's ids.
MAX_AFFECTED = 2_000_000


@dataclass(frozen=True)
class FrontierIndex:
    """What a closure round looks for in the stored keys, built on the driver from the frontier's keys
    and broadcast: the frontier's url and content hashes, and its bucket codes (candidates.code_rows)
    sorted, each with the frontier row it belongs to."""

    ids: np.ndarray          # frontier ids, by frontier row
    names: np.ndarray        # language (null as "default"), by frontier row
    fps: np.ndarray          # simhash_w as uint64, by frontier row
    codes: np.ndarray        # bucket codes, sorted
    code_row: np.ndarray     # the frontier row of each code
    code_table: np.ndarray   # whether each code is a Manku table's (then max_hamming applies)
    code_bits: np.ndarray    # code_bitmap(codes): each batch's first, cheap test
    max_hamming: np.ndarray  # the language's max_hamming, by frontier row
    minhash_max: np.ndarray  # the language's minhash_max_hamming (the SimHash gate on band codes), by frontier row
    urls: pa.Array           # distinct url_hash
    contents: pa.Array       # distinct content_hash
    affected: np.ndarray     # sorted ids already in the closure: no pair to them needs verifying

    @classmethod
    def of(cls, keys: pa.Table, affected: np.ndarray, sim_conf: "SimhashConfig") -> "FrontierIndex":
        keys = keys.combine_chunks()
        row, code, table = code_rows(keys["lang"].combine_chunks(), keys["simhash_w"].combine_chunks(),
                                     keys["mh_bands"].combine_chunks(), sim_conf)
        order = np.argsort(code, kind="stable")
        names = _names(keys["lang"])
        return cls(ids=keys["id"].to_numpy(), names=names,
                   fps=np.asarray(keys["simhash_w"].fill_null(0).to_numpy(), np.int64).view(np.uint64),
                   codes=code[order], code_row=row[order], code_table=table[order], code_bits=code_bitmap(code),
                   max_hamming=np.array([sim_conf.language(x).max_hamming for x in names], np.int64),
                   minhash_max=np.array([sim_conf.language(x).minhash_max_hamming for x in names], np.int64),
                   urls=pc.unique(keys["url_hash"].combine_chunks().drop_null()),
                   contents=pc.unique(keys["content_hash"].combine_chunks().drop_null()), affected=affected)


def _names(lang) -> np.ndarray:
    return np.asarray(lang.fill_null("default").to_numpy(zero_copy_only=False), object)


def round_hits(index: FrontierIndex, batch: pa.RecordBatch, sim_conf: "SimhashConfig") -> pa.RecordBatch:
    """The stored documents of batch (keys) that one closure round reaches from the frontier:

    - KEY: b shares a url_hash or content_hash with a frontier document (stages 1 and 2 group them);
    - PAIR: (a, b) is a stage-3 candidate pair, a in the frontier and b not yet in the closure: they
      share a bucket code, the same language, and are within max_hamming bits on a Manku table or
      minhash_max_hamming bits on a MinHash band (the batch's candidate rule); the pair is still to be
      verified.
    """
    ids = batch.column("id").to_numpy()
    key_hit = np.zeros(len(ids), bool)
    for column, values in (("url_hash", index.urls), ("content_hash", index.contents)):
        if len(values):
            key_hit |= np.asarray(pc.is_in(batch.column(column), value_set=values).fill_null(False)
                                  .to_numpy(zero_copy_only=False), bool)
    # The bitmap first, as each code is computed (most codes meet nothing), then a binary search of
    # the codes that pass it for the frontier rows of each code met (none for the bitmap's false
    # positives).
    row, code = code_rows_passing(index.code_bits, batch.column("lang"), batch.column("simhash_w"),
                                  batch.column("mh_bands"), sim_conf)
    lo = np.searchsorted(index.codes, code, "left")
    n = np.searchsorted(index.codes, code, "right") - lo
    b_row = np.repeat(row, n)
    at = _spans(lo, n)
    a_row = index.code_row[at]
    names = _names(batch.column("lang"))
    fps = np.asarray(batch.column("simhash_w").fill_null(0).to_numpy(), np.int64).view(np.uint64)
    dist = np.bitwise_count(index.fps[a_row] ^ fps[b_row])
    close = np.where(index.code_table[at], index.max_hamming[a_row], index.minhash_max[a_row]) >= dist
    keep = ((index.names[a_row] == names[b_row]) & close
            & (index.ids[a_row] != ids[b_row]) & ~np.isin(ids[b_row], index.affected))
    a, b, lang = index.ids[a_row[keep]], ids[b_row[keep]], index.names[a_row[keep]]
    content = pc.take(batch.column("content_hash"), pa.array(b_row[keep])).cast(pa.string())
    keys_b = ids[key_hit]
    return pa.RecordBatch.from_pydict({
        "a": pa.array(np.concatenate((np.full(len(keys_b), -1), a)), pa.int64(),
                      mask=np.concatenate((np.ones(len(keys_b), bool), np.zeros(len(a), bool)))),
        "b": np.concatenate((keys_b, b)).astype(np.int64),
        "lang": pa.array([None] * len(keys_b) + lang.tolist(), pa.string()),
        "kind": np.concatenate((np.full(len(keys_b), KEY), np.full(len(a), PAIR))).astype(np.int32),
        "b_content": pa.concat_arrays([pa.nulls(len(keys_b), pa.string()), content])},
        schema=HITS_ARROW)


def linked_ids(duplicate: np.ndarray, canonical: np.ndarray, frontier: np.ndarray) -> np.ndarray:
    """Ids of every active link touching frontier, of its canonical and of the canonical's other
    duplicates (duplicate, canonical: the active links as arrays)."""
    touching = np.isin(duplicate, frontier) | np.isin(canonical, frontier)
    canonicals = np.unique(canonical[touching])
    return np.union1d(canonicals, duplicate[np.isin(canonical, canonicals)])


def _ids_frame(spark: SparkSession, ids: np.ndarray) -> DataFrame:
    return spark.createDataFrame(pa.table({"id": pa.array(np.asarray(ids, np.int64))}))


def _column(df: DataFrame, name: str) -> np.ndarray:
    table = df.toArrow()
    return np.asarray(table[name].to_numpy(), np.int64) if table.num_rows else np.zeros(0, np.int64)


Near = Callable[[DataFrame], DataFrame]   # frontier documents (archive rows) -> ids stage 4 may pair them with


def closure(docs: DataFrame, seeds: DataFrame, conf: "Config", links: DataFrame | None,
            near: Near | None = None, components: "Components | None" = None,
            carried: DataFrame | None = None, stored_features: "StoredFeatures | None" = None,
            stats: dict | None = None) -> tuple[DataFrame, list[int], int]:
    """The ids of docs reachable from seeds' ids under the pair relations (module docstring), the
    documents each round added (the seeds first), and the passes made over the stored keys.

    docs: the archive's rows (at least id and KEY_COLUMNS, and what `near` reads). seeds: the slice's
    rows of docs (KEY_COLUMNS): a pass reads its frontier's keys there when the frontier is theirs.
    links: the active links (None: none stored). near: stage 4's neighbours, when on. carried: the
    slice's pair features as prepare computed them (verify.pair_features), or None.
    components: the stored components (read_components), or None for rounds.
    stored_features: where the stored side's features may be read instead of derived from its text
    (StoredFeatures; None: always from the text). stats: gets incremental.features_from_postgres and
    incremental.features_from_text, the stored candidates' features read each way.

    A pass over the stored keys (kept in memory from the second pass on) tests each document against a
    broadcast FrontierIndex with numpy (round_hits); the new candidate pairs alone are then verified
    on the two documents' text (pair features), as stage 3 verifies them. With components, what a
    pass reaches brings its whole stored component, whose stages 1-3 relations are already in it:
    only its unsettled members (Components) need another pass, and stage 4's neighbours another
    round. Without, every round is a pass. The closure's ids and the active links live on the
    driver: both are small next to the archive. More than MAX_AFFECTED ids: the whole archive
    (exact too, and cheaper than such a closure).
    """
    spark = docs.sparkSession
    # Kept in memory from the second pass on: by components most closures take one pass, which
    # would pay for building the cache (1M documents: about 7 s) and use it once.
    keys = docs.select(*KEY_COLUMNS)
    seed_keys = seeds.select(*KEY_COLUMNS)
    link_pairs = None
    # With components, the stages 1-3 links lie inside them: the active links add stage 4's alone.
    if links is not None and (components is None or near is not None):
        table = links.select("duplicate_id", "canonical_id").toArrow()
        link_pairs = (np.asarray(table["duplicate_id"].to_numpy(), np.int64),
                      np.asarray(table["canonical_id"].to_numpy(), np.int64))
    frontier = seed_ids = np.unique(_column(seeds.select("id"), "id"))
    affected, sizes, passes, to_pass = frontier, [len(frontier)], 0, frontier
    try:
        while len(frontier) and len(affected) <= MAX_AFFECTED:
            found = []
            if len(to_pass):
                if passes == 1:
                    keys = keys.persist(StorageLevel.MEMORY_AND_DISK)
                rows = frontier_keys(spark, keys, seed_keys, seed_ids, to_pass)
                found.append(_reached(spark, keys, rows, docs, affected, conf, carried, seed_ids, stored_features,
                                      stats))
                passes += 1
            if link_pairs is not None:
                found.append(linked_ids(*link_pairs, frontier))
            if near is not None:
                found.append(_column(near(docs.join(F.broadcast(_ids_frame(spark, frontier)), "id", "left_semi")),
                                     "id"))
            reached = np.setdiff1d(np.unique(np.concatenate(found)), affected) if found else np.zeros(0, np.int64)
            if components is not None:
                members, unsettled = components.expand(reached)
                frontier = np.setdiff1d(members, affected)
                to_pass = np.intersect1d(unsettled, frontier)
            else:
                frontier = to_pass = reached
            sizes.append(len(frontier))
            affected = np.union1d(affected, frontier)
        if len(affected) > MAX_AFFECTED:   # every document: the seeds, then all the others
            everything = cut_lineage(docs.select("id"))
            return everything, [sizes[0], everything.count() - sizes[0]], passes
        return cut_lineage(_ids_frame(spark, affected)), sizes[:-1] if len(sizes) > 1 else sizes, passes
    finally:
        if keys.is_cached:
            keys.unpersist()


def frontier_keys(spark: SparkSession, keys: DataFrame, seed_keys: DataFrame, seed_ids: np.ndarray,
                  frontier: np.ndarray) -> pa.Table:
    """The key rows (KEY_COLUMNS) of frontier's (not empty) documents: those of the slice (seed_ids) from its own
    rows, only the others from the archive's keys. The slice's rows are the archive's (docs is the
    slice plus the stored documents it does not replace), and a first pass's frontier is the slice:
    a scan of the whole archive's keys for it cost 1.7-3.4 s at 1M (the slice's rows: 0.2 s)."""
    own = np.isin(frontier, seed_ids)
    parts = []
    for source, ids in ((seed_keys, frontier[own]), (keys, frontier[~own])):
        if len(ids):
            parts.append(source.join(F.broadcast(_ids_frame(spark, ids)), "id", "left_semi").toArrow())
    # The two sides may differ in a field's nullability only (the archive is a union); the index reads values.
    schema = pa.schema([f.with_nullable(True) for f in parts[0].schema])
    return pa.concat_tables([p.cast(schema) for p in parts])


def _reached(spark: SparkSession, keys: DataFrame, rows: pa.Table, docs: DataFrame,
             affected: np.ndarray, conf: "Config", carried: DataFrame | None = None,
             seed_ids: np.ndarray | None = None, stored_features: "StoredFeatures | None" = None,
             stats: dict | None = None) -> np.ndarray:
    """The ids one round reaches through keys and verified stage-3 pairs from its frontier (rows:
    the frontier's keys, frontier_keys; carried: the slice's features, read instead of derived;
    stored_features, stats: see closure)."""
    sim_conf = conf.simhash
    index = spark.sparkContext.broadcast(FrontierIndex.of(rows, affected, sim_conf))

    def run(batches):
        for batch in batches:
            yield round_hits(index.value, batch, sim_conf)

    try:
        hits = cut_lineage(keys.mapInArrow(run, HITS_SCHEMA))
        by_key = _column(hits.where(F.col("kind") == KEY).select(F.col("b").alias("id")), "id")
        found = cut_lineage(hits.where(F.col("kind") == PAIR).select("a", "b", "lang", "b_content").distinct())
        if found.isEmpty():
            return by_key
        pairs = found.select("a", "b", "lang")
        ids = cut_lineage(pairs.select(F.col("a").alias("id")).unionByName(pairs.select(F.col("b").alias("id")))
                          .distinct())
        # A pair's slice side (a first pass's every a) has its features from prepare; the stored
        # side's are read from Postgres where it holds them for the same text and settings
        # (pg_documents.verification_features), else derived from the stored text.
        carried = _with_stored_features(spark, found, carried, seed_ids, stored_features, stats)
        # Broadcast: a shuffle join would move every stored document's text to find these few.
        # Not read by date (restrict is): the candidates, verified or not, lie on every day of the
        # archive (a 1% slice of 11 days at 1M: 1,097 days), so the dates' scan would be lost time.
        n_ids = ids.count()
        feats = cut_lineage(pair_features(docs, ids, conf, carried, broadcast=n_ids <= BROADCAST_ROWS))
        near = _column(verified(similarity(pairs, feats, "a", "b"), sim_conf).select(F.col("b").alias("id")), "id")
        return np.concatenate((by_key, near))
    finally:
        index.unpersist()


# The stored verification features of documents (Arrow: id, content_hash, lang with null as "default")
# wherever they are held for exactly that text and the run's settings, in prepare's carried form
# (pg_documents.verification_features); the others are left out.
StoredFeatures = Callable[[pa.Table], pa.Table]


def _with_stored_features(spark: SparkSession, found: DataFrame, carried: DataFrame | None,
                          seed_ids: np.ndarray | None, stored_features: StoredFeatures | None,
                          stats: dict | None) -> DataFrame | None:
    """carried plus the stored features of the candidate pairs' stored side (found: a, b, lang,
    b_content) that stored_features holds; the counts of stored candidates read that way and of
    those left to their text go into stats."""
    wanted = found.select(F.col("b").alias("id"), F.col("b_content").alias("content_hash"), "lang").distinct().toArrow()
    ids = np.asarray(wanted["id"].to_numpy(), np.int64)
    if seed_ids is not None:   # the slice's own documents have prepare's features in carried
        wanted = wanted.filter(pa.array(~np.isin(ids, seed_ids)))
    # Above BROADCAST_ROWS the pairs' features are joined by a shuffle anyway, and a driver holding
    # that many documents' features to hand them to the executors would cost more than it saves.
    held = (stored_features(wanted) if stored_features is not None and 0 < wanted.num_rows <= BROADCAST_ROWS
            else None)
    n_held = held.num_rows if held is not None else 0
    if stats is not None:
        stats["incremental.features_from_postgres"] = stats.get("incremental.features_from_postgres", 0) + n_held
        # One row per stored document: its content_hash and language follow from its id.
        stats["incremental.features_from_text"] = (stats.get("incremental.features_from_text", 0)
                                                   + wanted.num_rows - n_held)
    if not n_held:
        return carried
    rows = spark.createDataFrame(held).select(F.col("id").cast("long"), "shingles", "nums", "names")
    return rows if carried is None else carried.unionByName(rows)


# ---------------------------------------------------------------- reading stored text by its days

# documents is clustered by published_at (io/layout.py): a filter on it reads only the files whose
# min/max statistics can hold a matching row. Cutting the affected documents' rows out of the
# archive (restrict) read every stored text otherwise, though a backfill's slices come in time
# order and what one changes lies mostly within days of it (a 1% slice of 11 days at 1M: 19 days).
# So that read is filtered by the days of the documents it wants: never a wanted row less (a
# document without a date is wanted by the null test), only files that hold none of them skipped.
DAY_US = 86_400_000_000
MAX_DATE_RANGES = 32
# By date only when the slice's own days leave at most this share of the archive's files to read.
DATED_READ_SHARE = 0.5


def day_ranges(micros: np.ndarray, max_ranges: int = MAX_DATE_RANGES) -> np.ndarray:
    """Half-open ranges [lo, hi) of whole UTC days, in microseconds (shape (n, 2)), that hold every
    value of micros: at most max_ranges, the narrowest gaps between days closed first."""
    days = np.unique(np.asarray(micros, np.int64) // DAY_US)
    if not len(days):
        return np.zeros((0, 2), np.int64)
    gap_after = np.flatnonzero(np.diff(days) > 1)
    lo = np.concatenate((days[:1], days[gap_after + 1]))
    hi = np.concatenate((days[gap_after], days[-1:])) + 1
    if len(lo) > max_ranges:
        widths = lo[1:] - hi[:-1]
        kept = np.sort(np.argsort(widths, kind="stable")[len(widths) - (max_ranges - 1):])
        lo = np.concatenate((lo[:1], lo[kept + 1]))
        hi = np.concatenate((hi[kept], hi[-1:]))
    return np.stack((lo, hi), axis=1) * DAY_US


def published_within(ranges: np.ndarray, nulls: bool) -> Column:
    """published_at in one of ranges (day_ranges), or null where nulls: a filter Delta skips files by."""
    at = F.col("published_at")
    keep = at.isNull() if nulls else F.lit(False)
    for lo, hi in ranges.tolist():
        keep = keep | ((at >= F.timestamp_micros(F.lit(lo))) & (at < F.timestamp_micros(F.lit(hi))))
    return keep


def _within_days(rows: DataFrame) -> Column:
    """A filter on published_at that keeps every one of rows' dates (collected: rows are few)."""
    column = rows.select("published_at").toArrow().column("published_at")
    micros = pc.cast(column.drop_null(), pa.int64()).to_numpy() if column.null_count < len(column) else np.zeros(0)
    return published_within(day_ranges(micros), column.null_count > 0)


def _days_of(docs: DataFrame, ids: DataFrame, n: int) -> Column:
    """A filter on published_at that keeps every document of ids (n of them): one scan of the ids and dates."""
    return _within_days(docs.select("id", "published_at").join(_small(ids, n), "id", "left_semi"))


def read_by_date(docs: DataFrame, slice_docs: DataFrame, n_affected: int) -> bool:
    """Whether restrict reads the stored text of n_affected documents by date (see above): when the
    days of the slice alone leave at most DATED_READ_SHARE of the archive's (docs') files to read.
    A slice spread over the archive's whole span skips nothing, and the scans of the wanted
    documents' dates would be time lost; so would a closure of more than BROADCAST_ROWS documents,
    which reads most days anyway. Decided from the slice's dates and the Delta log's statistics
    (planning, no scan)."""
    if n_affected > BROADCAST_ROWS:
        return False
    every = len(docs.inputFiles())
    return every > 1 and len(docs.where(_within_days(slice_docs)).inputFiles()) <= DATED_READ_SHARE * every


def restrict(archive: DataFrame, affected: DataFrame, n_affected: int, by_date: bool = False) -> DataFrame:
    """The archive's rows of the affected documents, materialised (the stages read them several times).
    by_date: the files read are first cut to the affected documents' days (read_by_date)."""
    if by_date:
        archive = archive.where(_days_of(archive, affected, n_affected))
    return cut_lineage(archive.join(_small(affected, n_affected), "id", "left_semi"))


def active_outside(spark: SparkSession, path: str, affected: DataFrame, n_affected: int) -> int:
    """Active links whose duplicate is not affected: the ones this run leaves as they are."""
    if not store.exists(spark, path):
        return 0
    links = spark.read.format("delta").load(path)
    return links.where(store.is_active(links)).join(_small(affected, n_affected).withColumnRenamed(
        "id", "duplicate_id"), "duplicate_id", "left_anti").count()


def ensure_supersede_columns(spark: SparkSession, path: str) -> None:
    """Add superseded_at / superseded_by_run (and via_id) to a links table written before they existed."""
    have = set(spark.read.format("delta").load(path).columns)
    todo = [f for f in (*SUPERSEDE_FIELDS, store.LINKS_SCHEMA["via_id"]) if f.name not in have]
    if todo:
        cols = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in todo)
        spark.sql(f"ALTER TABLE {layout.sql_table(path)} ADD COLUMNS ({cols})")


def link_actions(computed: DataFrame, table: DataFrame) -> DataFrame:
    """One row per link that must change: the link key, the computed score and via_id, and its action.

    computed: the links this run computed (key, score, via_id), one row per key.
    table: the links table as it is (every row, reverted and superseded ones included), or the part
    of it this run computed links for (write_links' scope).

    - insert:    computed, not in the table;
    - revive:    computed, in the table superseded (and not reverted);
    - rescore:   computed, active in the table with another score (via_id follows the score);
    - supersede: active in the table, not computed any more.
    A reverted link is a person's decision: whether computed or not, it gets no action.
    """
    key = list(store.LINK_KEY)
    t = table.select(*key, F.col("score").alias("t_score"),
                     F.col("reverted_at").isNotNull().alias("t_reverted"),
                     F.col("superseded_at").isNotNull().alias("t_superseded"), F.lit(True).alias("t_exists"))
    c = computed.select(*key, "score", "via_id", F.lit(True).alias("c_exists"))
    both = c.join(t, key, "full_outer")
    in_table, is_computed = F.coalesce("t_exists", F.lit(False)), F.coalesce("c_exists", F.lit(False))
    active = in_table & ~F.col("t_reverted") & ~F.col("t_superseded")
    action = (F.when(is_computed & ~in_table, INSERT)
              .when(is_computed & in_table & ~F.col("t_reverted") & F.col("t_superseded"), REVIVE)
              .when(is_computed & active & ~F.col("score").eqNullSafe(F.col("t_score")), RESCORE)
              .when(~is_computed & active, SUPERSEDE))
    return both.select(*key, "score", "via_id", action.alias("action")).where(F.col("action").isNotNull())


def write_links(spark: SparkSession, computed: DataFrame, path: str, run_id: str, now: datetime,
                scope: DataFrame | None = None, changed: list | None = None) -> dict[str, int]:
    """Make the active links of the table at path equal `computed` (duplicate_id, canonical_id, stage, score).

    scope: the ids the run computed links for (closure); only links whose duplicate is among them
    are compared, so the others get no action. None: the whole table (a run over the archive).
    Each link's action is decided once (link_actions), materialised, counted, and applied in one
    Delta MERGE whose clauses read the action column. Returns the count of each action; when
    `changed` is a list, the materialised actions (link key, action) are appended to it (what
    Postgres must load).
    """
    key = list(store.LINK_KEY)
    # via_id: the neighbour of a clustered link (stages 3 and 4); exact stages have none.
    via = F.col("via_id").cast("long") if "via_id" in computed.columns else F.lit(None).cast("long")
    computed = computed.select(*key, F.col("score").cast("double"), via.alias("via_id")).dropDuplicates(key)
    if not store.exists(spark, path):   # a first run: an empty table, so every link is an insert
        spark.createDataFrame([], TABLE_SCHEMA).write.format("delta").save(path)
    ensure_supersede_columns(spark, path)
    table = DeltaTable.forPath(spark, path)
    # Materialised: the counts and the MERGE read the same actions, computed once from the table as
    # it was before the MERGE changes it.
    rows = table.toDF()
    if scope is not None:   # every link touching the scope has its duplicate in it (closure)
        rows = rows.join(scope.select(F.col("id").alias("duplicate_id")), "duplicate_id", "left_semi")
    actions = cut_lineage(link_actions(computed, rows))
    if changed is not None:
        changed.append(actions)
    found = {r["action"]: int(r["n"]) for r in actions.groupBy("action").agg(F.count("*").alias("n")).collect()}
    counts = {a: found.get(a, 0) for a in ACTIONS}   # zeros included: "none revived" is a finding
    ts = F.lit(now).cast("timestamp")
    cond = " AND ".join(f"t.{k} = s.{k}" for k in key)
    (table.alias("t").merge(actions.alias("s"), cond)
     .whenMatchedUpdate(condition=f"s.action = '{SUPERSEDE}'",
                        set={"superseded_at": ts, "superseded_by_run": F.lit(run_id)})
     .whenMatchedUpdate(condition=f"s.action IN ('{REVIVE}', '{RESCORE}')",
                        set={"superseded_at": F.lit(None).cast("timestamp"),
                             "superseded_by_run": F.lit(None).cast("string"), "score": F.col("s.score"),
                             "via_id": F.col("s.via_id")})
     .whenNotMatchedInsert(condition=f"s.action = '{INSERT}'", values={
         **{k: F.col(f"s.{k}") for k in key}, "score": F.col("s.score"), "via_id": F.col("s.via_id"), "linked_at": ts,
         "run_id": F.lit(run_id), "reverted_at": F.lit(None).cast("timestamp"),
         "revert_reason": F.lit(None).cast("string"), "superseded_at": F.lit(None).cast("timestamp"),
         "superseded_by_run": F.lit(None).cast("string")})
     .execute())
    return {REPORTED_AS[a]: n for a, n in counts.items()}
