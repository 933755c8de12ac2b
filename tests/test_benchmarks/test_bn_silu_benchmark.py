"""benchmarks/bn_silu.py: its policies switch the trainer's kernel on and off (and restore the setting), and the
benchmark writes its figures, which the results page renders."""
import json
import os

import pytest

from utils.backend import IS_TORCH

pytestmark = pytest.mark.skipif(not IS_TORCH, reason="a PyTorch CPU kernel")


@pytest.fixture
def bench():
    from benchmarks import bn_silu
    if bn_silu.kernel_library() is None:
        pytest.skip("no C compiler here: the kernel cannot be built")
    return bn_silu


def test_policies_switch_the_kernel_and_restore_the_setting(bench, monkeypatch):
    from models.common import Conv
    from utils.backend import torch
    monkeypatch.delenv("YOLO_FUSED_BN_SILU", raising=False)
    conv = Conv(4, 8, 3, 1)
    x = torch.rand(2, 4, 8, 8).contiguous(memory_format=torch.channels_last)
    with bench.policy("modules"):
        assert type(conv(x).grad_fn).__name__ == "SiluBackward0"
    with bench.policy("kernel"):
        assert type(conv(x).grad_fn).__name__ == "BatchNormSiLUBackward"
    with bench.policy("kernel", amp=True):  # --amp: bf16 autocast, as the trainer's default on native-bf16 CPUs
        y = conv(x)
        assert y.dtype == torch.bfloat16 and type(y.grad_fn).__name__ == "BatchNormSiLUBackward"
    with bench.policy("modules", amp=True):
        y = conv(x)
        assert y.dtype == torch.bfloat16 and type(y.grad_fn).__name__ == "SiluBackward0"
    assert "YOLO_FUSED_BN_SILU" not in os.environ and not torch.is_autocast_enabled("cpu")


@pytest.mark.slow
def test_benchmark_writes_and_renders_its_figures(bench, tmp_path):
    from benchmarks.results_tables import bn_silu_rows
    out = tmp_path / "bn_silu.json"
    bench.main(bench.parse_opt(["--cfg", "yolov5n.yaml", "--img", "64", "--batch", "2", "--reps", "2",
                                "--json", str(out)]))
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "bn_silu" and set(doc["step"]) == {"modules", "kernel"}
    assert all(len(s["ms"]) == 2 and s["median_ms"] > 0 for s in doc["step"].values())
    assert doc["layers"] and sum(r["layers"] for r in doc["layers"]) == 57  # yolov5n's Conv layers
    header, rows = bn_silu_rows(doc)
    assert [r[3] for r in rows] == ["layers alone", "whole step"] and len(header) == len(rows[0])
    assert {r[2] for r in rows} == {"fp32"}
