"""Stage 3's verification: every candidate pair is judged on the two documents' exact features.

A candidate (candidates.py) is a duplicate when the two shingle sets
have Jaccard >= jaccard, or the smaller set lies >= containment inside the
larger, and the pair does not contradict itself on numbers or names: templated
reports of different games share most words but not their scores and teams.
The thresholds are per language (conf simhash.languages).

- `PairFeatures` / `pair_features`: the features of the documents in candidate
  pairs: as prepare computed them (carried through the run, never stored), or,
  for documents an earlier run stored, recomputed from their text an Arrow batch at a time.
- `component_edges_and_links`: the batch step's verification and clustering, per connected
  component of the candidate pairs, where the component's features meet its pairs: the measures,
  the thresholds (`passes`), then `clustering.component_links`.
- `similarity`: the four measures of each pair, the pairs joined with the features of
  both sides (components too large for one task, and the tests' reference). Both forms
  intersect the sorted sets in a compiled pass (`intersection_sizes`); Spark's
  array_intersect on the same sets cost six times as much.
- `verified`: the pairs that pass their language's thresholds.
- `Features`, `pair_measures`, `passes`: the same measures and thresholds for pairs held in
  Python (the live lookup, live.py): `measures` itself does the arithmetic, so a pair scores
  the same in both paths to the last bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np
import pyarrow as pa
from numba import njit
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...clustering import component_links, rows_in
from ..content import ContentKeys
from .candidates import per_language
from .kernels import KIND_CODES, numbers_and_names, shingle_sets
from .reference import names_of, numbers_of

if TYPE_CHECKING:
    from ...config import Config, SimhashConfig


# ---------------------------------------------------------------- features (Spark)

class PairFeatures:
    """The verification columns of an Arrow batch of documents (id, lang, title, body): id and, from
    each document's content key, shingles (shingle_set of its language's set features), nums (numbers_of)
    and names (names_of), the same values the per-document functions give.

    Content keys as prepare computes them (ContentKeys.batch, no html, the stored lang as the
    hint); the shingle sets in one compiled call (kernels.shingle_sets), the shingles column built
    straight from its offsets and values; numbers and names in one compiled scan (kernels.numbers_and_names).
    """

    def __init__(self, conf: "Config"):
        self.content = ContentKeys(conf.content, conf.input.max_text_chars)
        self.sim_conf = conf.simhash

    def set_features(self, langs: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
        """(kind codes as int8, n-gram lengths as int64) of each language's set features."""
        specs = [self.sim_conf.language(lang) for lang in langs]
        return (np.array([KIND_CODES[s.set_features] for s in specs], np.int8),
                np.array([s.set_ngram for s in specs], np.int64))

    def batch(self, docs: pa.RecordBatch) -> pa.RecordBatch:
        n = docs.num_rows
        langs = docs.column("lang").to_pylist()
        keys = self.content.batch(docs.column("title").to_pylist(), docs.column("body").to_pylist(), [None] * n,
                                  langs, [[] for _ in range(n)])["key"]
        return self.of_keys(docs.column("id"), keys, langs)

    def of_keys(self, ids: pa.Array, keys: list[str], langs: list[str | None]) -> pa.RecordBatch:
        """The features from content keys already computed (prepare's key of a live article is the
        one `batch` computes again from its stored title and body)."""
        offsets, shingles = shingle_sets([k.casefold() for k in keys], *self.set_features(langs))
        shingle_lists = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(shingles))
        strings = pa.list_(pa.string())
        nums, names = numbers_and_names(keys)
        return pa.RecordBatch.from_arrays([ids, shingle_lists, pa.array(nums, strings), pa.array(names, strings)],
                                          names=["id", "shingles", "nums", "names"])


FEATURES_SCHEMA = T.StructType([T.StructField("id", T.LongType()),
                                T.StructField("shingles", T.ArrayType(T.IntegerType())),
                                T.StructField("nums", T.ArrayType(T.StringType())),
                                T.StructField("names", T.ArrayType(T.StringType()))])


