"""Sentence embeddings for stage 4: model loading, device choice, batched encoding.

Nothing here touches Spark, so it runs the same on the driver, in a Python
worker of an executor, and in unit tests. Models are cached per process: a
Python worker that Spark reuses for many tasks loads its model once.

Encoding (encode): texts are sorted by length and cut into batches of at most
batch_tokens padded tokens (and batch_size texts); a background thread
tokenises the next batches while the current one runs forward, and the vectors
come back in the input order. The model runs through torch (fp32, or bf16/fp16
on CUDA) or through ONNX Runtime on CPU (fp32 or dynamic int8), exported once
per machine into a cache directory. sentence-transformers stays the container:
its tokenizer, its pooling and its normalisation are used as they are.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import importlib
import importlib.util
import os
import queue
import re
import shutil
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from ...config import ConfigError

if TYPE_CHECKING:
    from ...config import ModelSpec, SemanticConfig, SemanticThresholds

DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("torch", "onnx", "onnx-int8")
# Vectors of an ONNX backend are not bit-for-bit those of torch (int8 not even close to
# it): they get their own model_version, so they are never compared with fp32 ones.
BACKEND_SUFFIX = {"torch": "", "onnx": "+onnx", "onnx-int8": "+onnx-int8"}
ONNX_EXPORT_FORMAT = 1   # bump when the export below changes: a new cache key, a new export

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


def with_backend(version: str, backend: str) -> str:
    """version tagged with the backend's suffix (once): 'bge-m3@v2' + onnx-int8 -> 'bge-m3@v2+onnx-int8'."""
    suffix = BACKEND_SUFFIX[backend]
    return version if not suffix or version.endswith(suffix) else version + suffix


