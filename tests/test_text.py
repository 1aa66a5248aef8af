import unicodedata

from newsdedup.stages.content import (clean_invalid, content_key, detect_language, html_to_text, normalize_text,
                            sha256_hex, strip_boilerplate)

BOILER = [r"(read more|also read)\s*:?.*", r"(আরও পড়ুন)\s*:?.*"]


def test_quotes_dashes_and_whitespace_are_canonical():
    assert normalize_text("\u201cHello\u201d \u2014  it\u2019s\t\n 2\u20131") == '"Hello" - it\'s 2-1'


def test_nfkc_folds_compatibility_forms():
    assert normalize_text("\uff21\uff22\uff23 \ufb01le") == "ABC file"   # fullwidth letters, fi ligature


def test_bangla_in_nfc_and_nfd_hash_the_same():
    # য় (U+09DF) and ো (U+09CB) have decomposed twins; outlets publish both.
    text = "বাংলাদেশের নয়া নীতি ঘোষণা করা হলো"
    nfd = unicodedata.normalize("NFD", text)
    assert nfd.encode() != text.encode()
    assert normalize_text(nfd) == normalize_text(text)
    assert sha256_hex(content_key("শিরোনাম", nfd, [])) == sha256_hex(content_key("শিরোনাম", text, []))


def test_zero_width_joiners_do_not_change_the_key():
    with_zwj = "র\u200d্যাব অভিযান"
    assert normalize_text(with_zwj) == normalize_text("র্যাব অভিযান")


def test_boilerplate_lines_are_removed_but_not_sentences_that_mention_them():
    body = "First line of story.\nRead more: https://x.y\nShe said she would read more books.\nআরও পড়ুন: অন্য খবর"
    out = strip_boilerplate(body, BOILER)
    assert out == "First line of story.\nShe said she would read more books."


def test_content_key_empty_when_no_text():
    assert content_key(None, None, BOILER) == ""
    assert content_key("  ", "\n\n", BOILER) == ""
    assert content_key("Title", "", BOILER) == "Title\n"


def test_invalid_characters_are_repaired():
    assert clean_invalid("a\ud800b\x00c") == "a\ufffdb c"


def test_language_from_script_and_hint():
    assert detect_language("বাংলাদেশ ব্যাংক সুদহার বাড়িয়েছে") == "bn"
    assert detect_language("The central bank raised rates") == "en"
    assert detect_language("12345 !!!") == "other"
    assert detect_language("whatever", "bn-BD") == "bn"
    assert detect_language("বাংলা", "EN") == "en"


def test_html_extraction_drops_navigation_and_scripts():
    html = ("<html><head><script>var x=1;</script></head><body><nav>Home | World | Sport</nav>"
            "<article><h1>Storm hits coast</h1><p>" + "The storm reached the coast on Monday night. " * 8 +
            "</p></article><footer>Copyright 2024</footer></body></html>")
    text = html_to_text(html)
    assert "storm reached the coast" in text
    assert "var x" not in text and "Home | World" not in text
    assert html_to_text("") == ""
