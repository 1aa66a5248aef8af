"""scripts/gpu_check.sh cannot rot: its --tiny --device cpu mode runs here in seconds, end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_gpu_check_tiny_on_cpu(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "PYTHONPATH": str(REPO / "lib")}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "gpu_check.sh"), "--tiny", "--device", "cpu"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "gpu_check.json").read_text())
    assert summary == json.loads(proc.stdout[proc.stdout.index("{"):])
    assert {r["dtype"] for r in summary["runs"]} == {"fp32", "bf16", "fp16"}
    assert all(r["docs_per_s"] > 0 for r in summary["runs"])
    # Low precision stays close to fp32 even on random weights (the GPU goal is >= 0.999 on BGE-M3's shape).
    assert set(summary["cosine_vs_fp32"]) == {"bf16", "fp16"}
    assert all(0.95 < c["min"] <= c["mean"] <= 1.0 + 1e-5 for c in summary["cosine_vs_fp32"].values())
    assert summary["mean_tokens"] > 100 and summary["goal"]["docs_per_s"] == 1200
