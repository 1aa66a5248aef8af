"""Stage 3's verification features (simhash.verify.pair_features) over Arrow batches equal what
the per-document functions give (ContentKeys.columns, shingle_set, numbers_of, names_of) for every
document: English, Bangla (seed char 4-grams, set word 3-shingles), no body, odd text."""

import pyarrow as pa
import pytest

from newsdedup.config import load_config
from newsdedup_lab.synth import generate
from newsdedup.stages.simhash import reference as ref
from newsdedup.stages.content import ContentKeys
from newsdedup.stages.simhash.verify import PairFeatures, pair_features

ODD = [(None, None), ("Headline only", None), ("Headline only", ""), ("", "   \n\t "), (None, "!!! ... ,,, ।"),
       ("\x00\x07 control", "zero\u200bwidth\u200c joiners \ufeff and \ufffd replacement \U0001F600"),
       ("STRASSE", "Straße, STRASSE and strasse: casefold ß ﬁ"), ("৳৳৳৳", "৳৳ ৳৳৳ ১২৩"),
       ("Mixed বাংলা", "Dhaka ঢাকা 12,500 টাকা ১২,৫০০ and Arsenal 2-1 Everton. Saka scored.")]


def corpus(n=300, seed=11):
    """(id, lang, title, body) rows: synthetic English and Bangla documents with their language (some
    without one, some in a language without its own settings), then the odd documents in each."""
    docs, truth = generate(n, seed)
    d, langs = docs.to_pydict(), truth.column("lang").to_pylist()
    rows = [(i, None if i % 7 == 0 else "fr" if i % 11 == 0 else lang, title, body)
            for i, lang, title, body in zip(d["id"], langs, d["title"], d["body"])]
    odd = [(lang, title, body) for lang in ("en", "bn", None) for title, body in ODD]
    return rows + [(max(d["id"]) + 1 + k, *doc) for k, doc in enumerate(odd)]


def per_document(conf, rows):
    """id -> (shingles, nums, names) as pair_features computed them before issue 12: a row at a time."""
    keys = ContentKeys(conf.content, conf.input.max_text_chars)
    out = {}
    for i, lang, title, body in rows:
        key = keys.columns(title, body, None, lang, [])["key"]
        spec = conf.simhash.language(lang)
        out[i] = (ref.shingle_set(key, spec.set_features, spec.set_ngram).tolist(), ref.numbers_of(key),
                  ref.names_of(key))
    return out


@pytest.mark.parametrize("bn_set", [None, {"set_features": "char", "set_ngram": 4}])
def test_the_batch_equals_the_per_document_functions(conf, bn_set):
    """With the default settings, and with Bangla sets of other features than every other language's."""
    if bn_set:
        conf = load_config(overrides={"simhash": {"languages": {"bn": bn_set}}})
    rows = corpus()
    batch = pa.RecordBatch.from_pylist([dict(zip(("id", "lang", "title", "body"), r)) for r in rows],
                                       schema=pa.schema([("id", pa.int64()), ("lang", pa.string()),
                                                         ("title", pa.string()), ("body", pa.string())]))
    got = PairFeatures(conf).batch(batch)
    assert got.schema.field("shingles").type == pa.list_(pa.int32())
    want = per_document(conf, rows)
    assert {r["id"]: (r["shingles"], r["nums"], r["names"]) for r in got.to_pylist()} == want
    assert got.column("id").to_pylist() == [r[0] for r in rows]
    assert sum(1 for shingles, nums, names in want.values() if shingles and nums and names) > 50
    assert sum(1 for shingles, _, _ in want.values() if not shingles) == 3 * 3       # three texts without a word, three times


@pytest.mark.parametrize("records_per_batch", [10_000, 37])
def test_the_spark_step_returns_the_per_document_features(spark, conf, records_per_batch):
    """Only the documents asked for, several Arrow batches per task (one PairFeatures for all)."""
    rows = corpus()
    docs = spark.createDataFrame(rows, "id long, lang string, title string, body string").repartition(2)
    wanted = [r[0] for r in rows if r[0] % 3 != 1] + [10 ** 9]       # and an id no document has
    ids = spark.createDataFrame([(i,) for i in wanted], "id long")
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, str(records_per_batch))
    try:
        got = {r.id: (r.shingles, r.nums, r.names) for r in pair_features(docs, ids, conf).collect()}
    finally:
        spark.conf.set(key, before)
    want = per_document(conf, [r for r in rows if r[0] % 3 != 1])
    assert got == want


