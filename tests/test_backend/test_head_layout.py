"""utils.backend.head_layout: Detect's reshaping of a level map to (bs, na, ny, nx, no) gives the official
expression's values and input gradients to the bit, and on a channels-last map in training copies the gradient once,
into the map's own layout (autograd's backward of the expression copies it two or three times); elsewhere the
expression itself runs. The Detect convolution's own weight and bias gradients are sums over the map's gradient, which
PyTorch may add up in another order for a channels_last gradient than for an NCHW one (seen on one thread): they are
held to float rounding, everything before Detect to the bit."""
import pytest

from utils.backend import IS_TORCH, head_layout, nn, torch

NA, NO = 3, 7


def official(x, na, no):
    bs, _, ny, nx = x.shape
    return x.view(bs, na, no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()


def _close(a, b, rtol, atol):
    """Equal up to float rounding (both frameworks; OneFlow has no torch.testing)."""
    return bool(((a - b).abs() <= atol + rtol * b.abs()).all())


def _conv_and_input(channels_last, seed=0):
    if channels_last and not IS_TORCH:
        pytest.skip("OneFlow has no channels_last memory format")
    torch.manual_seed(seed)
    conv = nn.Conv2d(8, NA * NO, 1)
    x = torch.randn(2, 8, 6, 5)
    if channels_last:
        conv, x = conv.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    return conv, x


def _grads(fn, channels_last, dtype=None):
    conv, x = _conv_and_input(channels_last)
    x.requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        y = fn(conv(x), NA, NO)
    torch.manual_seed(1)
    g = torch.randn(y.shape).to(y.dtype)
    y.backward(g)
    return y.detach(), x.grad, conv.weight.grad, conv.bias.grad


@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_values_and_gradients_are_the_official_expression_s(channels_last, dtype):
    if dtype == torch.bfloat16 and not IS_TORCH:
        pytest.skip("bf16 autocast on the CPU is PyTorch's")
    got, want = _grads(head_layout, channels_last, dtype), _grads(official, channels_last, dtype)
    assert got[0].shape == (2, NA, 6, 5, NO) and got[0].is_contiguous()
    for name, a, b in zip(("y", "dx", "dw", "db"), got, want):
        assert a.dtype == b.dtype, name
        if name in ("y", "dx"):
            assert torch.equal(a, b), name
        else:  # sums over the map's gradient, in the order its layout gives
            assert _close(a, b, rtol=1e-6, atol=1e-6), name


pytorch_only = pytest.mark.skipif(not IS_TORCH, reason="OneFlow runs the official expression itself")


@pytorch_only
def test_channels_last_training_copies_the_gradient_once_into_the_map_s_layout():
    """Counted with the profiler (copies inside other kernels included): the official expression's backward makes
    two map-sized copies (ViewBackward's reshape of the permuted gradient, then the convolution backward's copy to
    channels_last; three on one thread), head_layout one."""
    from torch.profiler import ProfilerActivity, profile
    counts = {}
    for label, fn in (("official", official), ("head_layout", head_layout)):
        conv, x = _conv_and_input(True)
        y = fn(conv(x.requires_grad_()), NA, NO)
        g = torch.randn(y.shape)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            y.backward(g)
        map_shapes = ([2, NA * NO, 6, 5], [2, NA, NO, 6, 5], [2, NA, 6, 5, NO])  # any view of the map
        counts[label] = sum(1 for e in prof.events() if e.name == "aten::copy_"
                            and e.input_shapes and list(e.input_shapes[0]) in map_shapes)
        assert x.grad.is_contiguous(memory_format=torch.channels_last)
        if label == "head_layout":
            assert type(y.grad_fn).__name__ == "_HeadLayoutBackward"
    assert counts["official"] >= 2 and counts["head_layout"] == 1, counts


@pytorch_only
@pytest.mark.parametrize("case", ["nchw", "no_grad", "frozen", "tracing"])
def test_the_official_expression_runs_where_it_copies_once_or_cannot_be_replaced(case):
    conv, x = _conv_and_input(case != "nchw")
    if case == "frozen":
        conv.requires_grad_(False)
    if case == "no_grad":
        with torch.no_grad():
            y = head_layout(conv(x), NA, NO)
        assert y.grad_fn is None
    elif case == "tracing":  # a Python autograd function cannot be exported: a trace must hold plain operators only
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = conv

            def forward(self, t):
                return head_layout(self.conv(t), NA, NO)

        traced = torch.jit.trace(Head(), x.requires_grad_(), check_trace=False)
        kinds = {n.kind() for n in traced.graph.nodes()}
        assert "prim::PythonOp" not in kinds and "aten::permute" in kinds, kinds
    else:
        y = head_layout(conv(x), NA, NO)
        assert y.grad_fn is None or "HeadLayout" not in type(y.grad_fn).__name__
    assert torch.equal(head_layout(conv(x), NA, NO).detach(), official(conv(x), NA, NO).detach())


def test_a_detection_model_trains_to_the_same_gradients(monkeypatch):
    """yolov5n's Detect, channels_last input as the CPU trainer feeds it: every parameter gradient before Detect's
    convolutions is the one the official expression gives, to the bit; theirs to float rounding."""
    from models import yolo
    from models.yolo import Model
    from utils.paths import find_repo_file
    grads = []
    for fn in (head_layout, official):
        monkeypatch.setattr(yolo, "head_layout", fn)
        torch.manual_seed(0)
        model = Model(str(find_repo_file("models/yolov5n.yaml")), ch=3, nc=4).train()
        x = torch.rand(2, 3, 64, 64)
        if IS_TORCH:
            x = x.contiguous(memory_format=torch.channels_last)
        out = model(x)
        sum((o.float() ** 2).mean() * (k + 1) for k, o in enumerate(out)).backward()
        grads.append({name: p.grad for name, p in model.named_parameters()})
    detect = {name for name in grads[0] if name.startswith("model.24.m.")}  # Detect's convolutions
    assert len(detect) == 6  # three levels' weight and bias
    for name, g in grads[0].items():
        if name in detect:
            assert _close(g, grads[1][name], rtol=1e-5, atol=1e-7), name
        else:
            assert torch.equal(g, grads[1][name]), name


@pytorch_only
def test_training_calls_do_not_import_torch_onnx():
    """torch.onnx loads on first use (tens of ms of start-up): the export check must not be what loads it."""
    import subprocess
    import sys
    code = ("import sys; from utils.backend import head_layout, torch\n"
            "x = torch.randn(2, 21, 4, 4).contiguous(memory_format=torch.channels_last).requires_grad_()\n"
            "assert type(head_layout(x * 1, 3, 7).grad_fn).__name__ == '_HeadLayoutBackward'\n"
            "print('torch.onnx' in sys.modules)")
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]  # the project, where `utils` imports from
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"
