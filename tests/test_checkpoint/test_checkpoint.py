"""The project's checkpoint format (round trip, atomic writes, clear errors, cross-backend) and the reader of
official ultralytics .pt files (no PyTorch needed, refuses foreign classes)."""
import argparse
import collections
import os
import pathlib
import pickle
import zipfile

import numpy as np
import pytest

from models.from_record import build_model
from utils.backend import BACKEND, IS_ONEFLOW, from_numpy, nn, to_numpy, torch
from utils.checkpoint import (CheckpointError, ModelRecord, load_any, load_checkpoint, optimizer_state_for_backend,
                              read_official_pt, save_checkpoint)

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY_YAML = {  # a 2-level detector (strides 8, 16) small enough to build in well under a second on either backend
    "nc": 3, "depth_multiple": 0.33, "width_multiple": 0.125,
    "anchors": [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119]],
    "backbone": [[-1, 1, "Conv", [64, 6, 2, 2]], [-1, 1, "Conv", [128, 3, 2]], [-1, 1, "C3", [128]],
                 [-1, 1, "Conv", [256, 3, 2]], [-1, 1, "C3", [256]], [-1, 1, "Conv", [512, 3, 2]],
                 [-1, 1, "SPPF", [512, 5]]],
    "head": [[-1, 1, "Conv", [256, 1, 1]], [-1, 1, "nn.Upsample", [None, 2, "nearest"]],
             [[-1, 4], 1, "Concat", [1]], [-1, 1, "C3", [256, False]],
             [[10, 6], 1, "Detect", ["nc", "anchors"]]],
}


def _tiny_model(seed=0, yaml=None):
    from models.yolo import DetectionModel
    torch.manual_seed(seed)
    m = DetectionModel(dict(yaml or TINY_YAML))
    # non-trivial BN statistics, so a wrong running_mean/var mapping would show in eval outputs
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for k, v in m.state_dict().items():
            if k.endswith(("running_mean", "running_var")):
                v.copy_(from_numpy(rng.uniform(0.5, 1.5, tuple(v.shape)).astype(np.float32)))
    return m


def _sgd_after_step(model_or_params):
    params = list(model_or_params.parameters()) if hasattr(model_or_params, "parameters") else model_or_params
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True)
    loss = sum((p * p).sum() for p in params)
    loss.backward()
    opt.step()
    return opt


def _fixed_input(shape=(2, 3, 64, 64), seed=1):
    return np.random.default_rng(seed).random(shape, dtype=np.float32)


