"""prepare_batch without Spark: one Arrow batch in, the stages' keys out; a failing row fails alone."""

import pyarrow as pa

from newsdedup.config import load_config
from newsdedup.io.input import TEXT_COLUMNS
from newsdedup.prepare import Keys, prepare_batch
from newsdedup.stages.content import ContentKeys

BODY = " ".join(f"word{i} story{i % 7}" for i in range(60))


def batch(rows):
    cols = {}
    for c in TEXT_COLUMNS:
        cols[c] = pa.array([r.get(c) for r in rows], pa.string())
        cols[f"{c}_raw"] = pa.array([r.get(f"{c}_raw") for r in rows], pa.binary())
    # io.input.conform's verdict on the date, as prepare's UDF receives it.
    cols["published_at_flag"] = pa.array([_date_flag(r) for r in rows], pa.string())
    return list(cols.values()), list(cols)


def _date_flag(row):
    if not row.get("missing"):
        return None
    raw = (row.get("raw_ts") or "").strip()
    return f"unparseable_published_at:{raw}" if raw else "no_published_at"


class Exploding(ContentKeys):
    def key(self, title, body, html, flags):
        if title == "boom":
            raise RuntimeError("bad row")
        return super().key(title, body, html, flags)


def test_a_failing_row_is_reported_and_the_others_keep_their_keys():
    conf = load_config()
    keys = Keys(conf)
    keys.content = Exploding(conf.content, conf.input.max_text_chars)
    rows = [{"url": "https://e.com/a", "title": "A", "body": BODY, "source": "x"},
            {"url": "https://e.com/b", "title": "boom", "body": BODY},
            {"url": "https://e.com/c", "title": "C", "body": "too short", "missing": True, "raw_ts": " soon "},
            {"url_raw": b"https://e.com/caf\xe9", "title": "D", "body_raw": b"\xff" + BODY.encode()}]
    arrays, names = batch(rows)
    out = prepare_batch(keys, arrays, names).to_pylist()
    assert [r["prepare_error"] for r in out] == [None, "RuntimeError: bad row", None, None]
    assert out[0]["simhash"] is not None and out[0]["n_features"] >= 8 and out[0]["url_key"] == "https://e.com/a"
    assert out[2]["simhash"] is None and out[2]["n_features"] == 1          # "c too short": one 3-shingle, below min_features
    assert out[2]["flags"] == ["unparseable_published_at:soon"]
    assert out[3]["url_fixed"] == "https://e.com/caf%E9" and out[3]["body_fixed"].startswith("\ufffd")
    assert out[3]["flags"] == ["invalid_utf8:url", "invalid_utf8:body"]
    assert out[1]["simhash"] is None and out[1]["content_hash"] is None
    # Stage 3's set columns: present with the seed fingerprint, null below min_features.
    assert out[0]["simhash_w"] is not None and len(out[0]["mh_bands"]) == conf.simhash.minhash_bands
    assert out[2]["simhash_w"] is None and out[2]["mh_bands"] is None


def test_a_batch_without_failures_matches_row_by_row_results():
    keys = Keys(load_config())
    rows = [{"url": f"https://e.com/{i}", "title": f"T{i}", "body": BODY + f" extra{i}" * i} for i in range(5)]
    arrays, names = batch(rows)
    whole = prepare_batch(keys, arrays, names).to_pylist()
    single = [prepare_batch(keys, [a.slice(i, 1) for a in arrays], names).to_pylist()[0] for i in range(5)]
    assert whole == single


def test_prepare_batch_gives_the_reference_fingerprints():
    """The keys stored fingerprints depend on, against values pinned before the batch kernel
    (tests/fingerprint_reference.py), not against another path through the same code."""
    from fingerprint_reference import BN, EN, ROWS, SET_ROWS, TITLES_BN, TITLES_EN

    rows = [{"url": f"https://e.com/{i}", "title": t, "body": b}
            for i, (t, b) in enumerate(zip(TITLES_EN + TITLES_BN, EN + BN))]
    arrays, names = batch(rows)
    out = prepare_batch(Keys(load_config()), arrays, names).to_pylist()
    assert [(r["content_hash"], r["simhash"], r["n_features"]) for r in out] == \
        [(h, fp, n) for _, _, h, _, fp, n in ROWS]
    assert [(r["simhash_w"], r["mh_bands"]) for r in out] == [(w, bands) for _, _, _, w, bands in SET_ROWS]
