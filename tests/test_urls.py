import pytest

from newsdedup.config import load_config
from newsdedup.stages.url import UrlError, host_of, normalize_url, rules_for

CONF = load_config().url


def url_conf(section):
    """A url section replacing the default one (lists and mappings given here are taken whole)."""
    return load_config(overrides={"url": {"sources": None}}).with_overrides({"url": section}).url


def norm(url, source=None):
    return normalize_url(url, rules_for(CONF, source, host_of(url)))


def test_scheme_host_www_fragment_and_trailing_slash():
    n = norm("HTTPS://WWW.Example.COM/News/Story/#top")
    assert n.canonical == "https://example.com/News/Story"   # path case is kept
    assert n.host == "example.com"


def test_tracking_parameters_dropped_others_kept_in_order_byte_for_byte():
    url = "https://example.com/a?z=%E0%A6%95+1&utm_source=fb&b=2&fbclid=XYZ&gclid=1&mc_cid=9&msclkid=q&a=%2F"
    n = norm(url)
    assert n.canonical == "https://example.com/a?z=%E0%A6%95+1&b=2&a=%2F"   # no re-encoding, original order


def test_hash_key_ignores_parameter_order_but_canonical_keeps_it():
    a, b = norm("https://example.com/a?x=1&y=2"), norm("https://example.com/a?y=2&x=1")
    assert a.sha256 == b.sha256
    assert a.canonical != b.canonical


def test_url_variants_share_one_hash():
    base = "https://www.thedailystar.net/news/bangladesh/story-123"
    variants = [
        base,
        base + "/",
        base + "?utm_source=twitter&utm_campaign=x",
        base + "#comments",
        "http://thedailystar.net/news/bangladesh/story-123",
        "https://WWW.THEDAILYSTAR.NET:443/news/bangladesh/story-123?fbclid=abc",
    ]
    assert len({norm(v, "dailystar").sha256 for v in variants}) == 1


def test_different_paths_and_reserved_escapes_stay_distinct():
    # An escaped reserved character means something else than the character itself (RFC 3986 6.2.2.2).
    assert norm("https://e.com/a%2Fb").sha256 != norm("https://e.com/a/b").sha256
    assert norm("https://e.com/a?x=1%262").sha256 != norm("https://e.com/a?x=1&2").sha256
    assert norm("https://e.com/a").sha256 != norm("https://e.com/b").sha256


def test_allowlisted_article_id_survives_even_if_it_looks_like_tracking():
    conf = url_conf({"tracking_params": ["utm_*", "id", "ref"],
                     "sources": {"kalerkantho": {"allow": ["id"], "strip": []}}})
    a = normalize_url("https://kalerkantho.com/article.php?id=1&ref=home", rules_for(conf, "kalerkantho"))
    b = normalize_url("https://kalerkantho.com/article.php?id=2&ref=home", rules_for(conf, "kalerkantho"))
    assert a.canonical == "https://kalerkantho.com/article.php?id=1"
    assert a.sha256 != b.sha256
    # Without the allowlist the whole site would collapse into one document.
    other = rules_for(conf, "someone-else")
    assert (normalize_url("https://x.com/p.php?id=1", other).sha256
            == normalize_url("https://x.com/p.php?id=2", other).sha256)


def test_per_source_strip_list_only_applies_to_that_source():
    with_rule = norm("https://dailystar.net/x?ref=home", "dailystar")
    without = norm("https://example.com/x?ref=home", "example")
    assert with_rule.canonical == "https://dailystar.net/x"
    assert without.canonical == "https://example.com/x?ref=home"


def test_source_rules_found_by_host_when_source_is_unknown():
    conf = url_conf({"tracking_params": [], "sources": {"bdnews24.com": {"strip": ["ref"], "allow": []}}})
    n = normalize_url("https://www.bdnews24.com/x?ref=a&p=1", rules_for(conf, None, "bdnews24.com"))
    assert n.canonical == "https://bdnews24.com/x?p=1"


def test_scheme_insensitive_key_is_optional():
    r = rules_for(CONF, None)
    assert normalize_url("http://e.com/a", r).sha256 == normalize_url("https://e.com/a", r).sha256
    assert (normalize_url("http://e.com/a", r, scheme_insensitive=False).sha256
            != normalize_url("https://e.com/a", r, scheme_insensitive=False).sha256)


def test_root_path_and_default_ports():
    assert norm("https://e.com").canonical == "https://e.com/"
    assert norm("https://e.com:443/").canonical == "https://e.com/"
    assert norm("http://e.com:8080/x").canonical == "http://e.com:8080/x"


@pytest.mark.parametrize("bad", [None, "", "   ", "not a url", "ftp://e.com/x", "https:///x", "//e.com/x",
                                 "https://e.com:abc/x", "https://e .com/x", "https://../x", "mailto:a@b.c"])
def test_malformed_urls_raise_url_error(bad):
    with pytest.raises(UrlError):
        norm(bad)