# ----------------------------------------------------------------------------------------------------- own format
def test_round_trip_values_types_and_tensors(tmp_path):
    p = nn.Parameter(torch.arange(6, dtype=torch.float32).view(2, 3))
    np_state = np.random.RandomState(3).get_state()
    obj = {
        "epoch": 7, "best_fitness": np.float64(0.25), "i64": np.int64(5), "nan": float("nan"), "inf": -float("inf"),
        "t32": torch.linspace(0, 1, 5), "t16": torch.ones(2, 2).half(), "long": torch.arange(4),
        "bool": from_numpy(np.array([True, False])), "scalar": from_numpy(np.array(3.5, dtype=np.float32)),
        "param": p, "arr": np.arange(12, dtype=np.int16).reshape(3, 4), "np_rng": np_state,
        "py_rng": (3, tuple(range(5)), None), "names": {0: "person", 1: "bike"}, "set": {1, 2},
        "od": collections.OrderedDict([("b", 1), ("a", 2)]),
        "opt": argparse.Namespace(img=320, path=pathlib.Path("/x")),
        "bytes": b"\x00\xff", "nested": [{"a": (1, [2, torch.zeros(1)])}],
    }
    f = save_checkpoint(obj, tmp_path / "ck.pt")
    x = load_checkpoint(f)
    assert x["epoch"] == 7 and x["best_fitness"] == 0.25 and x["i64"] == 5 and isinstance(x["i64"], np.integer)
    assert np.isnan(x["nan"]) and x["inf"] == -float("inf")
    assert isinstance(x["t32"], torch.Tensor) and np.allclose(to_numpy(x["t32"]), np.linspace(0, 1, 5))
    assert x["t16"].dtype == torch.float16 and x["long"].dtype == torch.int64 and x["bool"].dtype == torch.bool
    assert tuple(x["scalar"].shape) == () and float(x["scalar"]) == 3.5  # 0-d stays 0-d (OneFlow from_numpy trap)
    assert isinstance(x["param"], nn.Parameter) and x["param"].requires_grad
    assert np.array_equal(to_numpy(x["param"]), np.arange(6).reshape(2, 3))
    assert x["arr"].dtype == np.int16 and np.array_equal(x["arr"], obj["arr"])  # numpy stays numpy
    assert x["np_rng"][0] == "MT19937" and np.array_equal(x["np_rng"][1], np_state[1])
    assert x["np_rng"][2:] == np_state[2:]
    rs = np.random.RandomState()
    rs.set_state(x["np_rng"])
    assert rs.randint(1 << 30) == np.random.RandomState(3).randint(1 << 30)
    assert x["py_rng"] == (3, (0, 1, 2, 3, 4), None)
    assert x["names"] == {0: "person", 1: "bike"} and x["set"] == {1, 2}
    assert isinstance(x["od"], collections.OrderedDict) and list(x["od"]) == ["b", "a"]
    assert isinstance(x["opt"], argparse.Namespace) and x["opt"].img == 320 and x["opt"].path == pathlib.Path("/x")
    assert x["bytes"] == b"\x00\xff" and isinstance(x["nested"][0]["a"], tuple)
    # numpy only: no framework tensors
    y = load_checkpoint(f, tensors=False)
    assert isinstance(y["t16"], np.ndarray) and y["t16"].dtype == np.float16


def test_optimizer_state_round_trip_continues_identically(tmp_path):
    torch.manual_seed(0)
    w = [nn.Parameter(torch.randn(4, 3)), nn.Parameter(torch.randn(3))]
    opt = _sgd_after_step(w)
    save_checkpoint({"optimizer": opt.state_dict(), "w": [p.detach().clone() for p in w]}, tmp_path / "o.pt")
    ck = load_checkpoint(tmp_path / "o.pt")
    w2 = [nn.Parameter(t.clone()) for t in ck["w"]]
    opt2 = torch.optim.SGD(w2, lr=0.5, momentum=0.0)  # wrong hyperparameters: the state dict must restore them
    opt2.load_state_dict(ck["optimizer"])
    for params, o in ((w, opt), (w2, opt2)):
        o.zero_grad()
        sum((p * p * p).sum() for p in params).backward()
        o.step()
    for a, b in zip(w, w2):
        assert np.array_equal(to_numpy(a), to_numpy(b))


def test_optimizer_state_translates_between_layouts():
    torch.manual_seed(0)
    w = [nn.Parameter(torch.randn(5))]
    sd = _sgd_after_step(w).state_dict()
    other = "torch" if IS_ONEFLOW else "oneflow"
    there = optimizer_state_for_backend(sd, other)
    assert ("_options" in there["param_groups"][0]) == (other == "oneflow")
    back = optimizer_state_for_backend(there, BACKEND)
    assert optimizer_state_for_backend(sd, BACKEND) is sd  # already in the right layout
    key = "momentum_buf" if IS_ONEFLOW else "momentum_buffer"
    assert np.array_equal(to_numpy(back["state"][0][key]), to_numpy(sd["state"][0][key]))
    w2 = [nn.Parameter(w[0].detach().clone())]
    opt2 = torch.optim.SGD(w2, lr=1.0)
    opt2.load_state_dict(back)
    assert opt2.param_groups[0]["lr"] == 0.1 and opt2.param_groups[0]["momentum"] == 0.9