def pair_features(ctx_docs: DataFrame, ids: DataFrame, conf: "Config", carried: DataFrame | None = None,
                  complete: bool = False, broadcast: bool = False, held=None) -> DataFrame:
    """id, shingles (sorted distinct shingle hashes), nums, names for the documents in ids.

    carried: the same features as prepare computed them (id, shingles as int32 bytes, nums, names);
    the documents it holds are read from it, the others derived from their text (PairFeatures, an
    Arrow batch at a time). complete: carried holds every document of ids (a first run), so the text
    is not read at all. broadcast: ids are few enough to broadcast, so carried is filtered where it
    lies (a shuffle join would move every document's features to find those of ids): the carried
    features by a sorted id array every Python worker holds (`_held`), the text by a broadcast join.
    held: that array already held (held_components of the ids' components), not collected again."""
    wanted = F.broadcast(ids) if broadcast else ids
    if carried is None:
        return _derived(ctx_docs.join(wanted, "id", "left_semi"), conf)
    if broadcast:
        held = held if held is not None else _held(ids.select("id"))
        have = carried.mapInArrow(lambda batches: _unpacked(_kept(batches, held)), FEATURES_SCHEMA)
    else:
        have = carried.join(wanted, "id", "left_semi").mapInArrow(_unpacked, FEATURES_SCHEMA)
    if complete:
        return have
    rest = ids.join(carried.select("id"), "id", "left_anti")
    return have.unionByName(_derived(ctx_docs.join(F.broadcast(rest) if broadcast else rest, "id", "left_semi"),
                                     conf))


def _derived(docs: DataFrame, conf: "Config") -> DataFrame:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        features = PairFeatures(conf)
        for batch in batches:
            yield features.batch(batch)

    return docs.select("id", "lang", "title", "body").mapInArrow(run, FEATURES_SCHEMA)


# ---------------------------------------------------------------- labels every Python worker holds

# Where the candidate documents are few enough (simhash.verify_broadcast_max), their ids and
# component groups are not broadcast as a Spark join relation: that relation is built in the
# driver's JVM heap, and at 10M documents the (id, comp, ts) relation of the candidate documents
# did not fit the default 2g driver (docs/benchmarks-e2e.md). Instead the driver collects them as
# sorted numpy arrays (8-20 bytes a document), every Python worker loads them once, and rows are
# filtered and labelled where they lie by binary search.

def _held(frame: DataFrame):
    """A Spark broadcast of frame's columns as numpy arrays sorted by its id column."""
    table = frame.toArrow()
    order = np.argsort(table.column("id").to_numpy(), kind="stable") if table.num_rows else np.zeros(0, np.int64)
    arrays = {name: np.asarray(table.column(name).to_numpy())[order] for name in table.column_names}
    return frame.sparkSession.sparkContext.broadcast(arrays)


def _kept(batches: Iterator[pa.RecordBatch], held) -> Iterator[pa.RecordBatch]:
    """The rows of batches whose id is held."""
    for batch in batches:
        _, found = rows_in(held.value["id"], batch.column("id").to_numpy())
        yield batch.filter(pa.array(found))


