"""bf16 autocast on the CPU, gated: the start-up check against fp32 on a fixed input (fp32 with one line when the
outputs disagree), --no-amp keeps fp32 in every training script, and the default (no flag) trains in fp32 on a CPU
without native bf16 whatever BF16_BY_DEFAULT_ON_NATIVE_CPU says, and in bf16 on one with it (the setting as shipped)."""
import importlib

import pytest

from utils import amp_check, backend
from utils.backend import IS_TORCH, device, nn, torch
from utils.precision import training_precision

CPU = device("cpu")
needs_cpu_autocast = pytest.mark.skipif(not IS_TORCH, reason="CPU autocast is a PyTorch feature")


def set_native_bf16(monkeypatch, native):
    """Make the CPU probe answer `native`, where the default policy reads it and where the backend picks the dtype."""
    monkeypatch.setattr(backend, "cpu_has_native_bf16", lambda: native)
    monkeypatch.setattr(backend.impl, "cpu_has_native_bf16", lambda: native)


class DriftsUnderAutocast(nn.Module):
    """A convolution whose output is shifted by `drift` whenever CPU autocast is on: a broken low-precision path."""

    def __init__(self, drift):
        super().__init__()
        self.conv, self.drift, self.calls = nn.Conv2d(3, 4, 3), drift, 0

    def forward(self, x):
        self.calls += 1
        y = self.conv(x)
        return y + self.drift if torch.is_autocast_enabled("cpu") else y


class MustNotRun(nn.Module):
    def forward(self, x):
        raise AssertionError("the AMP check ran although fp32 was chosen")


def test_fixed_input_is_the_same_every_time():
    a, b = amp_check.fixed_input(), amp_check.fixed_input(channels_last=True)
    assert tuple(a.shape) == (1, 3, amp_check.CHECK_IMG, amp_check.CHECK_IMG)
    assert bool((a == b).all()) and 0 <= float(a.min()) and float(a.max()) == 1.0 and float(a.std()) > 0.1


@needs_cpu_autocast
def test_start_up_check_falls_back_to_fp32_when_the_outputs_disagree(log_lines):
    model = DriftsUnderAutocast(drift=10.0).train()
    assert amp_check.checked_dtype(model, CPU, torch.bfloat16) is None
    warned = [m for m in log_lines if "AMP check" in m]
    assert len(warned) == 1 and "training in fp32" in warned[0] and "differ" in warned[0]
    assert model.training and model.calls == 2  # one fp32 pass, one autocast pass, the mode given back


@needs_cpu_autocast
def test_start_up_check_keeps_bf16_when_the_outputs_agree(log_lines):
    assert amp_check.checked_dtype(DriftsUnderAutocast(drift=0.0), CPU, torch.bfloat16) == torch.bfloat16
    assert not [m for m in log_lines if "WARNING" in m]


@needs_cpu_autocast
def test_start_up_check_falls_back_when_autocast_fails(log_lines):
    class Fails(DriftsUnderAutocast):
        def forward(self, x):
            if torch.is_autocast_enabled("cpu"):
                raise RuntimeError("no bf16 kernel")
            return self.conv(x)
    assert amp_check.checked_dtype(Fails(0.0), CPU, torch.bfloat16) is None
    assert any("autocast failed" in m and "no bf16 kernel" in m for m in log_lines)


@needs_cpu_autocast
def test_a_yolov5n_passes_the_check_and_keeps_its_statistics():
    """The real model: its bf16 outputs agree with fp32 within TOLERANCE, and the check changes no BatchNorm
    statistic and leaves the model training."""
    from models.yolo import DetectionModel
    torch.manual_seed(0)
    model = DetectionModel("models/yolov5n.yaml").train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    diff = amp_check.output_disagreement(model, CPU, torch.bfloat16, channels_last=True)
    assert 0 < diff < amp_check.TOLERANCE
    assert model.training and all(torch.equal(before[k], v) for k, v in model.state_dict().items())


@needs_cpu_autocast
def test_training_precision_uses_the_check(monkeypatch):
    """--amp on a native-bf16 CPU with a model that disagrees: fp32, NCHW-or-not as fp32 would be, no scaler."""
    set_native_bf16(monkeypatch, True)
    dtype, _, scaler = training_precision(CPU, True, DriftsUnderAutocast(drift=10.0))
    assert dtype is None and type(scaler).__name__ == "_NoScaler"
    assert training_precision(CPU, True, DriftsUnderAutocast(drift=0.0))[0] == torch.bfloat16


@pytest.mark.parametrize("script", ["train", "segment.train", "classify.train"])
def test_no_amp_keeps_fp32(script, monkeypatch):
    set_native_bf16(monkeypatch, True)
    monkeypatch.setattr(amp_check, "BF16_BY_DEFAULT_ON_NATIVE_CPU", True)
    opt = importlib.import_module(script).parse_opt(args=["--no-amp"])
    assert opt.amp is False
    assert amp_check.default_request(CPU, opt.amp) is False
    assert training_precision(CPU, opt.amp, MustNotRun())[0] is None
    assert importlib.import_module(script).parse_opt(args=[]).amp is None  # no flag: the default decides


@pytest.mark.parametrize("bf16_by_default", [False, True])
def test_default_on_a_cpu_without_native_bf16_stays_fp32(bf16_by_default, monkeypatch, log_lines):
    set_native_bf16(monkeypatch, False)
    monkeypatch.setattr(amp_check, "BF16_BY_DEFAULT_ON_NATIVE_CPU", bf16_by_default)
    assert amp_check.default_request(CPU, None) is None
    assert training_precision(CPU, None, MustNotRun())[0] is None
    assert not [m for m in log_lines if "WARNING" in m]  # nothing was asked for, so nothing to warn about


@needs_cpu_autocast
def test_default_is_bf16_where_the_cpu_computes_it_natively(monkeypatch):
    """As shipped (the learning study's evidence, cited beside BF16_BY_DEFAULT_ON_NATIVE_CPU): no flag means bf16
    autocast on a CPU with native bf16, after the start-up check, and fp32 when that check fails."""
    set_native_bf16(monkeypatch, True)
    assert amp_check.BF16_BY_DEFAULT_ON_NATIVE_CPU is True
    assert amp_check.default_request(CPU, None) is True
    assert amp_check.default_request(device("cuda:0"), None) is None  # CUDA keeps the official default
    assert training_precision(CPU, None, DriftsUnderAutocast(drift=0.0))[0] == torch.bfloat16
    assert training_precision(CPU, None, DriftsUnderAutocast(drift=10.0))[0] is None


def test_with_the_default_turned_off_no_flag_means_fp32_on_every_cpu(monkeypatch):
    set_native_bf16(monkeypatch, True)
    monkeypatch.setattr(amp_check, "BF16_BY_DEFAULT_ON_NATIVE_CPU", False)
    assert amp_check.default_request(CPU, None) is None
    assert training_precision(CPU, None, MustNotRun())[0] is None
