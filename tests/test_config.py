"""The typed configuration: every section is checked once, at load time, with the key named."""

from __future__ import annotations

import pytest

from newsdedup import cli
from newsdedup.config import Config, ConfigError, load_config


def test_defaults_load_into_typed_sections():
    conf = load_config()
    assert isinstance(conf, Config)
    assert conf.simhash.bands == 4 and conf.simhash.language("bn").features == "char"
    assert conf.simhash.language("xx") == conf.simhash.languages["default"]
    assert conf.url.sources["dailystar"].allow == ["id"]
    # Stage 4's thresholds live per model; BGE-M3's are explicit (not calibrated), none override them.
    assert conf.semantic.thresholds is None
    assert conf.semantic.models["BAAI/bge-m3"].thresholds.same_language == pytest.approx(0.85)
    assert conf.semantic.models["all-MiniLM-L6-v2"].languages == ["en"]


@pytest.mark.parametrize("bands", [2, 8, 5])
def test_bands_the_documents_table_cannot_hold_are_refused(bands):
    # 2 bands of 32 bits overflow the int band columns; 8 would need band_4..band_7.
    with pytest.raises(ConfigError, match=r"simhash\.bands"):
        load_config(overrides={"simhash": {"bands": bands}})


@pytest.mark.parametrize("overrides, key", [
    ({"simhash": {"bands": "four"}}, "simhash.bands='four': expected an integer"),
    ({"url": {"tracking_params": "utm_*"}}, r"url.tracking_params='utm_\*': expected a list of strings"),
    ({"url": {"tracking_params": ["*"]}}, r"url.tracking_params\[0\]"),
    ({"simhash": {"max_band_bucket": -1}}, "simhash.max_band_bucket=-1"),
    ({"input": {"max_text_chars": -5}}, "input.max_text_chars=-5"),
    ({"input": {"naive_timezone": "Mars/Olympus"}}, "input.naive_timezone='Mars/Olympus'"),
    ({"simhash": {"languages": {"en": {"features": "letters"}}}}, "simhash.languages.en.features"),
    ({"semantic": {"device": "tpu"}}, "semantic.device='tpu'"),
    ({"spark": {"parquet_compression": "brotli"}}, "spark.parquet_compression='brotli': expected one of zstd, snappy"),
    ({"semantic": {"batch_size": 0}}, "semantic.batch_size=0"),
    ({"postgres": {"embedded_settings": {"shared_buffers": "1GB; DROP"}}}, "postgres.embedded_settings.shared_buffers"),
    ({"postgres": {"embedded_settings": {"Work Mem": "4MB"}}}, "postgres.embedded_settings='Work Mem'"),
    ({"semantic": {"enabled": "yes"}}, "semantic.enabled='yes': expected true or false"),
    ({"simhash": {"bandz": 4}}, "simhash.bandz: unknown key"),
    ({"content": {"boilerplate_lines": ["(unclosed"]}}, r"content.boilerplate_lines\[0\]"),
])
def test_bad_values_name_the_key_and_what_was_expected(overrides, key):
    with pytest.raises(ConfigError, match=key):
        load_config(overrides=overrides)


def test_with_overrides_validates_and_leaves_the_original_alone():
    conf = load_config()
    strict = conf.with_overrides({"simhash": {"languages": {"en": {"max_hamming": 1}}}})
    assert strict.simhash.language("en").max_hamming == 1
    assert conf.simhash.language("en").max_hamming == 3
    with pytest.raises(ConfigError):
        conf.with_overrides({"semantic": {"window_hours": 0}})


def test_an_invalid_semantic_setting_fails_before_any_spark_work(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("semantic:\n  enabled: true\n  thresholds:\n    same_language: 2\n")
    # The input does not exist either: the config error must come first, with exit code 2.
    code = cli.main(["run", "--input", str(tmp_path / "missing"), "--output", str(tmp_path / "out"),
                     "--conf", str(bad)])
    assert code == 2
    assert "semantic.thresholds.same_language=2" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
