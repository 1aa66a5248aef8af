import unicodedata

from newsdedup.stages.content import (body_text, clean_invalid, content_key, detect_language, html_to_text,
                                      normalize_text, script_counts, sha256_hex, strip_boilerplate)

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


# ---------------------------------------------------------------- issue 12: order of operations, more marks

def test_vowel_sign_split_by_zwnj_composes_like_the_whole_sign():
    # ZWNJ is removed before NFKC, so ে + া compose into ো.
    assert normalize_text("ক\u09c7\u200c\u09be") == normalize_text("কো") == "কো"
    assert normalize_text("ক\u09c7\u200d\u09d7") == "কৌ"


def test_quotes_that_nfkc_decomposes_are_mapped_first():
    assert normalize_text("it\u00b4s") == "it's"                      # ´ would become ' \u0301'
    assert normalize_text("\u2033quoted\u2033") == '"quoted"'          # ″ would become two primes
    assert normalize_text("\u2036quoted\u2033") == '"quoted"'          # ‶ likewise
    assert normalize_text("\u2039a\u203a \u275cb\u275b \u275dc\u275e") == "'a' 'b' \"c\""
    assert normalize_text("\u2034") == "'''"                            # NFKC's own output is mapped too


def test_bidi_marks_and_controls_are_invisible():
    plain = "ঢাকা 2024 Dhaka"
    marked = "\u200fঢাকা\u200e \u202a2024\u202c \u2067Dhaka\u2069\u061c"
    assert normalize_text(marked) == plain


REAL_PARAGRAPHS = [
    "Related research shows that river erosion has displaced 20,000 families in the last decade.",
    "Subscribers to the new mobile banking service grew by 30 percent, the central bank said.",
    "Advertisements for the new housing project appeared in every newspaper on Friday.",
    "Copyright lawyers argued that the ruling would change how newspapers license photographs.",
    "Sponsored by the ministry, the programme trains 5,000 young people every year.",
]
CHROME = ["Related", "Related: Flood toll rises to 12", "Read more: https://x.y/z", "Read more https://x.y/z",
          "Advertisement", "Share this article", "Follow us on Facebook", "Subscribe to our newsletter",
          "© 2024 The Daily Star. All rights reserved.", "Copyright 2024 bdnews24.com", "আরও পড়ুন: অন্য খবর"]


def test_default_boilerplate_keeps_real_paragraphs_and_drops_chrome():
    from newsdedup.config import load_config

    c = load_config().content
    body = "\n".join(REAL_PARAGRAPHS + CHROME)
    assert strip_boilerplate(body, c.boilerplate_lines, c.boilerplate_max_chars) == "\n".join(REAL_PARAGRAPHS)


def test_a_long_line_is_never_boilerplate():
    line = "Read more: " + "the minister said the plan would be revised " * 6
    assert strip_boilerplate(line, BOILER, 200) == line
    assert strip_boilerplate(line, BOILER, 1000) == ""


def test_body_text_equals_line_by_line_normalisation():
    body = "  Para\u00a0one.\r\nRead more: x\n\n\u201cQuoted\u201d \u2014 end\u2028ক\u09c7\u200c\u09be\x85tail"
    lines = [normalize_text(line) for line in strip_boilerplate(body, BOILER).splitlines()]
    assert content_key("T", body, BOILER) == "T\n" + " ".join(x for x in lines if x)


def test_body_text_skips_the_whitespace_collapse_only_where_nothing_would_collapse():
    # body_text splits lines into words only when a compiled pass finds something to collapse:
    # doubled, leading or trailing spaces, or whitespace other than ' ' (tab, ogham space mark).
    bodies = ["one two\nthree", "one  two", " one", "one \nthree", "one\n two", "one\ttwo", "one\u1680two",
              "ক খ\n\nগ", "tail "]
    for body in bodies:
        assert body_text(body, []) == " ".join(x for x in (" ".join(line.split()) for line in body.split("\n")) if x)


def test_script_counts_read_every_utf8_length():
    # Counted on UTF-8 bytes: 1-byte letters, 2-byte Latin (U+00C0-U+024F, not U+00BF or U+0250),
    # 3-byte Bengali block (U+0980-U+09FF, not U+0A00), 4-byte characters in neither.
    texts = ["Ab\u00c0\u024f\u00bf\u0250", "\u0980\u09ff\u0a00\u097f", "\U0001f600x\u0995", ""]
    bengali, latin = script_counts(texts)
    assert bengali.tolist() == [0, 2, 1, 0]
    assert latin.tolist() == [4, 0, 1, 0]


def test_bangla_words_keep_their_vowel_signs():
    from newsdedup.stages.simhash.reference import patterns

    token, _ = patterns()
    assert token.findall("বাংলাদেশের নির্বাচন কমিশন") == ["বাংলাদেশের", "নির্বাচন", "কমিশন"]
