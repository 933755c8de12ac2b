"""Mixed precision: --amp picks bf16 autocast on CPUs with native bf16 (detected from the CPU's flags), fp32 master
weights, an fp32 loss, and a clean fp32 fallback elsewhere; the default stays the official one (AMP on CUDA only)."""
import numpy as np
import pytest

from utils import backend
from utils.backend import IS_ONEFLOW, IS_TORCH, device, nn, to_numpy, torch

CPU = device("cpu")


def test_amp_choice_per_request():
    assert backend.amp_dtype(CPU, None) == (None, "")  # the official default: no AMP on the CPU
    assert backend.amp_dtype(CPU, False) == (None, "")
    dtype, note = backend.amp_dtype(CPU, True)
    if IS_ONEFLOW:
        assert dtype is None and "OneFlow" in note
    elif backend.cpu_has_native_bf16():
        assert dtype == torch.bfloat16 and note == ""
    else:
        assert dtype is None and "bfloat16" in note


@pytest.mark.skipif(not IS_TORCH, reason="CPU autocast is a PyTorch feature")
def test_native_bf16_is_read_from_the_cpu_flags(monkeypatch):
    from utils.backend import torch_backend  # the flags are read there (the shim re-exports its functions)
    flags = torch_backend._cpu_flags()
    assert backend.cpu_has_native_bf16() == bool({"avx512_bf16", "amx_bf16"} & flags)
    monkeypatch.setattr(torch_backend, "_cpu_flags", lambda: {"avx2", "avx512f"})  # AVX-512 without BF16: emulated
    assert not backend.cpu_has_native_bf16()
    dtype, note = backend.amp_dtype(CPU, True)
    assert dtype is None and "no native bfloat16" in note
    monkeypatch.setattr(torch_backend, "_cpu_flags", lambda: {"amx_bf16"})
    assert backend.cpu_has_native_bf16() == bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


