#!/usr/bin/env bash
# Stage-4 GPU check, one command from the repository root, a few minutes on one GPU, no downloads:
#   scripts/gpu_check.sh                    # BGE-M3's shape (random weights), bf16 and fp16 vs fp32
#   scripts/gpu_check.sh --tiny --device cpu   # the same code path on a 2-layer model (what CI runs)
# Prints a JSON summary; with OUT set it is also written to $OUT/gpu_check.json (scripts/gpu_check.py).
# Needs torch, transformers and sentence-transformers; pyspark is not needed. RUN_TESTS=1 also runs
# the stage-4 Spark tests on CUDA when pyspark is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate 2>/dev/null || true
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${PYTHON:-python}
timeout 290 "$PY" scripts/gpu_check.py "$@"
if [[ "${RUN_TESTS:-0}" == 1 ]]; then
  if "$PY" -c "import pyspark" 2>/dev/null; then
    NEWSDEDUP_TEST_DEVICE=cuda PYTHONPATH=lib timeout 600 "$PY" -m pytest -q tests/test_embeddings.py tests/test_semantic.py -x
  else
    echo "gpu_check: pyspark is not installed here; the Spark stage-4 tests were not run" >&2
  fi
fi
