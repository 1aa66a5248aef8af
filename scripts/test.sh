#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite: real Spark (local[2]),
# real Delta tables, a real embedded PostgreSQL 18 with pgvector.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYSPARK_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m pytest "$@"
