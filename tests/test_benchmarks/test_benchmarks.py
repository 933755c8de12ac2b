"""The speed benchmark runs end to end on this backend at a toy size and writes every section it prints.

Timings themselves are not asserted (they belong to benchmarks, not tests); what is checked is that each section
measured something finite for each variant it names, so a run on a GPU machine can rely on the one command."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_speed_benchmark_writes_every_section(tmp_path):
    out = tmp_path / "speed.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "speed.py"), "--device", "cpu", "--small", "--img", "64",
           "--batch", "1", "--boxes", "100", "--iters", "1", "--threads", "1", "--json", str(out)]
    env = {**os.environ, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["info"]["device"].startswith("cpu")  # OneFlow says cpu:0

    def finite_ms(row, keys=None):
        vals = [v for k, v in row.items() if (k in keys if keys else k.endswith("_ms") or
                                                k.startswith(("ema ", "optimizer ")))]
        return bool(vals) and all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in vals)

    ciou = r["ciou_fwd_bwd_ms"]
    assert [row["boxes"] for row in ciou] == [100]
    assert {"plain", "fused (plain)"} <= set(ciou[0]) and finite_ms(ciou[0], set(ciou[0]) - {"boxes"})
    ema = r["ema_optimizer_ms"]
    assert ema["tensors"] > 100 and finite_ms(ema)
    assert sum(k.startswith("ema ") for k in ema) == 2 and sum(k.startswith("optimizer ") for k in ema) >= 2
    assert all(map(finite_ms, r["upsample"])) and "CUDA" in r["upsample_decision"]
    steps = r["train_step"]
    assert [s["flags"] for s in steps] == [False, True] and all(map(finite_ms, steps))
    variants = {v["variant"]: v for v in r["train_step_variants"]}
    assert {"plain", "flags"} <= set(variants) and variants["plain"]["x_vs_plain"] == 1.0
    assert all(map(finite_ms, variants.values()))
    assert "training step variants" in p.stdout
