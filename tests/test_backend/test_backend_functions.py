"""What the chosen per-backend module answers outside the fused CUDA paths, checked on each backend: numpy conversion
of every integer width (checkpoint buffers), the fused CIoU's CPU answer and its override, the optimizer-state layout
files hold turned into this framework's, and the distributed answers outside a launcher."""
import copy

import numpy as np
import pytest

from utils import backend
from utils.backend import BACKEND, nn, to_numpy, torch


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "bool",
                                   "float16", "float32", "float64"])
def test_from_numpy_keeps_values_of_every_width(dtype):
    """OneFlow 0.9.0 refuses int16/uint16/uint32/uint64 arrays: they arrive widened, with the same values."""
    a = np.array([[0, 1], [2, 3]]).astype(dtype)
    t = backend.from_numpy(a)
    assert tuple(t.shape) == a.shape and np.array_equal(to_numpy(t).astype(np.float64), a.astype(np.float64))
    assert tuple(backend.from_numpy(np.array(7, dtype)).shape) in ((), (1,))  # records.from_numpy makes it 0-d


def test_fused_ciou_on_the_cpu_is_the_plain_maths(monkeypatch):
    cpu = torch.device("cpu")
    assert backend.fused_ciou(cpu) == ("plain", None)
    monkeypatch.setenv("YOLO_FUSED_CIOU", "plain")
    assert backend.fused_ciou(cpu) == ("plain", None)
    assert (backend.compiled_ciou() is None) == (BACKEND == "oneflow")  # torch.compile is PyTorch's


def test_file_layout_optimizer_state_loads_natively():
    """An SGD state in PyTorch's layout (what every checkpoint holds) becomes this framework's and continues the
    momentum exactly."""
    from utils.checkpoint.optimizer_state import to_torch_layout
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(6))
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    (w * w).sum().backward()
    opt.step()
    file_state = copy.deepcopy(to_torch_layout(opt.state_dict()))  # a copy, as a file holds: no shared buffers
    assert "momentum_buffer" in file_state["state"][0] and "_options" not in file_state["param_groups"][0]
    w2 = nn.Parameter(w.detach().clone())
    opt2 = torch.optim.SGD([w2], lr=0.5, momentum=0.0)
    opt2.load_state_dict(backend.optimizer_state_to_native(file_state))
    for p, o in ((w, opt), (w2, opt2)):
        o.zero_grad()
        (p * p * p).sum().backward()
        o.step()
    np.testing.assert_array_equal(to_numpy(w), to_numpy(w2))


def test_distributed_answers_without_a_launcher():
    assert backend.ddp_gpu_follows_local_rank() == (BACKEND == "oneflow")  # OneFlow: rank i on cuda:i
    if BACKEND == "torch":
        assert not backend.dist_ready()  # no process group: collectives must not be called
    assert callable(backend.tensorboard_graph)  # what it draws: tests/test_loggers_tensorboard.py
