"""utils/backend/torch_ciou.py: the PyTorch fused CIoU through torch.compile (dynamic shapes) equals the plain maths,
values and gradients.

The fused path routes only CUDA tensors to it, but inductor also compiles for the CPU, so the maths of the compiled
path is checked here on any machine (about 30 s of compilation on 2 CPU cores; PyTorch only)."""
import numpy as np
import pytest

from utils.backend import IS_TORCH, torch

pytestmark = pytest.mark.skipif(not IS_TORCH or not hasattr(torch, "compile"), reason="torch.compile path")


def test_compiled_ciou_equals_plain_for_varying_n():
    from utils.backend import compiled_ciou
    from utils.iou import bbox_iou
    ciou_compiled = compiled_ciou()
    from tests.test_utils.test_iou import random_and_degenerate_xywh
    try:
        import torch._dynamo as dynamo
        dynamo.reset()
    except Exception:
        dynamo = None
    for n in (50, 333, 2000):  # the number of matched targets changes every training step
        b1, b2 = random_and_degenerate_xywh(n, seed=n)
        res = []
        for fn in (lambda a, b: bbox_iou(a, b, CIoU=True), lambda a, b: ciou_compiled(a, b)):
            a = torch.tensor(b1, requires_grad=True)
            b = torch.tensor(b2, requires_grad=True)
            out = fn(a, b)
            (out * torch.linspace(0.5, 1.5, out.numel()).view(out.shape)).sum().backward()
            res.append([out.detach().numpy(), a.grad.numpy(), b.grad.numpy()])
        for p, c in zip(*res):
            np.testing.assert_allclose(c, p, rtol=1e-5, atol=1e-5)
    if dynamo is not None and hasattr(dynamo, "utils") and hasattr(dynamo.utils, "counters"):
        # one graph for all three sizes: dynamic shapes, no recompile per step
        frames = dynamo.utils.counters["frames"]
        if "ok" in frames:
            assert frames["ok"] <= 2, dict(frames)
