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


# ---------------------------------------------------------------- URLs

from newsdedup.config import load_config  # noqa: E402
from newsdedup.stages.url import UrlError, host_of, normalize_url, rules_for  # noqa: E402

URL_CONF = load_config().url
label = st.text(alphabet="abcxyz019-_\u09ac\u09be\u0982\u00e9", min_size=1, max_size=8)
host = st.builds(lambda www, labels, tld: www + ".".join(labels) + tld,
                 st.sampled_from(["", "www.", "www.www.", "WWW."]), st.lists(label, min_size=1, max_size=3),
                 st.sampled_from([".com", ".net", ".COM", "", ".com."]))
port = st.sampled_from(["", ":80", ":443", ":8080", ":", ":abc", ":abc:"])
segment = st.lists(st.sampled_from(list("aZ09-._~!$'()*+,;=:@") + ["%7e", "%7E", "%2F", "%e0%a6%a2", "%", "%zz",
                                                                  "..", "\u0995", "\u00e9"]),
                   max_size=6).map("".join)
path = st.lists(segment, max_size=5).map(lambda segs: "/" + "/".join(segs))
param = st.builds(lambda k, v: k + ("=" + v if v is not None else ""),
                  st.sampled_from(["a", "b", "id", "utm_source", "fbclid", "ref", "Q%20", "amp;c", "\u0995"]),
                  st.one_of(st.none(), segment))
query = st.lists(param, max_size=5).map(lambda ps: ("?" + "&".join(ps)) if ps else "")
urls = st.builds(lambda scheme, h, p, pa, q, frag: f"{scheme}://{h}{p}{pa}{q}{frag}",
                 st.sampled_from(["http", "https", "HTTP"]), host, port, path, query,
                 st.sampled_from(["", "#top", "#"]))


@settings(max_examples=1500, deadline=None)
@given(urls, st.sampled_from([None, "dailystar", "The Daily Star", "other"]))
def test_url_normalisation_is_idempotent(url, source):
    try:
        once = normalize_url(url, rules_for(URL_CONF, source, host_of(url)))
    except UrlError:
        return
    twice = normalize_url(once.canonical, rules_for(URL_CONF, source, host_of(once.canonical)))
    assert (twice.canonical, twice.key) == (once.canonical, once.key)


# ---------------------------------------------------------------- NFKC on the stretches that change

from newsdedup.stages.nfkc import nfkc  # noqa: E402

HANGUL_AND_MARKS = "\u1100\u1161\u11a8\uac00\uac01\u0301\u0300\u0323\u031b\u0344\u0958\u093c\u0b47\u0b3e\u0b57"


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=st.one_of(st.sampled_from(SPECIAL + HANGUL_AND_MARKS), st.characters(codec="utf-8")),
               max_size=40))
def test_fast_nfkc_equals_unicodedata(text):
    assert nfkc(text) == unicodedata.normalize("NFKC", text)