def _spark_requests_gpus() -> bool:
    """True when a running SparkContext gives its tasks GPUs (resource scheduling)."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return False
    sc = SparkContext._active_spark_context
    if sc is None:
        return False
    amount = sc.getConf().get("spark.task.resource.gpu.amount") or sc.getConf().get(
        "spark.executor.resource.gpu.amount")
    try:
        return float(amount or 0) > 0
    except ValueError:
        return False


def backend_for(sem: "SemanticConfig", gpu: bool | None = None) -> str:
    """The concrete backend (torch, onnx, onnx-int8) of a conf whose backend may be 'auto'.

    auto: torch when the run embeds on a GPU (device cuda*, or device auto with a
    GPU seen here or requested from Spark's resource scheduling), otherwise
    onnx-int8 when onnxruntime is installed, otherwise torch. Decided once, on
    the driver: every executor then runs the same backend, so one run writes one
    model_version.
    """
    backend = (getattr(sem, "backend", None) or "auto").lower()
    if backend != "auto":
        if backend not in BACKENDS:
            raise EmbeddingConfigError(f"semantic.backend={backend!r}: expected auto, {', '.join(BACKENDS)}")
        return backend
    device = (sem.device or "auto").lower()
    if device.startswith("cuda"):
        return "torch"
    if device == "auto":
        if gpu is None:
            gpu = _spark_requests_gpus() or _cuda_available()
        if gpu:
            return "torch"
    return "onnx-int8" if importlib.util.find_spec("onnxruntime") is not None else "torch"


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


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
        run = f"backend {self.sem.backend}, {self.sem.max_seq_length or 'model default'} tokens"
        return (f"semantic: model_version={self.version} ({why}languages {langs}; {run}); "
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


def resolve(sem: "SemanticConfig", with_thresholds: bool = True, gpu: bool | None = None) -> ResolvedModel:
    """Which weights run (the configured model, else the fallback), their version, coverage and thresholds.

    Also fixes the backend (backend_for; gpu: whether the run embeds on GPUs, None:
    look) and the tokens per text (semantic.max_seq_length, else the model's
    semantic.models entry). The version carries the backend's suffix.
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
    backend = backend_for(run_sem, gpu)
    version = with_backend(model_version(run_sem), backend)
    key, spec = sem.model_spec(version, run_sem.model, *packaged_names(run_sem.model))
    run_sem = dataclasses.replace(run_sem, model_version=version, backend=backend,
                                  max_seq_length=run_sem.max_seq_length or spec.max_seq_length)
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


@dataclass
class Encoder:
    """A loaded model: sentence-transformers (tokenizer, pooling, normalisation) plus how it runs."""

    st: Any                      # the SentenceTransformer
    device: str                  # cpu, cuda, cuda:N (ONNX backends: always cpu)
    backend: str                 # torch, onnx, onnx-int8
    dtype: str                   # fp32, fp16, bf16 (torch); fp32 for ONNX (int8 weights inside)
    session: Any = None          # onnxruntime.InferenceSession of the ONNX backends
    onnx_path: str | None = None

    @property
    def max_seq_length(self) -> int:
        return int(self.st.max_seq_length)


def resolve_dtype(requested: str | None, device: str, backend: str = "torch") -> str:
    """fp32, fp16 or bf16: auto is bf16 on CUDA and fp32 on CPU; the ONNX backends run fp32 inputs."""
    requested = (requested or "auto").lower()
    if requested not in ("auto", "fp32", "fp16", "bf16"):
        raise EmbeddingConfigError(f"semantic.dtype={requested!r}: expected auto, fp32, fp16 or bf16")
    if backend != "torch":
        if requested not in ("auto", "fp32"):
            raise EmbeddingConfigError(f"semantic.dtype={requested!r} needs backend torch (backend is {backend})")
        return "fp32"
    if requested == "auto":
        return "bf16" if device.startswith("cuda") else "fp32"
    return requested


def cache_root(sem_cache_dir: str | None = None) -> Path:
    """semantic.cache_dir, else $NEWSDEDUP_CACHE, else ~/.cache/newsdedup."""
    root = sem_cache_dir or os.environ.get("NEWSDEDUP_CACHE") or "~/.cache/newsdedup"
    return Path(root).expanduser()


def load_model(name: str, device: str = "cpu", *, revision: str | None = None,
               max_seq_length: int | None = None, cpu_threads: int | None = None,
               backend: str = "torch", dtype: str | None = None, cache_dir: str | None = None) -> Encoder:
    """An Encoder for a hub name or a local directory, loaded once per process.

    backend onnx / onnx-int8: the model is exported (and quantised) into
    cache_dir once per machine (a file lock keeps concurrent workers from
    exporting twice) and run by ONNX Runtime on CPU with cpu_threads threads.
    """
    if backend not in BACKENDS:
        raise EmbeddingConfigError(f"semantic.backend={backend!r}: expected one of {', '.join(BACKENDS)}")
    if backend != "torch":
        device = "cpu"
    dtype = resolve_dtype(dtype, device, backend)
    key = (name, revision, device, max_seq_length, backend, dtype, cpu_threads)
    if key in _MODELS:
        return _MODELS[key]
    from sentence_transformers import SentenceTransformer

    import torch

    if cpu_threads and device == "cpu":
        torch.set_num_threads(int(cpu_threads))
    local = Path(name).expanduser()
    source = str(local) if local.exists() else name
    if not local.exists() and os.environ.get("HF_HUB_OFFLINE") == "1" and "/" not in name:
        raise EmbeddingConfigError(
            f"semantic.model={name!r} is neither a local directory nor a hub id, and HF_HUB_OFFLINE=1")
    model = SentenceTransformer(source, device=device, revision=None if local.exists() else revision)
    if max_seq_length:
        model.max_seq_length = int(max_seq_length)
    model.eval()
    if dtype != "fp32":
        model.to({"fp16": torch.float16, "bf16": torch.bfloat16}[dtype])
    encoder = Encoder(model, device, backend, dtype)
    if backend != "torch":
        encoder.onnx_path = str(export_onnx(model, source, revision, backend, cache_root(cache_dir)))
        encoder.session = _ort_session(encoder.onnx_path, cpu_threads)
        _release_torch_weights(model)
    _MODELS[key] = encoder
    return encoder


def model_for(sem: "SemanticConfig", gpu_addresses: Sequence[str] = (), cpu_threads: int | None = None) -> Encoder:
    """The model described by the semantic conf section, on the device this process should use.

    cpu_threads: used when semantic.cpu_threads is null (embed() passes spark.task.cpus).
    """
    from . import packaged_models

    packaged_models.ensure(sem.model)   # a packaged model's directory, built on this machine if absent
    backend = backend_for(sem, bool(gpu_addresses) or None)
    device = "cpu" if backend != "torch" else pick_device(sem.device, gpu_addresses)
    return load_model(sem.model, device, revision=sem.revision, max_seq_length=sem.max_seq_length,
                      cpu_threads=sem.cpu_threads or cpu_threads, backend=backend, dtype=sem.dtype,
                      cache_dir=sem.cache_dir)


# ---------------------------------------------------------------- ONNX export

def _input_names(st) -> list[str]:
    names = list(getattr(st.tokenizer, "model_input_names", None) or ["input_ids", "attention_mask"])
    return [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in names]


def _export_key(source: str, revision: str | None, backend: str) -> str:
    local = Path(source).expanduser()
    if local.exists():
        # The weights' identity: their path and the size and mtime of their files.
        stamp = [str(local.resolve())] + [f"{f.name}:{f.stat().st_size}:{int(f.stat().st_mtime)}"
                                          for f in sorted(local.iterdir()) if f.is_file()]
    else:
        stamp = [source, str(revision)]
    digest = hashlib.sha256("\n".join(stamp + [backend, str(ONNX_EXPORT_FORMAT)]).encode()).hexdigest()[:16]
    tail = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(source.rstrip("/")).name)
    return f"{tail}-{backend}-{digest}"


