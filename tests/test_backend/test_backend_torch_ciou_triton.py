"""utils/backend/torch_ciou_triton.py: the hand-written Triton CIoU (PyTorch + CUDA fused path) equals the plain
maths, values and gradients.

Runs on a CUDA GPU with Triton, or on the CPU through Triton's interpreter (TRITON_INTERPRET=1, which conftest.py
sets on a machine without an NVIDIA GPU; requirements.txt installs triton in the PyTorch environment); skips
otherwise."""
import importlib.util
import os

import numpy as np
import pytest

from utils.backend import IS_TORCH, cuda_available, torch

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(  # cuda: on a GPU the kernel is compiled for real
    not IS_TORCH or importlib.util.find_spec("triton") is None or not (cuda_available() or _INTERPRET),
    reason="needs PyTorch with Triton, and CUDA or TRITON_INTERPRET=1")]


def _run(fn, b1, b2, dev):
    a = torch.tensor(b1, device=dev, requires_grad=True)
    b = torch.tensor(b2, device=dev, requires_grad=True)
    out = fn(a, b)
    (out * torch.linspace(0.5, 1.5, out.numel(), device=dev).view(out.shape)).sum().backward()
    return out.detach().cpu().numpy(), a.grad.cpu().numpy(), b.grad.cpu().numpy()


@pytest.mark.parametrize("xywh", [True, False])
def test_triton_ciou_equals_plain(xywh):
    from tests.test_utils.test_iou import degenerate_xyxy, random_and_degenerate_xywh
    from utils.backend.torch_ciou_triton import ciou_triton
    from utils.iou import bbox_iou
    dev = torch.device("cuda") if cuda_available() else torch.device("cpu")
    b1, b2 = random_and_degenerate_xywh(1000) if xywh else degenerate_xyxy()
    plain = _run(lambda a, b: bbox_iou(a, b, xywh=xywh, CIoU=True), b1, b2, dev)
    fused = _run(lambda a, b: ciou_triton(a, b, xywh), b1, b2, dev)
    for p, f, what in zip(plain, fused, ("ciou", "grad box1", "grad box2")):
        np.testing.assert_allclose(f, p, rtol=1e-5, atol=1e-5, err_msg=what)


def test_triton_ciou_empty_and_half_inputs():
    from utils.backend.torch_ciou_triton import ciou_triton
    dev = torch.device("cuda") if cuda_available() else torch.device("cpu")
    e = torch.zeros((0, 4), device=dev, requires_grad=True)
    out = ciou_triton(e, e.detach())
    assert tuple(out.shape) == (0, 1)
    out.sum().backward()
    if cuda_available():  # fp16 loads are computed in fp32: AMP's pbox is fp16 while tbox is fp32
        a = torch.rand(64, 4, device=dev).half().requires_grad_(True)
        b = torch.rand(64, 4, device=dev)
        r = ciou_triton(a, b)
        assert r.dtype == torch.float32
        r.sum().backward()
        assert a.grad.dtype == torch.float16 and torch.isfinite(a.grad).all()


def test_loss_parity_through_the_triton_kernel(monkeypatch, shared_dir):
    """ComputeLoss(fused_iou=True) routed to the Triton kernel still gives the official ref_A loss."""
    from tests.test_utils.test_loss import HYP, StandInModel
    from utils import backend
    from utils.backend.torch_ciou_triton import ciou_triton
    from utils.loss import ComputeLoss
    path = shared_dir / "reference" / "ref_A.npz"
    if not path.exists():
        pytest.skip(f"{path} missing")
    ref = np.load(path)
    dev = torch.device("cuda") if cuda_available() else torch.device("cpu")
    calls = []  # the CUDA choice, made on this device: the loss picks its CIoU once, when it is built
    monkeypatch.setattr(backend, "fused_ciou", lambda device: ("triton", lambda *a: calls.append(1) or ciou_triton(*a)))
    model = StandInModel(hyp=HYP).to(dev)
    p = [torch.tensor(ref[f"train_outputs_p{i}"], device=dev, requires_grad=True) for i in (3, 4, 5)]
    loss, items = ComputeLoss(model, fused_iou=True)(p, torch.tensor(ref["targets_img_cls_xywhn"], device=dev))
    loss.backward()
    assert len(calls) == 1  # one CIoU call for all levels' candidates together
    np.testing.assert_allclose(items.cpu().numpy(), ref["loss_items_box_obj_cls"], rtol=1e-5)
    np.testing.assert_allclose(float(loss.detach()), float(ref["loss"][0]), rtol=1e-5)