@pytest.mark.parametrize("bn_set", [None, {"set_features": "char", "set_ngram": 4}])
def test_prepare_carries_the_features_pair_features_would_derive(conf, bn_set):
    """The verification features prepare's batch carries (shingles as int32 bytes, nums, names) are
    PairFeatures' for the stored text, on every document with simhash_w; null on the others."""
    import numpy as np

    from newsdedup.io.input import TEXT_COLUMNS
    from newsdedup.prepare import Keys, prepare_batch

    if bn_set:
        conf = load_config(overrides={"simhash": {"languages": {"bn": bn_set}}})
    rows = corpus()
    cols = {c: pa.array([None] * len(rows), pa.string()) for c in TEXT_COLUMNS}
    cols.update(title=pa.array([r[2] for r in rows], pa.string()), body=pa.array([r[3] for r in rows], pa.string()),
                lang=pa.array([r[1] for r in rows], pa.string()))
    arrays = {}
    for c in TEXT_COLUMNS:
        arrays[c], arrays[f"{c}_raw"] = cols[c], pa.array([None] * len(rows), pa.binary())
    arrays["published_at_flag"] = pa.array([None] * len(rows), pa.string())
    out = prepare_batch(Keys(conf), list(arrays.values()), list(arrays)).to_pylist()
    stored = pa.RecordBatch.from_pylist(
        [{"id": r[0], "lang": o["lang"], "title": r[2], "body": o["body_fixed"] or r[3]} for r, o in zip(rows, out)],
        schema=pa.schema([("id", pa.int64()), ("lang", pa.string()), ("title", pa.string()), ("body", pa.string())]))
    want = {r["id"]: (r["shingles"], r["nums"], r["names"]) for r in PairFeatures(conf).batch(stored).to_pylist()}
    carried = 0
    for r, o in zip(rows, out):
        if o["simhash_w"] is None:
            assert (o["shingles"], o["nums"], o["names"]) == (None, None, None)
            continue
        carried += 1
        shingles = np.frombuffer(o["shingles"], dtype="<i4").tolist()
        assert (shingles, o["nums"], o["names"]) == want[r[0]], r[0]
    assert carried > 250


@pytest.mark.parametrize("broadcast", [False, True])
def test_carried_features_are_read_and_the_others_derived(spark, conf, broadcast):
    """pair_features given prepare's carried features (shingles as int32 bytes) for part of the
    documents: those are read from it, the rest derived from the text, the same values for all;
    complete=True reads the text of none. Only the wanted documents' features come back, whether
    the carried ones are picked by a join or by the ids every worker holds (broadcast)."""
    import numpy as np

    rows = corpus()
    batch = pa.RecordBatch.from_pylist([dict(zip(("id", "lang", "title", "body"), r)) for r in rows],
                                       schema=pa.schema([("id", pa.int64()), ("lang", pa.string()),
                                                         ("title", pa.string()), ("body", pa.string())]))
    feats = PairFeatures(conf).batch(batch).to_pylist()
    carried_rows = [(f["id"], np.array(f["shingles"], "<i4").tobytes(), f["nums"], f["names"])
                    for f in feats if f["id"] % 2 == 0]
    carried = spark.createDataFrame(carried_rows, "id long, shingles binary, nums array<string>, names array<string>")
    docs = spark.createDataFrame(rows, "id long, lang string, title string, body string").repartition(2)
    ids = spark.createDataFrame([(r[0],) for r in rows], "id long")
    want = per_document(conf, rows)
    got = {r.id: (r.shingles, r.nums, r.names)
           for r in pair_features(docs, ids, conf, carried, broadcast=broadcast).collect()}
    assert got == want
    # complete: only the carried features, none derived (the documents frame is empty here), and
    # only those of the ids asked for (half of the carried ones).
    fourth = ids.where("id % 4 = 0")
    got = {r.id: (r.shingles, r.nums, r.names)
           for r in pair_features(docs.limit(0), fourth, conf, carried, complete=True, broadcast=broadcast).collect()}
    assert got == {i: v for i, v in want.items() if i % 4 == 0}