@pytest.mark.skipif(not IS_TORCH, reason="CPU autocast is a PyTorch feature")
@pytest.mark.parametrize("var", ["ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"])
def test_a_onednn_cap_below_bf16_means_fp32(monkeypatch, var):
    """oneDNN capped below AVX512_CORE_BF16 (how an AVX2-only CPU is emulated on a newer one) emulates bf16: no bf16
    by default and --amp says why, whatever the CPU's flags; a cap at or above it leaves the flags to decide."""
    from utils import amp_check
    from utils.backend import torch_backend
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    monkeypatch.setattr(torch_backend, "_cpu_flags", lambda: {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    for cap in ("avx2", "AVX512_CORE", "avx512_core_vnni", "SSE41"):
        monkeypatch.setenv(var, cap)
        assert not backend.cpu_has_native_bf16(), cap
        assert amp_check.default_request(CPU, None) is None
        assert backend.amp_dtype(CPU, True)[0] is None
    for cap in ("AVX512_CORE_BF16", "avx512_core_amx", "ALL", ""):
        monkeypatch.setenv(var, cap)
        assert backend.cpu_has_native_bf16() == native, cap


@pytest.mark.skipif(not IS_TORCH, reason="CPU autocast is a PyTorch feature")
def test_cpu_bf16_autocast_keeps_fp32_weights_and_gradients():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3)
    x = torch.randn(2, 3, 8, 8)
    with backend.autocast(CPU, enabled=True, dtype=torch.bfloat16):
        y = conv(x)
    assert y.dtype == torch.bfloat16
    y.float().sum().backward()
    assert conv.weight.dtype == torch.float32 and conv.weight.grad.dtype == torch.float32
    with backend.autocast(CPU, enabled=True, dtype=None):  # no dtype: no CPU autocast (the official default)
        assert conv(x).dtype == torch.float32
    ref = conv(x)
    np.testing.assert_allclose(to_numpy(y.float()), to_numpy(ref), atol=0.05)  # bf16: 8-bit mantissa
    cl = backend.to_channels_last(x)
    assert cl.is_contiguous(memory_format=torch.channels_last) and torch.equal(cl, x)


@pytest.mark.skipif(not IS_TORCH, reason="OneFlow keeps NCHW")
def test_channels_last_on_the_cpu_unless_turned_off(monkeypatch):
    """channels_last input on the CPU in fp32 and bf16 (measured faster there), not on CUDA (not measured);
    YOLO_CHANNELS_LAST=0/1 decides for every device."""
    monkeypatch.delenv("YOLO_CHANNELS_LAST", raising=False)
    assert backend.channels_last_pays(CPU, torch.bfloat16) and backend.channels_last_pays(CPU, None)
    assert backend.channels_last_pays(CPU, torch.float32)
    assert not backend.channels_last_pays(device("cuda:0"), torch.float16)
    monkeypatch.setenv("YOLO_CHANNELS_LAST", "0")
    assert not backend.channels_last_pays(CPU, torch.float32) and not backend.channels_last_pays(CPU, torch.bfloat16)
    monkeypatch.setenv("YOLO_CHANNELS_LAST", "1")
    assert backend.channels_last_pays(device("cuda:0"), torch.float16)


def test_inference_input_layout_follows_the_backend(monkeypatch):
    """preprocess() hands the model channels_last images where the backend says it pays, with the same values."""
    from utils.inference.steps import preprocess
    im = np.random.default_rng(0).integers(0, 255, (2, 3, 32, 48), dtype=np.uint8)
    monkeypatch.setenv("YOLO_CHANNELS_LAST", "0")
    plain = preprocess(im, CPU)
    monkeypatch.delenv("YOLO_CHANNELS_LAST")
    x = preprocess(im, CPU)
    assert np.array_equal(to_numpy(x), to_numpy(plain)) and tuple(x.shape) == (2, 3, 32, 48)
    if IS_TORCH:
        assert x.is_contiguous(memory_format=torch.channels_last) and plain.is_contiguous()


def test_loss_is_computed_in_fp32_from_low_precision_maps():
    from tests.test_utils.test_loss import StandInModel
    from utils.loss import ComputeLoss
    rng = np.random.default_rng(0)
    p = [torch.tensor(rng.normal(0, 1, (2, 3, s, s, 85)).astype(np.float32)) for s in (8, 4, 2)]
    t = torch.tensor([[0, 3, 0.4, 0.5, 0.3, 0.2], [1, 7, 0.6, 0.3, 0.1, 0.4]], dtype=torch.float32)
    cl = ComputeLoss(StandInModel())
    loss32, items32 = cl(p, t)
    low = torch.bfloat16 if IS_TORCH else torch.float16
    loss16, items16 = cl([x.to(low) for x in p], t)
    assert loss16.dtype == torch.float32 and items16.dtype == torch.float32
    # the only difference left is the rounding of the maps themselves
    np.testing.assert_allclose(to_numpy(items16), to_numpy(items32), rtol=2e-2)


@pytest.mark.slow
@pytest.mark.skipif(not IS_TORCH or not backend.cpu_has_native_bf16(), reason="needs a CPU with native bf16")
def test_train_with_amp_on_the_cpu(tmp_path, monkeypatch):
    """train.py --amp on this CPU: bf16 autocast with channels_last input, no loss scaler, finite losses."""
    import train
    from tests.helpers.train_helpers import make_tiny_dataset
    from utils.loggers import read_results_csv
    import utils.engine.build as build
    seen = {}
    orig = build.training_precision

    def training_precision(device, request=None, model=None):
        dtype, channels_last, scaler = orig(device, request, model)
        seen.update(dtype=dtype, cl=channels_last, scaler=type(scaler).__name__)
        return dtype, channels_last, scaler
    monkeypatch.setattr(build, "training_precision", training_precision)
    data = make_tiny_dataset(tmp_path / "data", n_train=8, n_val=2, size=64)
    train.run(data=str(data), cfg="yolov5n.yaml", weights="", imgsz=64, batch_size=4, epochs=1, device="cpu",
              workers=0, project=str(tmp_path), name="exp", noplots=True, noautoanchor=True, amp=True)
    assert seen == {"dtype": torch.bfloat16, "cl": True, "scaler": "_NoScaler"}
    rows = read_results_csv(tmp_path / "exp" / "results.csv")
    assert len(rows) == 1 and all(np.isfinite(rows[0][k]) for k in ("train/box_loss", "train/obj_loss"))