def test_atomic_write_leaves_no_temp_and_keeps_old_file_on_failure(tmp_path):
    f = tmp_path / "last.pt"
    save_checkpoint({"epoch": 1, "w": torch.ones(3)}, f)
    save_checkpoint({"epoch": 2, "w": torch.ones(3)}, f)  # overwrite in place
    assert sorted(os.listdir(tmp_path)) == ["last.pt"]
    with pytest.raises(TypeError, match="cannot save"):
        save_checkpoint({"epoch": 3, "bad": object()}, f)
    assert sorted(os.listdir(tmp_path)) == ["last.pt"], "a failed save left a temporary file"
    assert load_checkpoint(f)["epoch"] == 2, "a failed save damaged the previous checkpoint"


def test_one_encoding_written_to_several_files(tmp_path):
    """last.pt and best.pt of one epoch: encoded once, each file a complete archive named after its own stem (as
    torch.save names it), with the same contents."""
    import zipfile
    obj = {"epoch": 4, "w": torch.arange(6, dtype=torch.float32)}
    assert save_checkpoint(obj, tmp_path / "last.pt", tmp_path / "best.pt") == tmp_path / "last.pt"
    for stem in ("last", "best"):
        names = zipfile.ZipFile(tmp_path / f"{stem}.pt").namelist()
        assert names and all(n.startswith(f"{stem}/") for n in names), names
        x = load_checkpoint(tmp_path / f"{stem}.pt")
        assert x["epoch"] == 4 and np.array_equal(to_numpy(x["w"]), np.arange(6))
    assert sorted(os.listdir(tmp_path)) == ["best.pt", "last.pt"]


