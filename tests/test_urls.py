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


def test_different_paths_and_percent_encodings_stay_distinct():
    # %7E and ~ are the same to most servers but we never re-encode: distinct keys.
    assert norm("https://e.com/a%7Eb").sha256 != norm("https://e.com/a~b").sha256
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
