"""utils.backend.conv2d: a model convolution as nn.Conv2d computes it, except that on a CPU where oneDNN runs AVX2
kernels the large training convolutions take their weight gradient from NCHW copies (torch_conv_grad.py): the same
output and input gradient to the bit, the weight gradient that the NCHW layout (the official trainer's) computes, and
only where every condition holds."""
import pytest

from utils.backend import IS_TORCH, conv2d, nn, torch

pytestmark = pytest.mark.skipif(not IS_TORCH, reason="OneFlow's conv2d is the module's own call")


@pytest.fixture
def split(monkeypatch):
    """The split forced on, for layers of any size: the module of the PyTorch implementation."""
    from utils.backend import torch_conv_grad
    monkeypatch.setenv("YOLO_NCHW_WEIGHT_GRAD", "1")
    monkeypatch.setattr(torch_conv_grad, "MIN_WEIGHT_GRAD_FLOPS", 0)
    return torch_conv_grad


def _layer(cin=16, cout=24, k=3, s=2, seed=0):
    torch.manual_seed(seed)
    return nn.Conv2d(cin, cout, k, s, k // 2, bias=False)


def _grads(conv, x, fn):
    x = x.clone().requires_grad_()
    conv.zero_grad(set_to_none=True)
    y = fn(conv, x)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(1))
    y.backward(g.contiguous(memory_format=torch.channels_last) if x.is_contiguous(
        memory_format=torch.channels_last) else g)
    return y.detach(), x.grad, conv.weight.grad, y.grad_fn


def _input(cin=16, size=20):
    return torch.randn(4, cin, size, size, generator=torch.Generator().manual_seed(2)).contiguous(
        memory_format=torch.channels_last)


@pytest.mark.parametrize("k,s", [(3, 1), (3, 2), (5, 1)])
def test_split_gives_the_modules_output_and_gradients(split, k, s):
    conv, x = _layer(k=k, s=s), _input()
    y0, gx0, gw0, _ = _grads(conv, x, lambda c, t: c(t))
    y1, gx1, gw1, fn = _grads(conv, x, conv2d)
    assert "ConvNCHWWeightGrad" in type(fn).__name__  # the split ran
    assert torch.equal(y0, y1) and torch.equal(gx0, gx1)  # the same kernels for the forward and the input gradient
    # the weight gradient is the one the NCHW layout (the official trainer's) computes, to the bit
    _, _, gw_nchw, _ = _grads(conv, x.contiguous(), lambda c, t: c(t.contiguous()))
    assert torch.equal(gw1, gw_nchw)
    torch.testing.assert_close(gw1, gw0, rtol=1e-4, atol=1e-5 * float(gw0.abs().max()))  # to rounding
    assert gx1.is_contiguous(memory_format=torch.channels_last) and gw1.shape == conv.weight.shape


def test_split_only_where_it_was_measured_faster(split, monkeypatch):
    conv, x = _layer(), _input()

    def used(c, t, requires_grad=True):
        t = t.clone().requires_grad_(requires_grad)
        return "ConvNCHWWeightGrad" in type(conv2d(c, t).grad_fn).__name__

    assert used(conv, x)
    assert not used(_layer(k=1, s=1), x)  # 1x1: the same path either way
    assert not used(conv, x.contiguous())  # NCHW input: nothing to copy
    assert not used(conv, x, requires_grad=False)  # the image batch: no input gradient to split from (0.6x)
    with torch.no_grad():
        assert conv2d(conv, x).grad_fn is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not used(conv, x)  # CPU autocast is for native-bf16 CPUs, which have AVX-512 kernels
    monkeypatch.setattr(split, "MIN_WEIGHT_GRAD_FLOPS", 2 * 4 * 24 * 10 * 10 * 16 * 9 + 1)  # one FLOP above
    assert not used(conv, x)
    monkeypatch.setattr(split, "MIN_WEIGHT_GRAD_FLOPS", 2 * 4 * 24 * 10 * 10 * 16 * 9)
    assert used(conv, x)
    monkeypatch.setenv("YOLO_NCHW_WEIGHT_GRAD", "0")
    assert not used(conv, x)


def test_on_by_default_only_where_onednn_runs_avx2_kernels(monkeypatch):
    from utils.backend import torch_conv_grad as m
    monkeypatch.delenv("YOLO_NCHW_WEIGHT_GRAD", raising=False)
    for var in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(var, raising=False)
    cases = [({"avx2", "avx512f"}, "", False), ({"avx2"}, "", True), (set(), "", False),  # flags unknown: off
             ({"avx2", "avx512f", "avx512_bf16"}, "AVX2", True), ({"avx2", "avx512f"}, "avx512_core", False)]
    try:
        for flags, cap, on in cases:
            monkeypatch.setattr(m, "read_proc_cpu_flags", lambda flags=flags: flags)
            monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
            m._onednn_runs_avx2_kernels.cache_clear()
            assert m.nchw_weight_grad_on() is on, (flags, cap)
    finally:
        m._onednn_runs_avx2_kernels.cache_clear()


def _graph_nodes(root):
    """The type names of every autograd node behind root."""
    seen, todo, names = set(), [root], []
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(type(node).__name__)
        todo += [n for n, _ in node.next_functions]
    return names


def test_a_training_step_learns_the_same_with_the_split(split, monkeypatch):
    """A yolov5n forward and backward through models/common.py's Conv: the same loss, the same gradients to
    rounding; the split ran for every 3x3 convolution but the first (the image batch needs no gradient)."""
    from models.yolo import Model
    torch.manual_seed(0)
    model = Model("models/yolov5n.yaml", ch=3, nc=4).train()
    x = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(3)).contiguous(
        memory_format=torch.channels_last)

    def step(on):
        monkeypatch.setenv("YOLO_NCHW_WEIGHT_GRAD", "1" if on else "0")
        model.zero_grad(set_to_none=True)
        loss = sum(o.float().square().mean() for o in model(x))
        splits = sum("ConvNCHWWeightGrad" in n for n in _graph_nodes(loss.grad_fn))
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()], splits

    loss_split, grads_split, n_split = step(True)
    loss_plain, grads_plain, n_plain = step(False)
    n3x3 = sum(1 for m in model.modules() if isinstance(m, nn.Conv2d) and m.kernel_size != (1, 1))
    assert n_split == n3x3 - 1 > 10 and n_plain == 0
    assert torch.equal(loss_split, loss_plain)
    for a, b in zip(grads_split, grads_plain):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
