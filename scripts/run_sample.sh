#!/usr/bin/env bash
# One command from a fresh checkout to duplicate_links: set up, then run the
# cascade on the bundled sample into out/sample (Delta tables + embedded Postgres).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 PYSPARK_PYTHON="$PWD/.venv/bin/python"
.venv/bin/newsdedup run --input samples/articles.parquet --output out/sample "$@"
echo
echo "Delta tables: out/sample/{documents,duplicate_links,quarantine,runs}"
echo "Postgres:     the 'postgres: embedded server ...' line above; password in out/sample/pgdata.secret"
echo "              (.venv/bin/python -c \"from newsdedup.io import pg_embedded as e; print(e.start('out/sample/pgdata'))\" prints a full DSN)"