def export_onnx(st, source: str, revision: str | None, backend: str, root: Path) -> Path:
    """<root>/onnx/<model>-<backend>-<key>/model.onnx: the transformer exported to ONNX (and for
    onnx-int8 its MatMul weights quantised to int8, per channel); exported once, reused after."""
    target = root / "onnx" / _export_key(source, revision, backend)
    path = target / "model.onnx"
    if path.exists():
        return path
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(str(target) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # another worker of this machine may be exporting it
        try:
            if path.exists():
                return path
            tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
            try:
                _export(st, tmp / "fp32.onnx")
                if backend == "onnx-int8":
                    from onnxruntime.quantization import QuantType, quantize_dynamic

                    quantize_dynamic(str(tmp / "fp32.onnx"), str(tmp / "model.onnx"), weight_type=QuantType.QInt8,
                                     per_channel=True, op_types_to_quantize=["MatMul"])
                    (tmp / "fp32.onnx").unlink()
                else:
                    (tmp / "fp32.onnx").rename(tmp / "model.onnx")
                os.replace(tmp, target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return path


def _export(st, out: Path) -> None:
    """The transformer module (token embeddings) to ONNX, with dynamic batch and sequence axes."""
    import torch

    names = _input_names(st)
    hf = st[0].model
    attn = getattr(hf.config, "_attn_implementation", None)

    class Body(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *inputs):
            return self.inner(**dict(zip(names, inputs)), return_dict=True).last_hidden_state

    # A padded example (the second row shorter), so that masking is traced as masking; eager
    # attention traces into plain ops that every ONNX Runtime build runs.
    ids = torch.full((2, 8), 5, dtype=torch.long)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    example = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    axes = {n: {0: "batch", 1: "tokens"} for n in names + ["token_embeddings"]}
    try:
        if attn is not None:
            hf.config._attn_implementation = "eager"
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")      # the tracer's notes on shapes it fixes; checked by the tests
            torch.onnx.export(Body(hf.float()).eval(), tuple(example[n] for n in names), str(out),
                              input_names=names, output_names=["token_embeddings"], dynamic_axes=axes,
                              opset_version=17, dynamo=False)
    finally:
        if attn is not None:
            hf.config._attn_implementation = attn


def _ort_session(path: str, threads: int | None):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = int(threads)
        opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _release_torch_weights(st) -> None:
    """ONNX Runtime holds the transformer now: free torch's copy of its weights (pooling stays)."""
    import torch

    for p in st[0].model.parameters():
        p.data = torch.empty(0, dtype=p.dtype)


# ---------------------------------------------------------------- encoding

def plan_batches(lengths: np.ndarray, batch_size: int, batch_tokens: int) -> list[np.ndarray]:
    """Positions of lengths grouped into batches, longest first: at most batch_size texts and at most
    batch_tokens padded tokens (texts x the batch's longest text) per batch; a single text may exceed it."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    batches, start = [], 0
    while start < len(order):
        width = max(1, int(lengths[order[start]]))
        n = max(1, min(int(batch_size), int(batch_tokens) // width))
        batches.append(order[start:start + n])
        start += n
    return batches


def _collate(ids: list[list[int]], names: list[str], pad_id: int) -> dict[str, np.ndarray]:
    width = max(len(x) for x in ids)
    input_ids = np.full((len(ids), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.int64)
    for i, x in enumerate(ids):
        input_ids[i, :len(x)] = x
        mask[i, :len(x)] = 1
    arrays = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
    return {n: arrays[n] for n in names}


def _batches(enc: Encoder, texts: Sequence[str], batch_size: int, batch_tokens: int, chunk: int):
    """(positions, padded arrays) for every batch: texts sorted by characters, tokenised a chunk at a
    time, each chunk cut into token-budget batches by its exact token lengths."""
    tok = enc.st.tokenizer
    names, pad_id = _input_names(enc.st), int(tok.pad_token_id or 0)
    # The model's default prompt (E5's "query: "), as SentenceTransformer.encode would prepend it.
    default = getattr(enc.st, "default_prompt_name", None)
    prompt = (getattr(enc.st, "prompts", None) or {}).get(default, "") if default else ""
    by_chars = np.argsort(-np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)), kind="stable")
    for start in range(0, len(by_chars), chunk):
        pos = by_chars[start:start + chunk]
        ids = tok([prompt + texts[i] for i in pos], truncation=True, max_length=enc.max_seq_length, padding=False,
                  return_attention_mask=False, return_token_type_ids=False)["input_ids"]
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        for batch in plan_batches(lengths, batch_size, batch_tokens):
            yield pos[batch], _collate([ids[i] for i in batch], names, pad_id)


def _prefetch(gen, depth: int = 2):
    """Runs a generator in a background thread, `depth` items ahead (tokenising beside the forward pass)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def work():
        try:
            for item in gen:
                if stop.is_set():
                    return
                q.put(item)
        except BaseException as exc:  # handed to the consumer
            q.put(exc)
            return
        q.put(done)

    thread = threading.Thread(target=work, name="newsdedup-tokenize", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while thread.is_alive():     # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                thread.join(0.05)


def _forward(enc: Encoder, arrays: dict[str, np.ndarray]):
    """Unit-length float32 vectors (numpy) of one padded batch."""
    import torch

    with torch.inference_mode():
        if enc.session is not None:
            hidden = enc.session.run(["token_embeddings"], arrays)[0]
            features = {"token_embeddings": torch.from_numpy(hidden),
                        "attention_mask": torch.from_numpy(arrays["attention_mask"])}
            for module in list(enc.st)[1:]:           # pooling, normalisation: sentence-transformers'
                features = module(features)
        else:
            features = {k: torch.from_numpy(v).to(enc.device, non_blocking=True) for k, v in arrays.items()}
            features = enc.st(features)
        vecs = torch.nn.functional.normalize(features["sentence_embedding"].float(), dim=1)
        return vecs.cpu().numpy()


def encode(model, texts: Sequence[str], batch_size: int = 32, batch_tokens: int | None = None) -> np.ndarray:
    """Unit-length float32 vectors, one row per text, in the order of texts. Empty texts are refused.

    Batches hold at most batch_size texts and batch_tokens padded tokens (None:
    batch_size x max_seq_length); texts are sorted by length so that a batch
    pads little, and the next batches are tokenised in a background thread.
    """
    enc = model if isinstance(model, Encoder) else _wrap(model)
    if any(not t or not t.strip() for t in texts):
        raise ValueError("encode() got an empty text; empty documents must be skipped before embedding")
    out = np.zeros((len(texts), embedding_dim(enc)), dtype=np.float32)
    if not len(texts):
        return out
    if enc.backend == "onnx-int8":
        # Dynamic int8 quantisation scales activations per tensor, i.e. per batch: batched, a
        # text's vector would move with its batch-mates (cosine 0.861-0.872 for one pair). One
        # text per pass makes every vector a function of its text alone, and on CPU it is no
        # slower (one thread, 128 tokens: 62-66 docs/s against 53-57 in batches of 32).
        batch_size, batch_tokens = 1, None
    budget = int(batch_tokens or int(batch_size) * enc.max_seq_length)
    chunk = max(256, 4 * int(batch_size))
    for pos, arrays in _prefetch(_batches(enc, list(texts), int(batch_size), budget, chunk)):
        out[pos] = _forward(enc, arrays)
    return out


def _wrap(st) -> Encoder:
    import torch

    dtype = {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(next(st.parameters()).dtype, "fp32")
    return Encoder(st, str(st.device), "torch", dtype)


def embedding_dim(model) -> int:
    st = model.st if isinstance(model, Encoder) else model
    getter = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
    return int(getter())


def vector_literal(values: Sequence[float]) -> str:
    """pgvector's text form: [0.1,0.2,...] (what the live lookups send; the loads COPY vectors in binary)."""
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


# ---------------------------------------------------------------- the text a document is embedded from

JAVA_SPACE = " \t\n\x0b\f\r"   # what Java's \s (the regex in step._blank_to_null) strips


def embedding_text(title: str | None, body: str | None, max_chars: int) -> str:
    """The text one article is embedded from: title, newline, body, each trimmed, cut to max_chars."""
    parts = [p.strip(JAVA_SPACE) for p in (title, body) if p is not None]
    return "\n".join(p for p in parts if p)[: int(max_chars)]


def document_text(title: str | None, body: str | None, max_chars: int) -> str:
    """What step.with_text gives one document: embedding_text, or '' when the body is blank (a page
    without body is never embedded on its headline alone)."""
    if body is None or not body.strip(JAVA_SPACE):
        return ""
    return embedding_text(title, body, max_chars)
