"""A document's keys do not depend on which documents share its Arrow batch."""

from __future__ import annotations

from datetime import datetime

from newsdedup import prepare
from newsdedup.io.input import conform, split_invalid

from conftest import make_df

BODY = ("The metro rail will run until eleven at night from next week, the operator said on Monday, "
        "adding that trains will come every eight minutes during the evening peak on the whole line.")


def keys(spark, conf, rows):
    valid, _ = split_invalid(conform(make_df(spark, rows).coalesce(1), conf.input.naive_timezone))
    return {r.id: (r.simhash, r.band_0, r.band_3) for r in prepare.fingerprint(valid, conf).collect()}


def test_a_null_simhash_in_the_batch_leaves_the_others_exact(spark, conf):
    at = datetime(2024, 3, 5, 4)
    doc = (1, "https://e.com/metro", "Metro rail extends hours", BODY, at, "e", "en")
    empty = (2, "https://e.com/empty", "Title only", "", at, "e", "en")      # no body: no SimHash
    alone = keys(spark, conf, [doc])[1]
    together = keys(spark, conf, [doc, empty])
    assert together[2][0] is None
    assert alone[0] is not None and abs(alone[0]) > 2 ** 53     # large enough for float64 to round it
    assert together[1] == alone
