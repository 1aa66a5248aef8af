"""A tiny random-weight model of BGE-M3's kind, built offline at test time (a plain module).

BGE-M3 is an XLM-RoBERTa encoder whose sentence vector is the normalised CLS
token. tiny_bge_m3(dir) builds the same architecture kind (XLMRobertaModel,
type_vocab_size 1, positions offset by the padding index) with 2 layers and
hidden size 64, wraps it in sentence-transformers with CLS pooling + Normalize
and saves it. Its tokenizer is a WordPiece vocabulary trained with the
`tokenizers` library on the sample's English and Bangla text (and the stage-4
test articles), so Bangla is cut into real pieces, not [UNK]; special tokens
are XLM-R's (<s> ... </s>, <pad> = 1). Nothing is downloaded.

    python tests/tiny_models.py OUT_DIR      # build one by hand
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]    # XLM-R's ids 0..4


def corpus() -> list[str]:
    """English and Bangla text: the sample's titles and bodies and the stage-4 test articles."""
    import pandas as pd

    texts: list[str] = []
    sample = REPO / "samples" / "articles.parquet"
    if sample.exists():
        df = pd.read_parquet(sample, columns=["title", "body"])
        texts += [str(t) for t in df["title"].dropna()] + [str(b) for b in df["body"].dropna()]
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from semantic_data import ARTICLES
    except ImportError:   # outside the test tree (scripts/gpu_check.py copies only this file's idea)
        ARTICLES = {}
    texts += [f"{t}\n{b}" for t, b in ARTICLES.values()]
    return texts


def train_tokenizer(texts: list[str], vocab_size: int = 2000):
    """A transformers fast tokenizer with XLM-R's special tokens, WordPiece trained on texts."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="<unk>"))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                                             min_frequency=1))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[(s, tok.token_to_id(s)) for s in ("<s>", "</s>")])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", cls_token="<s>",
                                   sep_token="</s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>",
                                   model_max_length=512)
    fast.model_input_names = ["input_ids", "attention_mask"]
    return fast


def build(out: str | Path, *, layers: int = 2, hidden: int = 64, heads: int = 4, intermediate: int = 128,
          max_seq_length: int = 128, max_positions: int | None = None, vocab_size: int | None = None,
          tokenizer=None, seed: int = 0, init_range: float = 0.5) -> Path:
    """An XLM-RoBERTa sentence-transformers model (CLS pooling + Normalize) with random weights in out.

    init_range 0.5 (XLM-R's own is 0.02): with tiny random weights at 0.02 every CLS vector is
    the same (cosine 1.000 between any two texts); at 0.5 texts spread (cosines 0.4-0.95), so
    tests can set thresholds between measured pairs.
    """
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import XLMRobertaConfig, XLMRobertaModel

    try:                                   # sentence-transformers >= 6
        from sentence_transformers.base.modules import Normalize, Transformer
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError:
        from sentence_transformers.models import Normalize, Pooling, Transformer

    out = Path(out)
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    tok = tokenizer if tokenizer is not None else train_tokenizer(corpus())
    tok.save_pretrained(raw)
    torch.manual_seed(seed)
    config = XLMRobertaConfig(
        vocab_size=vocab_size or len(tok), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=intermediate, max_position_embeddings=max_positions or max_seq_length + 2,
        type_vocab_size=1, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, initializer_range=init_range)
    XLMRobertaModel(config).eval().save_pretrained(raw)
    body = Transformer(str(raw), max_seq_length=max_seq_length)
    dim = (getattr(body, "get_embedding_dimension", None) or body.get_word_embedding_dimension)()
    model = SentenceTransformer(modules=[body, Pooling(dim, pooling_mode="cls"), Normalize()], device="cpu")
    model.save(str(out / "model"))
    return out / "model"


def tiny_bge_m3(out: str | Path) -> Path:
    """The test model: BGE-M3's architecture kind, 2 layers, hidden 64; its directory."""
    return build(out)


if __name__ == "__main__":
    print(tiny_bge_m3(sys.argv[1]))
