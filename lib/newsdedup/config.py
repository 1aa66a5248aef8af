"""Configuration: the bundled defaults deep-merged with an optional user YAML file."""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import yaml


class ConfigError(ValueError):
    """A configuration value is missing or inconsistent."""


def _default_text() -> str:
    # conf/ lives at the repository root; installed wheels and the --py-files zip carry a copy.
    repo_conf = Path(__file__).resolve().parents[2] / "conf" / "default.yaml"
    if repo_conf.is_file():
        return repo_conf.read_text(encoding="utf-8")
    return resources.files("newsdedup").joinpath("default.yaml").read_text(encoding="utf-8")


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Return base with override merged in; nested mappings merge, everything else replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    conf = yaml.safe_load(_default_text())
    if path is not None:
        with open(path, encoding="utf-8") as fh:
            user = yaml.safe_load(fh) or {}
        if not isinstance(user, Mapping):
            raise ConfigError(f"{path}: top level must be a mapping")
        conf = deep_merge(conf, user)
    if overrides:
        conf = deep_merge(conf, overrides)
    validate(conf)
    return conf


def simhash_language(conf: Mapping[str, Any], lang: str | None) -> dict[str, Any]:
    langs = conf["simhash"]["languages"]
    return langs.get(lang or "default", langs["default"])


def validate(conf: Mapping[str, Any]) -> None:
    sim = conf["simhash"]
    bands = int(sim["bands"])
    if bands < 1 or 64 % bands:
        raise ConfigError(f"simhash.bands={bands}: must divide 64")
    if "default" not in sim["languages"]:
        raise ConfigError("simhash.languages needs a 'default' entry")
    for lang, spec in sim["languages"].items():
        if spec.get("features") not in ("word", "char"):
            raise ConfigError(f"simhash.languages.{lang}.features must be 'word' or 'char'")
        if int(spec.get("ngram", 0)) < 1:
            raise ConfigError(f"simhash.languages.{lang}.ngram must be >= 1")
        mh = int(spec.get("max_hamming", -1))
        # Pigeonhole: two 64-bit fingerprints differing in <= bands-1 bits agree on
        # at least one band. A larger threshold would silently lose pairs.
        if not 0 <= mh <= bands - 1:
            raise ConfigError(
                f"simhash.languages.{lang}.max_hamming={mh}: must be between 0 and bands-1={bands - 1}, "
                "otherwise the band join misses pairs")
    sources = conf["url"].get("sources") or {}
    for name, rules in sources.items():
        if not isinstance(rules, Mapping):
            raise ConfigError(f"url.sources.{name} must be a mapping with strip/allow lists")
