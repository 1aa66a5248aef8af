#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite: real Spark (local[2]),
# real Delta tables, a real embedded PostgreSQL 18 with pgvector.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYSPARK_PYTHON="$PWD/.venv/bin/python"
# The standalone-cluster test starts a master and two workers and takes minutes of its
# own: it runs when selected (./scripts/test.sh -m cluster), everything else by default.
case " $* " in *" -m "*) ;; *) set -- -m "not cluster" "$@" ;; esac
exec .venv/bin/python -m pytest "$@"
