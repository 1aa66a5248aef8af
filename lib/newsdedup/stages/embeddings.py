"""Sentence embeddings for stage 4: model loading, device choice, batched encoding.

Nothing here touches Spark, so it runs the same on the driver, in a Python
worker of an executor, and in unit tests. Models are cached per process: a
Python worker that Spark reuses for many tasks loads its model once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from ..config import ConfigError

if TYPE_CHECKING:
    from ..config import SemanticConfig

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