def test_empty_parameters_are_dropped_and_bangla_path_kept_verbatim():
    n = norm("https://www.prothomalo.com/বাংলাদেশ/খবর?&&utm_medium=x&")
    assert n.canonical == "https://prothomalo.com/বাংলাদেশ/খবর"


# ---------------------------------------------------------------- issue 12: one key per spelling

SLUG = "https://www.prothomalo.com/bangladesh/ঢাকা-খবর"   # raw Bangla slug
ENCODED = "https://www.prothomalo.com/bangladesh/%E0%A6%A2%E0%A6%BE%E0%A6%95%E0%A6%BE-%E0%A6%96%E0%A6%AC%E0%A6%B0"


@pytest.mark.parametrize("a, b", [
    ("https://e.com/%e0%a6%a2", "https://e.com/%E0%A6%A2"),                  # hex case
    (SLUG, ENCODED),                                                         # raw Unicode vs percent-encoded
    (SLUG, ENCODED.lower().replace("https://www.prothomalo.com", "https://prothomalo.com")),
    ("https://e.com/a/../b", "https://e.com/b"),                             # dot segments
    ("https://e.com/a/./b/", "https://e.com/a/b"),
    ("https://e.com/a/b/..", "https://e.com/a"),
    ("https://e.com/a/%2E%2E/b", "https://e.com/b"),                         # escaped dots are dots
    ("https://e.com/%7Euser/a%2Db", "https://e.com/~user/a-b"),              # escaped unreserved
    ("https://e.com/x?q=%7e", "https://e.com/x?q=~"),
    ("https://বাংলা.com/x", "https://xn--54b7fta0cc.com/x"),  # IDN vs punycode
    ("https://e.com/x?a=1&amp;b=2", "https://e.com/x?b=2&a=1"),              # &amp; separators
    ("https://e.com/x?a=1&amp;utm_source=t", "https://e.com/x?a=1"),         # ... and tracking after them
    ("http://www.www.e.com/x", "https://e.com/x"),                           # www.www.
    ("https://e.com/x?q=ক", "https://e.com/x?q=%E0%A6%95"),
])
def test_spellings_of_one_address_share_a_key(a, b):
    assert norm(a).key == norm(b).key
    assert norm(a).sha256 == norm(b).sha256


def test_the_canonical_url_keeps_the_published_bytes():
    assert norm(SLUG).canonical == SLUG.replace("www.", "")
    assert norm("https://e.com/%e0%a6%a2/a/../b?x=%7e&amp;y=1").canonical == "https://e.com/%e0%a6%a2/a/../b?x=%7e&amp;y=1"
    assert norm("https://বাংলা.com/x").canonical == "https://বাংলা.com/x"


def test_www_com_is_a_host_not_a_prefix():
    assert norm("https://www.com/x").canonical == "https://www.com/x"
    assert norm("https://www.www.com/x").canonical == "https://www.com/x"


@pytest.mark.parametrize("bad", ["http://e.com:abc:", "http://e.com:abc:/x", "https://e!.com/", "https://e.com%2F/",
                                 "https://e*com/", "https://[::1/x", "https://[zz::1]/x"])
def test_hosts_with_characters_no_host_has_are_rejected(bad):
    with pytest.raises(UrlError):
        norm(bad)


@pytest.mark.parametrize("url", ["http://www.www.e.com/x", "https://E.com/a/../b/?utm_source=x&amp;id=3#f",
                                 "https://e.com/%e0%a6%a2?b=%7e&a=%zz%", "https://user@www.E.com:8080/x/./",
                                 "https://[2001:DB8::1]:443/a"])
def test_normalising_a_canonical_url_again_changes_nothing(url):
    once = norm(url)
    twice = norm(once.canonical)
    assert (twice.canonical, twice.key) == (once.canonical, once.key)


def test_source_rules_found_by_host_whatever_the_label():
    # thedailystar.net strips ref/from/amp: by its host, with no label, another spelling, a subdomain.
    for url, label in [("https://www.thedailystar.net/x?ref=a&p=1", None),
                       ("https://thedailystar.net/x?ref=a&p=1", "The Daily Star"),
                       ("https://thedailystar.net/x?ref=a&p=1", "someone-else"),
                       ("https://bangla.thedailystar.net/x?ref=a&p=1", None)]:
        assert norm(url, label).canonical.endswith("/x?p=1"), (url, label)
    # A host that only ends with the same letters is another site.
    assert norm("https://notthedailystar.net/x?ref=a", None).canonical.endswith("?ref=a")


def test_source_rules_found_by_label_spelled_otherwise():
    from newsdedup.stages.url import source_for

    assert source_for(CONF, "Daily Star", None) == "dailystar"
    assert source_for(CONF, "the-daily-star", None) == "dailystar"
    assert source_for(CONF, "DAILYSTAR", "example.com") == "dailystar"
    assert source_for(CONF, "unknown", "example.com") is None


def test_source_hosts_are_validated():
    from newsdedup.config import ConfigError

    with pytest.raises(ConfigError, match="hosts"):
        url_conf({"sources": {"x": {"hosts": ["https://x.com/"]}}})
