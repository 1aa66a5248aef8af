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
