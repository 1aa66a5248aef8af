"""Stage 4's labelled pairs of real news: ids and labels committed, text rebuilt from local corpora.

samples/stage4_labels/*.csv hold pairs read by hand (pair_id, lang_a, doc_a, lang_b,
doc_b, label, relation, topic, reason): ids, labels and a one-line reason, never
the articles' text, which belongs to the outlets. This tool joins them with the
corpora they were read from (samples/stage4_labels/SOURCES.md says where to get
each) and writes the JSON lines `newsdedup calibrate --pairs` reads:

    python -m newsdedup_lab.realpairs --corpus /work/data/clir_en.json [--corpus ...] \\
        --out out/stage4_pairs.jsonl

A corpus is a JSON list, JSON lines or Parquet file of articles; the fields are
found by name (id: doc_id/id/article_id/url_hash; title: title/headline; body:
body/article/content/text; published: date/published_at/publication_date). Pairs
whose documents are in no corpus given are counted and left out.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Iterable

import pandas as pd

from newsdedup.stages.semantic.embeddings import embedding_text

LABELS = Path(__file__).resolve().parents[2] / "samples" / "stage4_labels"
FIELDS = {"id": ("doc_id", "id", "article_id", "url_hash"), "title": ("title", "headline"),
          "body": ("body", "article", "content", "text"),
          "published": ("published_at", "date", "publication_date", "published")}
MAX_CHARS = 4000   # what stage 4 embeds (semantic.max_chars)


def _field(record: dict, name: str):
    for key in FIELDS[name]:
        if record.get(key) not in (None, ""):
            return record[key]
    return None


def read_corpus(path: str | Path) -> dict[str, dict]:
    """id -> {title, body, published} of one corpus file."""
    p = Path(path)
    if p.suffix == ".parquet":
        records = pd.read_parquet(p).to_dict("records")
    elif p.suffix == ".jsonl":
        records = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        records = json.loads(p.read_text(encoding="utf-8"))
    out = {}
    for r in records:
        doc_id = _field(r, "id")
        if doc_id is not None:
            out[str(doc_id)] = {"title": _field(r, "title"), "body": _field(r, "body"),
                                "published": _field(r, "published")}
    return out


def read_labels(paths: Iterable[str | Path]) -> list[dict]:
    rows = []
    for path in paths:
        with open(path, newline="", encoding="utf-8") as fh:
            rows += list(csv.DictReader(fh))
    return rows


def label_files(root: str | Path = LABELS) -> list[Path]:
    return sorted(Path(root).glob("*.csv"))


def _published(value) -> str | None:
    if value is None:
        return None
    ts = pd.Timestamp(value)
    return None if pd.isna(ts) else ts.isoformat()


def pairs_with_text(labels: list[dict], corpus: dict[str, dict]) -> tuple[list[dict], list[str]]:
    """Calibrate's JSON records for the labelled pairs found in the corpus, and the pair ids not found."""
    out, missing = [], []
    for row in labels:
        a, b = corpus.get(row["doc_a"]), corpus.get(row["doc_b"])
        if a is None or b is None:
            missing.append(row["pair_id"])
            continue
        out.append({"pair_id": row["pair_id"], "label": int(row["label"]), "kind": row["relation"],
                    "topic": row["topic"], "lang_a": row["lang_a"], "lang_b": row["lang_b"],
                    "doc_a": row["doc_a"], "doc_b": row["doc_b"],
                    "text_a": embedding_text(a["title"], a["body"], MAX_CHARS),
                    "text_b": embedding_text(b["title"], b["body"], MAX_CHARS),
                    "published_a": _published(a["published"]), "published_b": _published(b["published"])})
    return out, missing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m newsdedup_lab.realpairs", description=__doc__.split("\n")[0])
    ap.add_argument("--labels", nargs="*", help="label CSV files (default: samples/stage4_labels/*.csv)")
    ap.add_argument("--corpus", action="append", required=True, help="a corpus file (repeat for several)")
    ap.add_argument("--out", required=True, help="JSON lines for newsdedup calibrate --pairs")
    args = ap.parse_args(argv)
    corpus: dict[str, dict] = {}
    for path in args.corpus:
        corpus.update(read_corpus(path))
    labels = read_labels(args.labels or label_files())
    records, missing = pairs_with_text(labels, corpus)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{len(records)} labelled pairs with text -> {args.out}; {len(missing)} not in the corpora given"
          + (f" (first: {', '.join(missing[:5])})" if missing else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
