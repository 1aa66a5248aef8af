#!/usr/bin/env bash
# Stage-4 GPU check, sized for a few minutes on one GPU. Run from the repository root:
#   scripts/gpu_check.sh            (small offline model)
#   MODEL=/models/bge-m3 scripts/gpu_check.sh
# 1. torch sees CUDA; 2. throughput on cuda (fp16) vs cpu; 3. the Spark stage-4 tests with device=cuda.
# Record the cuda docs_per_s (BGE-M3, fp16) in docs/semantic.md; it has not been run on a GPU yet.
set -euo pipefail
. .venv/bin/activate 2>/dev/null || true
export HF_HUB_OFFLINE=1
MODEL_ARG=${MODEL:+--model "$MODEL"}
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device visible'; print('cuda', torch.cuda.get_device_name(0))"
timeout 240 python scripts/embed_throughput.py --device cuda --fp16 --docs 4096 --batch-size 128 $MODEL_ARG
timeout 120 python scripts/embed_throughput.py --device cpu --docs 256 $MODEL_ARG
NEWSDEDUP_TEST_DEVICE=cuda timeout 300 python -m pytest -q tests/test_embeddings.py tests/test_semantic.py -x
