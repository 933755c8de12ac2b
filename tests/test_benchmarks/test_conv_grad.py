"""benchmarks/conv_grad.py: the measured lever computes the same gradients as the stock convolution, applies only where
its policy says (the trainer's own split off unless the policy is the trainer's), leaves models/common.py's Conv and
the setting as they were, and the benchmark writes its figures."""
import copy
import json

import pytest

from utils.backend import IS_TORCH

pytestmark = pytest.mark.skipif(not IS_TORCH, reason="a lever of PyTorch's oneDNN convolutions")


def _grads(model, x):
    x = x.detach().clone().requires_grad_()
    loss = sum(o.float().square().mean() for o in model(x))
    loss.backward()
    return loss.detach(), x.grad, {n: p.grad.clone() for n, p in model.named_parameters()}


def test_lever_gradients_equal_the_stock_ones():
    from benchmarks import conv_grad
    from models.common import Conv
    from utils.backend import torch
    model, _ = conv_grad.build("yolov5n.yaml")
    twin = copy.deepcopy(model)
    x = torch.rand(2, 3, 64, 64).contiguous(memory_format=torch.channels_last)
    calls = []
    backward = conv_grad.ConvNCHWWeightGrad.backward
    try:
        counted = staticmethod(lambda ctx, g: (calls.append(g.shape), backward(ctx, g))[1])
        conv_grad.ConvNCHWWeightGrad.backward = counted
        plain = Conv.forward
        with conv_grad.policy("nchw-all"):
            assert Conv.forward is not plain
            loss, gx, grads = _grads(model, x)
        assert Conv.forward is plain  # restored
    finally:
        conv_grad.ConvNCHWWeightGrad.backward = backward
    n3x3 = sum(m.conv.kernel_size != (1, 1) for m in model.modules() if isinstance(m, Conv))
    assert len(calls) == n3x3 > 10  # every 3x3 (and the 6x6 stem) took the lever, nothing else
    calls.clear()
    try:
        conv_grad.ConvNCHWWeightGrad.backward = counted
        with conv_grad.policy("native"):  # the trainer's own split is off too: nothing splits
            _grads(copy.deepcopy(twin), x)
    finally:
        conv_grad.ConvNCHWWeightGrad.backward = backward
    assert calls == []
    ref_loss, ref_gx, ref = _grads(twin, x)
    assert torch.equal(loss, ref_loss)  # the forward is the same convolution
    torch.testing.assert_close(gx, ref_gx, rtol=1e-5, atol=1e-7)
    assert ref.keys() == grads.keys()
    for name in ref:
        torch.testing.assert_close(grads[name], ref[name], rtol=1e-4, atol=1e-6, msg=name)


def test_policy_threshold_and_layout():
    from benchmarks import conv_grad
    from utils.backend import nn, torch
    conv3, conv1 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.Conv2d(8, 8, 1, bias=False)
    small = torch.rand(1, 8, 80, 80).contiguous(memory_format=torch.channels_last)
    large = torch.rand(1, 8, 81, 80).contiguous(memory_format=torch.channels_last)
    limit = conv_grad.POLICIES["nchw"]
    assert conv_grad.lever_applies(conv3, small, limit)
    assert not conv_grad.lever_applies(conv3, large, limit)  # above the pixel limit: its copies cost more
    assert conv_grad.lever_applies(conv3, large, conv_grad.POLICIES["nchw-all"])
    assert not conv_grad.lever_applies(conv1, small, limit)  # 1x1: channels_last is faster
    assert not conv_grad.lever_applies(conv3, small.contiguous(), limit)  # an NCHW input has nothing to gain


@pytest.mark.slow
def test_benchmark_writes_its_figures(tmp_path):
    from benchmarks import conv_grad
    out = tmp_path / "conv_grad.json"
    conv_grad.main(conv_grad.parse_opt(["--cfg", "yolov5n.yaml", "--img", "64", "--batch", "2", "--reps", "2",
                                        "--json", str(out)]))
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "conv_grad" and set(doc["step"]) == {"native", "nchw", "nchw-all", "trainer"}
    assert all(len(s["ms"]) == 2 and s["median_ms"] > 0 for s in doc["step"].values())
    assert doc["layers"] and all(r["native_ms"] > 0 and r["nchw_ms"] > 0 for r in doc["layers"])