def _labelled(batches: Iterator[pa.RecordBatch], held, id_column: str, extra: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """The rows whose id_column is held, with held's `_group` first and its `extra` columns added."""
    for batch in batches:
        at, found = rows_in(held.value["id"], batch.column(id_column).to_numpy())
        batch, at = batch.filter(pa.array(found)), at[found]
        columns = {"_group": pa.array(held.value["_group"][at])}
        columns.update({name: batch.column(name) for name in batch.schema.names})
        columns.update({name: pa.array(held.value[name][at]) for name in extra})
        yield pa.RecordBatch.from_pydict(columns)


def _unpacked(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Carried features with the shingle bytes as list<int32>: the binary column's own buffers,
    its byte offsets / 4 (no copy of the values)."""
    for batch in batches:
        packed = batch.column("shingles")
        _, offset_buffer, data = packed.buffers()
        width = np.int64 if pa.types.is_large_binary(packed.type) else np.int32
        byte_offsets = np.frombuffer(offset_buffer, dtype=width)[packed.offset:packed.offset + len(packed) + 1]
        values = np.frombuffer(data, dtype="<i4") if data is not None else np.empty(0, "<i4")
        lists = pa.ListArray.from_arrays(pa.array(byte_offsets // 4, pa.int32()),
                                         pa.array(values.astype(np.int32, copy=False), pa.int32()))
        yield pa.RecordBatch.from_arrays([batch.column("id"), lists, batch.column("nums"), batch.column("names")],
                                         names=["id", "shingles", "nums", "names"])


# ---------------------------------------------------------------- measures (pure, compiled)

@njit(cache=True)
def intersection_sizes(l_offsets, l_values, r_offsets, r_values):
    """|l_i & r_i| of every pair i of sorted, distinct lists laid out as offsets + values."""
    n = l_offsets.shape[0] - 1
    out = np.zeros(n, np.int64)
    for i in range(n):
        x, x_end = l_offsets[i], l_offsets[i + 1]
        y, y_end = r_offsets[i], r_offsets[i + 1]
        k = 0
        while x < x_end and y < y_end:
            if l_values[x] < r_values[y]:
                x += 1
            elif l_values[x] > r_values[y]:
                y += 1
            else:
                k += 1
                x += 1
                y += 1
        out[i] = k
    return out


@njit(cache=True)
def sorted_segments(offsets, values):
    """values with every list (offsets[i]:offsets[i + 1]) sorted on its own."""
    out = values.copy()
    for i in range(offsets.shape[0] - 1):
        out[offsets[i]:offsets[i + 1]].sort()
    return out


def _shingle_lists(column: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values) of a shingles column; offsets index values even where the batch is a slice.

    A shingle set is sorted as unsigned 32-bit values and stored as int32 (shingle_set), so its
    values are read back as uint32: in that order they are sorted."""
    return column.offsets.to_numpy(), column.values.to_numpy(zero_copy_only=False).view(np.uint32)


def _codes(left: pa.ListArray, right: pa.ListArray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Two string-list columns as (offsets, sorted int codes) each; one code per distinct string of the batch."""
    l_off, r_off = left.offsets.to_numpy(), right.offsets.to_numpy()
    codes = pa.concat_arrays([left.values, right.values]).dictionary_encode().indices.to_numpy()
    n_left = len(left.values)
    return (l_off, sorted_segments(l_off, codes[:n_left]), r_off, sorted_segments(r_off, codes[n_left:]))


def _ratio(inter: np.ndarray, whole: np.ndarray) -> np.ndarray:
    return inter / np.maximum(whole, 1)


def measures(batch: pa.RecordBatch) -> dict[str, pa.Array]:
    """jaccard, containment, numbers and names of each row of l_shingles, r_shingles, l_nums, ...
    (see `similarity`). A batch without the nums (names) columns gets no numbers (names) measure:
    scoring a link against its canonical reads the Jaccard alone."""
    sizes = {}
    for name in ("shingles", "nums", "names"):
        if name != "shingles" and f"l_{name}" not in batch.schema.names:
            continue
        left, right = batch.column(f"l_{name}"), batch.column(f"r_{name}")
        lists = (*_shingle_lists(left), *_shingle_lists(right)) if name == "shingles" else _codes(left, right)
        inter = intersection_sizes(*lists)
        sizes[name] = (inter, np.diff(lists[0]), np.diff(lists[2]))
    inter, la, lb = sizes["shingles"]
    union, small = la + lb - inter, np.minimum(la, lb)
    out = {"jaccard": pa.array(np.where(union > 0, _ratio(inter, union), 0.0)),
           "containment": pa.array(np.where(small > 0, _ratio(inter, small), 0.0))}
    for name, column in (("nums", "numbers"), ("names", "names")):
        if name not in sizes:
            continue
        inter, la, lb = sizes[name]
        small = np.minimum(la, lb)
        # No numbers (names) on one side is no evidence either way: null, not 0.
        out[column] = pa.array(_ratio(inter, small), mask=small == 0)
    return out


# ---------------------------------------------------------------- measures (Spark)

def similarity(pairs: DataFrame, feats: DataFrame, left: str, right: str) -> DataFrame:
    """pairs with jaccard, containment (0 when a set is empty), numbers and names overlap (null when
    either side has none) of the documents left and right.

    jaccard = |x & y| / |x | y|; containment and the overlaps = |x & y| / min(|x|, |y|)."""
    fl = feats.select(*[F.col(c).alias(f"l_{c}") for c in feats.columns])
    fr = feats.select(*[F.col(c).alias(f"r_{c}") for c in feats.columns])
    # Shuffle joins: the shingle arrays must never be broadcast (a 2g driver ran out building that).
    j = (pairs.join(fl.hint("merge"), F.col(left) == F.col("l_id"))
         .join(fr.hint("merge"), F.col(right) == F.col("r_id")))
    keep = pairs.columns
    schema = T.StructType([*pairs.schema.fields,
                           *[T.StructField(c, T.DoubleType()) for c in ("jaccard", "containment", "numbers", "names")]])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            scored = measures(batch)
            yield pa.RecordBatch.from_arrays([batch.column(c) for c in keep] + list(scored.values()),
                                             names=keep + list(scored))

    return j.mapInArrow(run, schema)


EDGE, LINK = 0, 1
LINKED_SCHEMA = T.StructType([T.StructField("kind", T.IntegerType()), T.StructField("a", T.LongType()),
                              T.StructField("b", T.LongType()), T.StructField("score", T.DoubleType()),
                              T.StructField("via_id", T.LongType())])


def component_group(n_docs: int, sim_conf: "SimhashConfig") -> Column:
    """_group: the hash group of a row's comp, ceil(n_docs / verify_group_docs) groups."""
    groups = max(1, -(-n_docs // sim_conf.verify_group_docs))
    return F.pmod(F.xxhash64("comp"), F.lit(groups)).alias("_group")


def held_components(comps: DataFrame, n_docs: int, sim_conf: "SimhashConfig"):
    """comps (id, comp, ts) as every Python worker holds them (`_held`): id, _group (component_group), ts.
    One collect serves both pair_features' filter and component_edges_and_links' labels."""
    return _held(comps.select("id", component_group(n_docs, sim_conf), "ts"))


def component_edges_and_links(pairs: DataFrame, feats: DataFrame, comps: DataFrame, sim_conf: "SimhashConfig",
                              n_docs: int, held=None) -> DataFrame:
    """Verification and clustering where a candidate component's features meet its pairs.

    pairs: a, b, lang. feats: id, shingles, nums, names. comps: id, comp, ts for every document of
    pairs, both ends of a pair in one comp (the connected components of the candidate pairs), ts its
    order (clustering.order_micros). Every verified cluster lies inside one such component, so a
    component's pairs can be verified, clustered and scored in one place (`_linked_in_group`).

    Components are hashed into ceil(n_docs / verify_group_docs) groups and one cogroup hands each
    group's pairs and features to a task: each document's features cross the network once. The
    joins this replaces moved them once per side and every pair's left set a second time, which at
    10M documents filled the local disk. held: comps as every Python worker holds them
    (held_components, where they are few enough), and the pairs and features are labelled where
    they lie; None: labelled by joins with comps.

    Returns LINKED_SCHEMA rows: kind EDGE (a, b, score: every verified pair, as `verified` keeps it,
    score its Jaccard) and kind LINK (a: member, b: its canonical, score: their Jaccard, via_id), the
    links `clustering.links_from_edges` makes of those edges with the canonical scored by Jaccard."""
    pairs, feats = pairs.select("a", "b", "lang"), feats.select("id", "shingles", "nums", "names")
    if held is not None:
        labelled_pairs = pairs.mapInArrow(lambda batches: _labelled(batches, held, "a", ()),
                                          T.StructType([GROUP_FIELD, *pairs.schema.fields]))
        labelled_feats = feats.mapInArrow(lambda batches: _labelled(batches, held, "id", ("ts",)),
                                          T.StructType([GROUP_FIELD, *feats.schema.fields,
                                                        T.StructField("ts", T.LongType())]))
    else:
        group = component_group(n_docs, sim_conf)
        labelled_pairs = pairs.join(comps.select(F.col("id").alias("a"), "comp"), "a").select(group, "a", "b", "lang")
        labelled_feats = feats.join(comps, "id").select(group, "id", "shingles", "nums", "names", "ts")
    return (labelled_pairs.groupBy("_group").cogroup(labelled_feats.groupBy("_group"))
            .applyInArrow(_linked_in_group(sim_conf), LINKED_SCHEMA))


GROUP_FIELD = T.StructField("_group", T.LongType())


def _linked_in_group(sim_conf: "SimhashConfig"):
    """The cogroup function: one group's pairs and features to its edges and links (LINKED_SCHEMA).
    A pair missing either document's features is dropped, as `similarity`'s inner joins drop it."""

    def run(pairs: pa.Table, feats: pa.Table) -> pa.Table:
        if pairs.num_rows == 0 or feats.num_rows == 0:     # a group with no pair, or no pair's features
            return LINKED_EMPTY
        # The features stay in the chunks they came in (a contiguous copy would double the largest
        # group's memory); `_measures_of_rows` takes each chunk of pairs' rows from them.
        pairs = pairs.combine_chunks()
        ids = feats.column("id").to_numpy()
        ts = feats.column("ts").to_numpy()
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]

        def rows_of(column: str) -> tuple[np.ndarray, np.ndarray]:
            at, found = rows_in(sorted_ids, pairs.column(column).to_numpy())
            return order[at], found

        (l_rows, l_found), (r_rows, r_found) = rows_of("a"), rows_of("b")
        both = l_found & r_found
        l_rows, r_rows = l_rows[both], r_rows[both]
        coded = pairs.column("lang").combine_chunks().dictionary_encode()   # a few languages, not a str a pair
        langs = np.asarray(coded.dictionary.to_pylist() + [None], object)[
            coded.indices.fill_null(len(coded.dictionary)).to_numpy()][both]
        values = {name: feats.column(name) for name in ("shingles", "nums", "names")}
        m = _measures_of_rows(values, l_rows, r_rows)
        ok = passes(langs, m, sim_conf)
        ea, eb, es = l_rows[ok], r_rows[ok], m["jaccard"][ok]
        members, canonical, via = component_links(ids, ts, ea, eb, es)
        to_canonical = _measures_of_rows({"shingles": values["shingles"]}, members, canonical)["jaccard"]
        n_edges, n_links = len(ea), len(members)
        return pa.Table.from_arrays(
            [pa.array(np.repeat(np.array([EDGE, LINK], np.int32), [n_edges, n_links])),
             pa.array(np.concatenate([ids[ea], ids[members]])), pa.array(np.concatenate([ids[eb], ids[canonical]])),
             pa.array(np.concatenate([es, to_canonical])),
             pa.array(np.concatenate([np.zeros(n_edges, np.int64), ids[via]]),
                      mask=np.arange(n_edges + n_links) < n_edges)],
            schema=LINKED_ARROW)

    return run


LINKED_ARROW = pa.schema([("kind", pa.int32()), ("a", pa.int64()), ("b", pa.int64()), ("score", pa.float64()),
                          ("via_id", pa.int64())])
LINKED_EMPTY = LINKED_ARROW.empty_table()


# Pairs measured per call in a verification group. `take` copies both sides' sets for every pair,
# so a group's pairs at once held several times the group's own features (60,000 synthetic
# documents, 84,000 pairs: 361 MB over the group's 59 MB); chunks bound the copies to PAIR_CHUNK
# pairs (62 MB, and faster). lab/newsdedup_lab/bench_verify_memory.py measures it.
PAIR_CHUNK = 4096


def _measures_of_rows(values: dict[str, pa.Array | pa.ChunkedArray], left: np.ndarray, right: np.ndarray,
                      chunk: int = PAIR_CHUNK) -> dict[str, np.ndarray]:
    """`measures` of the pairs (row left[i], row right[i]) of the feature columns given (shingles,
    and nums and names when given), NaN where `similarity` has null; chunk pairs at a time."""

    starts = {name: np.cumsum([0] + [len(c) for c in column.chunks]) for name, column in values.items()
              if isinstance(column, pa.ChunkedArray)}

    def rows(name: str, at: np.ndarray) -> pa.Array:
        column = values[name]
        if not isinstance(column, pa.ChunkedArray):
            return column.take(pa.array(at, pa.int64()))
        # pyarrow's take on a chunked column concatenates every chunk first (a copy of the whole
        # column per call): take from each chunk the rows it holds, then put them back in order.
        chunk_of = np.searchsorted(starts[name], at, side="right") - 1
        order = np.argsort(chunk_of, kind="stable")
        bounds = np.searchsorted(chunk_of[order], np.arange(column.num_chunks + 1))
        parts = [column.chunk(c).take(pa.array(at[order[lo:hi]] - starts[name][c], pa.int64()))
                 for c, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])) if hi > lo]
        gathered = pa.concat_arrays(parts) if parts else pa.array([], column.type)
        back = np.empty(len(order), np.int64)
        back[order] = np.arange(len(order))
        return gathered.take(pa.array(back))

    parts: list[dict[str, np.ndarray]] = []
    for lo in range(0, max(len(left), 1), max(chunk, 1)):
        columns = {}
        for name in values:
            columns[f"l_{name}"] = rows(name, left[lo:lo + chunk])
            columns[f"r_{name}"] = rows(name, right[lo:lo + chunk])
        parts.append(_numpy_measures(pa.RecordBatch.from_pydict(columns)))
    return parts[0] if len(parts) == 1 else {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def verified(scored: DataFrame, sim_conf: "SimhashConfig") -> DataFrame:
    """The scored pairs that are duplicates under their language's thresholds."""
    lang = F.col("lang")

    def at(name):
        return per_language(sim_conf, lang, lambda s: F.lit(getattr(s, name)))

    similar = (F.col("jaccard") >= at("jaccard")) | (F.col("containment") >= at("containment"))
    consistent = (F.coalesce(F.col("numbers") >= at("numbers_overlap"), F.lit(True))
                  & F.coalesce(F.col("names") >= at("names_overlap"), F.lit(True)))
    return scored.where(similar & consistent)


def _passes(value: np.ndarray, at: np.ndarray) -> np.ndarray:
    """value >= at where value is known; NaN (no evidence either way) passes, as in `verified`."""
    return np.isnan(value) | (value >= at)


# ---------------------------------------------------------------- the same, for pairs held in Python

@dataclass(frozen=True)
class Features:
    """One document's verification features: what `PairFeatures` computes for a row."""

    shingles: np.ndarray        # sorted distinct shingle hashes, int32 (uint32 order)
    nums: tuple[str, ...]
    names: tuple[str, ...]

    def shingle_bytes(self) -> bytes:
        """The compact stored form (Postgres documents.shingles): little-endian int32."""
        return self.shingles.astype("<i4").tobytes()

    @staticmethod
    def from_stored(shingles: bytes | None, nums, names) -> "Features":
        values = np.frombuffer(shingles, dtype="<i4").astype(np.int32) if shingles else np.empty(0, np.int32)
        return Features(values, tuple(nums or ()), tuple(names or ()))


def features_of(features: PairFeatures, ids: Sequence[int], langs: Sequence[str | None],
                titles: Sequence[str | None], bodies: Sequence[str | None],
                keys: Sequence[str] | None = None) -> list[Features]:
    """`PairFeatures.batch` over documents held in Python (or `of_keys`, given their content keys),
    one Features per document."""
    if keys is None:
        out = features.batch(pa.RecordBatch.from_pydict(
            {"id": pa.array(list(ids), pa.int64()), "lang": pa.array(list(langs), pa.string()),
             "title": pa.array(list(titles), pa.string()), "body": pa.array(list(bodies), pa.string())}))
    else:
        out = features.of_keys(pa.array(list(ids), pa.int64()), list(keys), list(langs))
    shingles = out.column("shingles")
    offsets, values = shingles.offsets.to_numpy(), shingles.values.to_numpy(zero_copy_only=False)
    nums, names = out.column("nums").to_pylist(), out.column("names").to_pylist()
    return [Features(values[offsets[i]:offsets[i + 1]].astype(np.int32), tuple(nums[i]), tuple(names[i]))
            for i in range(len(ids))]


def features_with_shingles(shingles: np.ndarray, key: str) -> Features:
    """One document's Features from its shingle set as computed already (int32, sorted as uint32) and its
    content key: the nums and names `PairFeatures.of_keys` finds in the same key. The set is copied: it
    may be a slice of a whole batch's array, which a lookup's memory (kept for a whole call) must not
    hold on to."""
    return Features(np.array(shingles, np.int32), tuple(numbers_of(key)), tuple(names_of(key)))


def pair_measures(left: Sequence[Features], right: Sequence[Features]) -> dict[str, np.ndarray]:
    """jaccard, containment, numbers and names (NaN where `similarity` has null) of each pair
    (left[i], right[i]), computed by `measures`."""
    ints, strings = pa.list_(pa.int32()), pa.list_(pa.string())
    batch = pa.RecordBatch.from_pydict({
        "l_shingles": pa.array([f.shingles for f in left], ints),
        "r_shingles": pa.array([f.shingles for f in right], ints),
        "l_nums": pa.array([list(f.nums) for f in left], strings),
        "r_nums": pa.array([list(f.nums) for f in right], strings),
        "l_names": pa.array([list(f.names) for f in left], strings),
        "r_names": pa.array([list(f.names) for f in right], strings)})
    return _numpy_measures(batch)


def _numpy_measures(batch: pa.RecordBatch) -> dict[str, np.ndarray]:
    """`measures` of a batch as float64 arrays, null as NaN (what `passes` reads as no evidence)."""
    return {k: v.to_numpy(zero_copy_only=False).astype(np.float64) for k, v in measures(batch).items()}


def passes(langs: Sequence[str | None], m: dict[str, np.ndarray], sim_conf: "SimhashConfig") -> np.ndarray:
    """Which pairs `verified` keeps: the same thresholds for measures held in numpy."""
    specs = [sim_conf.language(lang) for lang in langs]

    def at(name: str) -> np.ndarray:
        return np.array([getattr(s, name) for s in specs], np.float64)

    similar = (m["jaccard"] >= at("jaccard")) | (m["containment"] >= at("containment"))
    return similar & _passes(m["numbers"], at("numbers_overlap")) & _passes(m["names"], at("names_overlap"))
