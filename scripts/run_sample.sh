#!/usr/bin/env bash
# One command from a fresh checkout to duplicate_links: set up, then run the
# cascade on the bundled sample into out/sample (Delta tables + embedded Postgres).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 PYSPARK_PYTHON="$PWD/.venv/bin/python"
.venv/bin/newsdedup run --input samples/articles.parquet --output out/sample "$@"
echo
# Stage 4's links of the latest run, with both titles (delta-rs: no Spark needed to look).
.venv/bin/python - <<'EOF'
from pathlib import Path

from deltalake import DeltaTable

if Path("out/sample/duplicate_links").exists():
    links = DeltaTable("out/sample/duplicate_links").to_pandas()
    docs = DeltaTable("out/sample/documents").to_pandas(columns=["id", "lang", "title"]).set_index("id")
    latest = links[(links["run_id"] == links["run_id"].max()) & (links["stage"] == "semantic")]
    print(f"stage 4 (semantic) links in this run: {len(latest)}")
    for r in latest.itertuples():
        d, c = docs.loc[r.duplicate_id], docs.loc[r.canonical_id]
        print(f"  {r.duplicate_id} [{d.lang}] -> {r.canonical_id} [{c.lang}]  cosine {r.score:.3f}  {str(d.title)[:60]!r}")
EOF
echo
echo "Delta tables: out/sample/{documents,duplicate_links,quarantine,runs,embeddings}"
echo "Postgres:     the 'postgres: embedded server ...' line above; password in out/sample/pgdata.secret"
echo "              (.venv/bin/python -c \"from newsdedup.io import pg_embedded as e; print(e.start('out/sample/pgdata'))\" prints a full DSN)"