def test_truncated_and_corrupt_files_raise_clear_errors(tmp_path):
    f = tmp_path / "ck.pt"
    save_checkpoint({"w": torch.arange(1000, dtype=torch.float32), "epoch": 3}, f)
    data = f.read_bytes()
    for n in (10, 40, len(data) // 2, len(data) - 1):
        g = tmp_path / f"cut{n}.pt"
        g.write_bytes(data[:n])
        with pytest.raises(CheckpointError, match="truncated") as e:
            load_checkpoint(g)
        assert str(g) in str(e.value)
    bad = bytearray(data)
    bad[len(data) // 2] ^= 0xFF  # a flipped bit inside the array data
    g = tmp_path / "flip.pt"
    g.write_bytes(bytes(bad))
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(g)


def test_foreign_files_raise_clear_errors(tmp_path):
    txt = tmp_path / "notes.pt"
    txt.write_text("hello, not a checkpoint\n")
    with pytest.raises(CheckpointError, match="not a YOLOv5 checkpoint") as e:
        load_checkpoint(txt)
    assert str(txt) in str(e.value)
    with pytest.raises(CheckpointError, match="neither"):
        load_any(txt)
    z = tmp_path / "other.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("readme.txt", "x")
    with pytest.raises(CheckpointError, match="data.pkl"):
        load_any(z)
    with pytest.raises(FileNotFoundError):
        load_any(tmp_path / "missing.pt")


# ------------------------------------------------------------------------------------------- official .pt reader
class _Evil:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_official_reader_refuses_unknown_globals(tmp_path):
    f = tmp_path / "evil.pt"
    with zipfile.ZipFile(f, "w") as zf:
        zf.writestr("archive/data.pkl", pickle.dumps({"model": _Evil()}, protocol=2))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(CheckpointError, match="refusing to load global"):
            read_official_pt(f)
    finally:
        os.chdir(cwd)
    assert not (tmp_path / "pwned").exists()


def test_official_yolov5n_reads_as_plain_data(yolov5n_pt):
    ck = load_any(yolov5n_pt)
    assert ck["epoch"] == -1 and ck["ema"] is None
    rec = ck["model"]
    assert isinstance(rec, ModelRecord) and rec["class"] == "models.yolo.Model"
    assert rec["nc"] == 80 and rec["names"][0] == "person" and len(rec["names"]) == 80
    assert rec["yaml"]["width_multiple"] == 0.25 and rec["yaml"]["backbone"][0][2] == "Conv"
    assert np.array_equal(rec["stride"], [8, 16, 32])
    sd = rec["state_dict"]
    assert all(isinstance(v, np.ndarray) for v in sd.values())
    n_params = sum(v.size for k, v in sd.items() if not k.endswith(("running_mean", "running_var",
                                                                     "num_batches_tracked", "anchors")))
    assert n_params == 1872157  # REFERENCE.md: yolov5n as built
    assert sd["model.0.conv.weight"].dtype == np.float16 and sd["model.0.conv.weight"].shape == (16, 3, 6, 6)
    assert np.array_equal(sd["model.24.anchors"][0], [[1.25, 1.625], [2, 3.75], [4.125, 2.875]])


_MAKE_PT = r"""
import sys, collections, torch
t = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
obj = {"view": t[1:, ::2, 1:4], "T": t.transpose(0, 2), "half": t.half()[0], "bf": t.bfloat16()[2, 1],
       "long": torch.arange(7)[2:], "bool": torch.tensor([True, False]), "p": torch.nn.Parameter(torch.ones(2, 2)),
       "od": collections.OrderedDict(a=1), "scalar": torch.tensor(3.5), "empty": torch.zeros(0, 3),
       "lin": torch.nn.Linear(2, 3)}
torch.save(obj, sys.argv[1])
torch.save(obj, sys.argv[2], _use_new_zipfile_serialization=False)
"""


def test_official_reader_views_dtypes_and_legacy_format(tmp_path, request):
    """Files written by real torch.save (zip and pre-1.6 formats): offsets, strides, shared storages, dtypes."""
    zip_f, legacy_f, script = tmp_path / "z.pt", tmp_path / "l.pt", tmp_path / "make.py"
    script.write_text(_MAKE_PT)
    if BACKEND == "torch":
        import subprocess
        import sys
        subprocess.run([sys.executable, str(script), str(zip_f), str(legacy_f)], check=True)
    else:
        other = request.getfixturevalue("other_python")
        other.run(f"import runpy, sys; sys.argv = ['x', {str(zip_f)!r}, {str(legacy_f)!r}]; "
                  f"runpy.run_path({str(script)!r})")
    t = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    for f in (zip_f, legacy_f):
        o = read_official_pt(f)
        assert np.array_equal(o["view"], t[1:, ::2, 1:4]) and o["view"].flags.c_contiguous
        assert np.array_equal(o["T"], t.transpose(2, 1, 0))
        assert o["half"].dtype == np.float16 and np.array_equal(o["half"], t[0])
        assert o["bf"].dtype == np.float32 and np.array_equal(o["bf"], t[2, 1])  # bfloat16 widened exactly
        assert np.array_equal(o["long"], np.arange(2, 7)) and o["long"].dtype == np.int64
        assert o["bool"].dtype == np.bool_ and o["p"].shape == (2, 2) and o["scalar"].shape == ()
        assert o["empty"].shape == (0, 3) and o["od"] == {"a": 1}
        assert o["lin"]["class"] == "torch.nn.modules.linear.Linear"
        assert o["lin"]["state_dict"]["weight"].shape == (3, 2)


# ----------------------------------------------------------------------------------------- models in checkpoints
def test_model_saved_as_record_and_rebuilt(tmp_path):
    from copy import deepcopy

    from models.experimental import attempt_load
    m = _tiny_model().eval()
    m.names = {0: "a", 1: "b", 2: "c"}
    x = from_numpy(_fixed_input())
    with torch.no_grad():
        y = to_numpy(m(x)[0])
    f = save_checkpoint({"epoch": 0, "model": deepcopy(m).half(), "ema": m}, tmp_path / "best.pt")
    ck = load_checkpoint(f, build_models=build_model)
    m2 = ck["model"].eval()
    assert type(m2).__name__ == "DetectionModel" and next(m2.parameters()).dtype == torch.float32
    assert m2.names == m.names
    with torch.no_grad():
        assert np.abs(to_numpy(ck["ema"].eval()(x)[0]) - y).max() == 0  # fp32 record: exact
        assert np.allclose(to_numpy(m2(x)[0]), y, rtol=1e-2, atol=0.5)  # the fp16 copy: close
    rec = load_checkpoint(f, build_models=False)["ema"]
    assert isinstance(rec, ModelRecord) and isinstance(rec["state_dict"]["model.0.conv.weight"], np.ndarray)
    m3 = attempt_load(f, fuse=False)  # picks the EMA, like ultralytics
    assert not m3.training and m3.names == m.names
    with torch.no_grad():
        assert np.abs(to_numpy(m3(x)[0]) - y).max() == 0


_CROSS_SAVE = r"""
import numpy as np, sys
sys.path.insert(0, {root!r})
from tests.test_checkpoint.test_checkpoint import _tiny_model, _fixed_input, _sgd_after_step
from utils.backend import torch, from_numpy, to_numpy
from utils.checkpoint import save_checkpoint
m = _tiny_model(seed=5)
opt = _sgd_after_step(m)
m.eval()
with torch.no_grad():
    y = to_numpy(m(from_numpy(_fixed_input()))[0])
np.save({out!r}, y)
save_checkpoint({{"model": m, "optimizer": opt.state_dict(), "epoch": 4}}, {ck!r})
"""

_CROSS_LOAD = r"""
import numpy as np, sys
sys.path.insert(0, {root!r})
from tests.test_checkpoint.test_checkpoint import _fixed_input
from utils.backend import torch, from_numpy, to_numpy
from models.from_record import build_model
from utils.checkpoint import load_checkpoint, optimizer_state_for_backend
ck = load_checkpoint({ck!r}, build_models=build_model)
m = ck["model"].eval()
opt = torch.optim.SGD(m.parameters(), lr=1.0)
opt.load_state_dict(optimizer_state_for_backend(ck["optimizer"]))
assert ck["epoch"] == 4 and abs(opt.param_groups[0]["lr"] - 0.1) < 1e-12
with torch.no_grad():
    np.save({out!r}, to_numpy(m(from_numpy(_fixed_input()))[0]))
"""


def _compare(a, b):
    assert a.shape == b.shape == (2, 240, 8)
    # same weights, different kernels: decoded boxes are pixels at 64x64, scores in [0, 1]
    assert np.abs(a[..., 4:] - b[..., 4:]).max() < 1e-4
    assert np.abs(a[..., :4] - b[..., :4]).max() < 1e-3


def _run_here(code):
    exec(compile(code, "<snippet>", "exec"), {"__name__": "__snippet__"})


def test_checkpoints_cross_backends_both_ways(tmp_path, other_python):
    """Saved here -> loaded there, and saved there -> loaded here (one subprocess: start-up is the cost)."""
    here = {k: tmp_path / f"here_{k}" for k in ("ck.pt", "save.npy", "load.npy")}
    there = {k: tmp_path / f"there_{k}" for k in ("ck.pt", "save.npy", "load.npy")}
    fmt = lambda code, d, out: code.format(root=str(ROOT), out=str(d[out]), ck=str(d["ck.pt"]))  # noqa: E731
    _run_here(fmt(_CROSS_SAVE, here, "save.npy"))
    other_python.run(fmt(_CROSS_LOAD, here, "load.npy") + "\n" + fmt(_CROSS_SAVE, there, "save.npy"))
    _run_here(fmt(_CROSS_LOAD, there, "load.npy"))
    _compare(np.load(here["save.npy"]), np.load(here["load.npy"]))
    _compare(np.load(there["save.npy"]), np.load(there["load.npy"]))
