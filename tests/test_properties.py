"""Property tests (hypothesis): URL and text normalisation are idempotent."""

import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from newsdedup.stages.content import body_text, normalize_text

# Characters that exercise the normaliser: Bangla letters and signs, Latin with accents and
# combining marks, quotes/dashes, invisible and bidi characters, controls and white space.
SPECIAL = ("\u0995\u0996\u09af\u09bc\u09be\u09c7\u09cb\u09cd\u09d7\u09df\u09dc\u0981\u0982"
           "aAeE\u00e9\u0301\u0327\u00df\u0130\u2018\u2019\u201c\u201d\u00b4\u2032\u2033\u2034\u2036\u2039\u203a"
           "\u275d\u275e\u2013\u2014\ufe58\u200b\u200c\u200d\u200e\u200f\u202a\u202e\u2066\u2069\ufeff\u00ad"
           "\x00\x07\x1c\x85\t\n\r \u00a0\u2028\u3000\ufb01\uff21\u2460\u00bd\u1100\u1161\u11a8\uac00")
texts = st.text(alphabet=st.one_of(st.sampled_from(SPECIAL), st.characters(codec="utf-8")), max_size=60)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_text_normalisation_is_idempotent(text):
    once = normalize_text(text)
    assert normalize_text(once) == once
    assert unicodedata.is_normalized("NFKC", once)


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, max_size=5))
def test_body_text_is_the_line_by_line_normalisation(lines):
    body = "\n".join(lines)
    expected = " ".join(x for x in (normalize_text(line) for line in body.splitlines()) if x)
    assert body_text(body, []) == expected
