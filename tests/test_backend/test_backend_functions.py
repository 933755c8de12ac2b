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


@pytest.mark.parametrize("name,kw", [("SGD", dict(momentum=0.9, nesterov=True, weight_decay=5e-4)),
                                     ("Adam", dict(betas=(0.937, 0.999), weight_decay=1e-5)),
                                     ("AdamW", dict(betas=(0.937, 0.999), weight_decay=1e-2)),
                                     ("RMSprop", dict(momentum=0.9, alpha=0.9, eps=1e-3))])
def test_optimizer_class_steps_as_the_framework_class(name, kw):
    """The class training builds updates, zeroes, saves and restores exactly as the framework's own class (PyTorch:
    a subclass without the torch.compile wrappers), through a LambdaLR schedule, over 20 steps."""
    reference = getattr(torch.optim, name) if not (BACKEND == "oneflow" and name == "RMSprop") else backend.RMSprop
    results = []
    for cls in (backend.optimizer_class(name), reference):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Conv2d(4, 2, 1))
        x = torch.randn(2, 3, 8, 8)
        opt = cls(model.parameters(), lr=0.01, **kw)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0 / (1 + e))
        for i in range(20):
            opt.zero_grad()
            (model(x) ** 2).mean().backward()
            opt.step()
            sched.step()
            if i == 9:  # a checkpoint round trip halfway
                opt.load_state_dict(copy.deepcopy(opt.state_dict()))
        results.append(np.concatenate([to_numpy(p.detach()).ravel() for p in model.parameters()]))
    assert issubclass(backend.optimizer_class(name), reference)
    np.testing.assert_array_equal(results[0], results[1])
    if BACKEND == "torch":  # the subclass is found by its module name, as torch.optim's classes are
        import pickle
        opt = backend.optimizer_class(name)(nn.Linear(2, 2).parameters(), lr=0.1)
        assert type(pickle.loads(pickle.dumps(opt))) is backend.optimizer_class(name)


@pytest.mark.skipif(BACKEND != "torch", reason="torch._dynamo is PyTorch's compiler")
def test_training_steps_leave_the_compiler_unloaded():
    """Building the optimizer, stepping, zeroing and saving it must not import torch._dynamo (1.6 s per run)."""
    from tests.helpers.process_helpers import fresh_python
    code = ("import sys; from utils.backend import nn, torch; from utils.torch_utils import smart_optimizer; "
            "m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)); o = smart_optimizer(m, 'Adam', 0.01, 0.9, 1e-5); "
            "m(torch.randn(1, 3, 8, 8)).sum().backward(); o.step(); o.zero_grad(); o.load_state_dict(o.state_dict()); "
            "print('torch._dynamo' in sys.modules)")
    out = fresh_python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout
