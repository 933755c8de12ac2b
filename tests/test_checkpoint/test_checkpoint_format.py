"""Checkpoints are what torch.save of an official ultralytics checkpoint writes: the zip layout, the pickle's
globals and persistent storages, fp16 model/ema, a round trip through the project's reader, a real torch.load with
placeholder models.* classes, the same bytes from both backends, and old 'YOLOv5CK' files still loading."""
import builtins
import collections
import io
import pickle
import pickletools
import struct
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

from models.from_record import build_model
from tests.test_checkpoint.test_checkpoint import ROOT, _fixed_input, _tiny_model
from utils.backend import BACKEND, from_numpy, nn, to_numpy, torch
from utils.checkpoint import (Half, ModelRecord, complete_torch_groups, load_checkpoint, optimizer_state_for_backend,
                              save_checkpoint)

OFFICIAL_KEYS = ["epoch", "best_fitness", "model", "ema", "updates", "optimizer", "opt", "git", "date"]

# OneFlow writes the same file (its data.pkl byte for byte, its storages the same sizes):
SAME_FILE_UNDER_ONEFLOW = "tests/test_checkpoint/test_checkpoint_format.py::test_both_backends_write_the_same_pickle"


def _trained_pieces(seed=0):
    """A tiny detector after one SGD step with the trainer's three parameter groups, and an EMA copy of it."""
    from utils.torch_utils import ModelEMA, smart_optimizer
    m = _tiny_model(seed)
    m.names, m.nc, m.hyp = {0: "a", 1: "b", 2: "c"}, 3, {"box": 0.05, "lr0": 0.01}
    m.class_weights = from_numpy(np.array([0.5, 1.0, 1.5], np.float32))
    opt = smart_optimizer(m, "SGD", 0.01, 0.937, 5e-4)
    m.train()
    out = m(from_numpy(_fixed_input((1, 3, 64, 64))))
    sum(o.sum() for o in out).backward()
    opt.step()
    ema = ModelEMA(m)
    ema.update_attr(m, include=["yaml", "nc", "hyp", "names", "stride", "class_weights"])
    return m, ema.ema, opt


def _checkpoint(m, ema, opt):
    """The official keys as the trainer fills them, and some of its exact-resume keys."""
    from utils.checkpoint.training import float_state_dict as _float_state_dict
    optimizer = complete_torch_groups(optimizer_state_for_backend(opt.state_dict(), "torch"))
    return {"epoch": 3, "best_fitness": 0.25, "model": Half(m), "ema": Half(ema), "updates": 7, "optimizer": optimizer,
            "opt": {"epochs": 10, "hyp": {"lr0": 0.01}, "data": "/data/x.yaml"}, "git": {}, "date": "2024-01-01",
            "model_float32": _float_state_dict(m), "ema_float32": _float_state_dict(ema), "last_opt_step": 12}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    m, ema, opt = _trained_pieces()
    f = save_checkpoint(_checkpoint(m, ema, opt), tmp_path_factory.mktemp("fmt") / "last.pt")
    return f, m, ema


# ------------------------------------------------------------------------------------------------- the archive
@pytest.mark.oneflow_covered_by(SAME_FILE_UNDER_ONEFLOW)
def test_zip_entries_alignment_and_records(written):
    f = written[0]
    raw = f.read_bytes()
    with zipfile.ZipFile(f) as zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        n_data = sum(n.startswith("last/data/") for n in names)
        assert names == ["last/data.pkl", "last/.format_version", "last/.storage_alignment", "last/byteorder",
                         *[f"last/data/{i}" for i in range(n_data)], "last/version", "last/.data/serialization_id"]
        assert n_data > 100
        assert all(i.compress_type == zipfile.ZIP_STORED and i.flag_bits == 0x808 for i in infos)
        assert zf.read("last/version") == b"3\n" and zf.read("last/byteorder") == b"little"
        assert zf.read("last/.format_version") == b"1" and zf.read("last/.storage_alignment") == b"64"
        assert len(zf.read("last/.data/serialization_id")) == 40 and zf.read("last/.data/serialization_id").isdigit()
        assert zf.testzip() is None  # every entry's CRC matches
        for i in infos:  # data of every entry starts on a 64-byte boundary, after an 'FB' padding field
            name_len, extra_len = struct.unpack_from("<HH", raw, i.header_offset + 26)
            extra = raw[i.header_offset + 30 + name_len:i.header_offset + 30 + name_len + extra_len]
            assert extra[:2] == b"FB" and set(extra[4:]) <= {ord("Z")}
            assert (i.header_offset + 30 + name_len + extra_len) % 64 == 0, i.filename
    assert b"PK\x06\x06" in raw[-200:] and b"PK\x06\x07" in raw[-200:]  # zip64 end record and locator, as torch
    assert oct(f.stat().st_mode & 0o777) == "0o644"


class _Recorder(pickle.Unpickler):
    """Parses a checkpoint pickle without torch: every global becomes a placeholder class that records its
    arguments and state; persistent ids are recorded as they are."""

    def __init__(self, data):
        super().__init__(io.BytesIO(data))
        self.globals, self.pids, self.instances = [], [], collections.Counter()

    def find_class(self, module, name):
        self.globals.append(f"{module} {name}")
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "__builtin__":
            return getattr(builtins, name)
        recorder = self

        class Placeholder:
            path = f"{module}.{name}"

            def __new__(cls, *args):
                recorder.instances[cls.path] += 1
                return object.__new__(cls)

            def __init__(self, *args):
                self.args = args

            def __setstate__(self, state):
                self.state = state
        return Placeholder

    def persistent_load(self, pid):
        self.pids.append(pid)
        return pid


def _parse(f):
    with zipfile.ZipFile(f) as zf:
        rec = _Recorder(zf.read(zf.namelist()[0]))
        obj = rec.load()
        sizes = {n.rsplit("/", 1)[1]: zf.getinfo(n).file_size for n in zf.namelist() if "/data/" in n}
    return rec, obj, sizes


@pytest.mark.oneflow_covered_by(SAME_FILE_UNDER_ONEFLOW)
def test_pickle_names_official_classes_and_torch_storages(written):
    with zipfile.ZipFile(written[0]) as zf:
        ops = list(pickletools.genops(zf.read("last/data.pkl")))
    assert ops[0][0].name == "PROTO" and ops[0][1] == 2 and ops[-1][0].name == "STOP"
    rec, obj, sizes = _parse(written[0])
    names = set(rec.globals)
    assert names == {arg for op, arg, _ in ops if op.name == "GLOBAL"}
    for expected in ("models.yolo DetectionModel", "models.yolo Detect", "models.common Conv", "models.common C3",
                     "models.common Bottleneck", "models.common SPPF", "models.common Concat",
                     "torch.nn.modules.conv Conv2d", "torch.nn.modules.batchnorm BatchNorm2d",
                     "torch.nn.modules.activation SiLU", "torch.nn.modules.upsampling Upsample",
                     "torch.nn.modules.pooling MaxPool2d", "torch.nn.modules.container Sequential",
                     "torch.nn.modules.container ModuleList", "torch._utils _rebuild_tensor_v2",
                     "torch._utils _rebuild_parameter", "collections OrderedDict", "torch HalfStorage",
                     "torch FloatStorage", "torch LongStorage", "__builtin__ set"):
        assert expected in names, expected
    assert not [n for n in names if n.split()[0].split(".")[0] in ("utils", "oneflow", "tests", "numpy")], names
    # every persistent id is ('storage', torch.<X>Storage, key, 'cpu', numel), keys 0..n-1, sizes match the entries
    itemsize = {"torch.HalfStorage": 2, "torch.FloatStorage": 4, "torch.LongStorage": 8}
    assert sorted(int(p[2]) for p in rec.pids) == list(range(len(sizes)))
    for tag, cls, key, location, numel in rec.pids:
        assert tag == "storage" and location == "cpu" and sizes[key] == numel * itemsize[cls.path], (cls.path, key)
    model = obj["model"]
    assert model.path == "models.yolo.DetectionModel" and list(model.state)[:3] == ["training", "_parameters",
                                                                                 "_buffers"]
    conv = model.state["_modules"]["model"].state["_modules"]["0"].state["_modules"]["conv"]
    assert conv.path == "torch.nn.modules.conv.Conv2d" and conv.state["_parameters"]["bias"] is None
    assert [k for k in conv.state if not k.startswith("_") and k != "training"] == [
        "in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "transposed", "output_padding",
        "groups", "padding_mode"]
    weight = conv.state["_parameters"]["weight"]  # _rebuild_parameter(_rebuild_tensor_v2(...), requires_grad, {})
    assert weight.path == "torch._utils._rebuild_parameter" and weight.args[1] is True
    assert weight.args[0].path == "torch._utils._rebuild_tensor_v2" and weight.args[0].args[0][1].path == \
        "torch.HalfStorage"


def test_model_and_ema_are_fp16_and_read_back_exactly(written):
    """In the file model and ema hold fp16 floats (what official code reads); the project's reader gives back the
    exact fp32 weights from its extra copies, and the fp16 ones when a file has no such copies."""
    f, m, ema = written
    rec, obj, _ = _parse(f)
    for key in ("model", "ema"):  # parameters and buffers: floats fp16, BN counters int64
        modules = [c for c in rec_calls(obj[key]) if isinstance(getattr(c, "state", None), dict) and
                   "_parameters" in c.state]
        tensors = [t for mod in modules for t in [*mod.state["_parameters"].values(), *mod.state["_buffers"].values()]
                   if t is not None]
        tensors = [t.args[0] if t.path == "torch._utils._rebuild_parameter" else t for t in tensors]
        assert len(tensors) == len(m.state_dict())
        assert {t.args[0][1].path for t in tensors} == {"torch.HalfStorage", "torch.LongStorage"}
    exact = [c for c in rec_calls(obj["model_float32"]) if c.path == "torch._utils._rebuild_tensor_v2"]
    assert {c.args[0][1].path for c in exact} == {"torch.FloatStorage", "torch.LongStorage"}
    ck = load_checkpoint(f, tensors=False, build_models=False)
    assert list(ck)[:9] == OFFICIAL_KEYS and ck["last_opt_step"] == 12
    for key, live in (("model", m), ("ema", ema)):
        r = ck[key]
        assert isinstance(r, ModelRecord) and r["class"] == "models.yolo.DetectionModel"
        assert r["names"] == {0: "a", 1: "b", 2: "c"} and r["nc"] == 3 and r["hyp"]["box"] == 0.05
        assert r["training"] is live.training
        sd = live.state_dict()
        assert list(r["state_dict"]) == list(sd)
        for k, v in r["state_dict"].items():
            ref = to_numpy(sd[k])
            assert v.dtype == ref.dtype and np.array_equal(v.reshape(ref.shape), ref), k
    groups = ck["optimizer"]["param_groups"]
    assert [len(g["params"]) for g in groups] == [len(g["params"]) for g in written_opt_groups(m)]
    assert list(groups[0])[:9] == ["lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize", "foreach",
                                   "differentiable", "fused"]
    state = ck["optimizer"]["state"]
    assert set(state) == set(range(sum(len(g["params"]) for g in groups)))
    assert all(s["momentum_buffer"].dtype == np.float32 for s in state.values())
    built = load_checkpoint(f, build_models=build_model)  # tensors and rebuilt float32 models
    x = from_numpy(_fixed_input((1, 3, 64, 64)))
    with torch.no_grad():
        assert built["ema"].training is False
        assert np.array_equal(to_numpy(built["ema"].eval()(x)[0]), to_numpy(ema.eval()(x)[0]))


def written_opt_groups(m):
    from utils.torch_utils import param_groups_by_name
    decay, norm, bias = param_groups_by_name(m)
    return [{"params": bias}, {"params": decay}, {"params": norm}]


@pytest.mark.oneflow_covered_by(SAME_FILE_UNDER_ONEFLOW)
def test_strip_optimizer_writes_what_official_strip_writes(written, tmp_path):
    """model = the EMA in fp16 with requires_grad off and the official model attributes; optimizer, ema, updates,
    best_fitness None; epoch -1; nothing but the official keys."""
    import shutil
    from utils.checkpoint.training import strip_optimizer
    from utils.engine.hooks import save_ckpt
    f = tmp_path / "best.pt"
    shutil.copy(written[0], f)
    strip_optimizer(f, save=save_ckpt, build_model=build_model)  # as the training's final step calls it
    rec, obj, _ = _parse(f)
    assert list(obj) == OFFICIAL_KEYS and obj["epoch"] == -1 and obj["opt"]["epochs"] == 10
    assert all(obj[k] is None for k in ("best_fitness", "ema", "updates", "optimizer"))
    state = obj["model"].state
    assert obj["model"].path == "models.yolo.DetectionModel" and state["training"] is False
    for k in ("yaml", "save", "names", "inplace", "stride", "nc", "hyp", "class_weights"):
        assert k in state, k
    assert state["nc"] == 3 and state["names"] == {0: "a", 1: "b", 2: "c"}
    params = [c for c in rec_calls(obj["model"]) if c.path == "torch._utils._rebuild_parameter"]
    assert params and all(p.args[1] is False and p.args[0].args[0][1].path == "torch.HalfStorage" for p in params)
    ema = written[2]
    sd = load_checkpoint(f, tensors=False, build_models=False)["model"]["state_dict"]
    for k, v in ema.state_dict().items():
        ref = to_numpy(v)
        assert np.array_equal(sd[k], ref.astype(np.float16) if ref.dtype.kind == "f" else ref.reshape(sd[k].shape)), k


@pytest.mark.oneflow_covered_by(SAME_FILE_UNDER_ONEFLOW)
def test_strip_optimizer_also_writes_the_same_stripped_checkpoint(written, tmp_path, caplog):
    """best.pt saved in the same epoch as last.pt: stripping last.pt writes both, the same contents, each logged."""
    import shutil
    from utils.checkpoint.training import strip_optimizer
    from utils.engine.hooks import save_ckpt
    from utils.general import LOGGER
    last, best = tmp_path / "last.pt", tmp_path / "best.pt"
    shutil.copy(written[0], last)
    best.write_bytes(b"stale")  # overwritten, never read
    LOGGER.propagate = True
    try:
        with caplog.at_level("INFO", logger="yolov5"):
            strip_optimizer(last, save=save_ckpt, also=(best,), build_model=build_model)
    finally:
        LOGGER.propagate = False
    assert f"Optimizer stripped from {last}" in caplog.text and f"Optimizer stripped from {best}" in caplog.text
    a = load_checkpoint(last, tensors=False, build_models=False)
    b = load_checkpoint(best, tensors=False, build_models=False)
    assert a["epoch"] == b["epoch"] == -1 and b["optimizer"] is None
    sa, sb = a["model"]["state_dict"], b["model"]["state_dict"]
    assert sa.keys() == sb.keys() and all(np.array_equal(sa[k], sb[k]) for k in sa)


def rec_calls(node, seen=None):
    """Every placeholder object under node (depth first)."""
    seen = set() if seen is None else seen
    out = []
    if id(node) in seen:
        return out
    seen.add(id(node))
    if hasattr(node, "path"):
        out.append(node)
        for v in list(getattr(node, "args", ())) + [getattr(node, "state", None)]:
            out += rec_calls(v, seen)
    elif isinstance(node, dict):
        for v in node.values():
            out += rec_calls(v, seen)
    elif isinstance(node, (list, tuple)):
        for v in node:
            out += rec_calls(v, seen)
    return out


# ------------------------------------------------------------------------------- torch.load with placeholders
_PLACEHOLDERS = '''
import torch.nn as nn
def __getattr__(name):  # any class official code would import from here: a bare nn.Module subclass
    cls = type(name, (nn.Module,), {"__module__": __name__})
    globals()[name] = cls
    return cls
'''

_TORCH_LOAD = r'''
import json, sys, numpy as np, torch
ck = torch.load(sys.argv[1], weights_only=False, map_location="cpu")
m, ema = ck["model"], ck["ema"]
out = {"keys": list(ck), "model_class": type(m).__module__ + "." + type(m).__name__,
       "conv0": type(m.model[0].conv).__module__ + "." + type(m.model[0].conv).__name__,
       "dtypes": sorted({str(v.dtype) for v in m.state_dict().values()}),
       "ema_training": ema.training, "model_training": m.training,
       "ema_requires_grad": any(p.requires_grad for p in ema.parameters()),
       "n_state": len(m.state_dict()), "detect_stride": m.model[-1].stride.tolist(), "names": m.names,
       "add": m.model[2].m[0].add, "concat_d": m.model[9].d, "types": [layer.type for layer in m.model],
       "upsample": [m.model[8].scale_factor, m.model[8].mode],
       "groups": [len(g["params"]) for g in ck["optimizer"]["param_groups"]]}
x = torch.from_numpy(np.load(sys.argv[2]))
l0 = m.model[0].float()
out["layer0"] = l0.act(l0.bn.eval()(l0.conv(x))).detach().numpy().tolist()
decay, norm, bias = [], [], []
for mod in m.modules():
    for n, p in mod.named_parameters(recurse=False):
        (bias if n == "bias" else norm if n == "weight" and isinstance(mod, torch.nn.BatchNorm2d) else decay).append(p)
opt = torch.optim.SGD(bias, lr=0.1, momentum=0.9, nesterov=True)
opt.add_param_group({"params": decay, "weight_decay": 5e-4})
opt.add_param_group({"params": norm, "weight_decay": 0.0})
opt.load_state_dict(ck["optimizer"])  # the official smart_resume step
out["loaded_lr"] = opt.param_groups[1]["lr"]
print(json.dumps(out))
'''


def _run_torch(code, args, cwd, request):
    """Run code under real PyTorch in cwd (placeholder models/ package first on sys.path)."""
    script = cwd / "load_it.py"
    script.write_text(code)
    if BACKEND == "torch":
        p = subprocess.run([sys.executable, str(script), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                           timeout=300, env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
        assert p.returncode == 0, p.stderr[-3000:]
        return p.stdout
    other = request.getfixturevalue("other_python")
    argv = ["x", *map(str, args)]
    return other.run(f"import runpy, sys; sys.path.insert(0, {str(cwd)!r}); sys.argv = {argv!r}; "
                     f"runpy.run_path({str(script)!r}, run_name='__main__')", cwd=cwd)


@pytest.mark.oneflow_covered_by(SAME_FILE_UNDER_ONEFLOW)
def test_plain_torch_load_with_placeholder_model_classes(written, tmp_path, request):
    import json
    f, m, _ = written
    pkg = tmp_path / "models"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for mod in ("yolo", "common", "experimental"):
        (pkg / f"{mod}.py").write_text(textwrap.dedent(_PLACEHOLDERS))
    x = _fixed_input((1, 3, 64, 64))
    np.save(tmp_path / "x.npy", x)
    res = json.loads(_run_torch(_TORCH_LOAD, [f, tmp_path / "x.npy"], tmp_path, request).strip().splitlines()[-1])
    assert res["keys"][:9] == OFFICIAL_KEYS and res["model_class"] == "models.yolo.DetectionModel"
    assert res["conv0"] == "torch.nn.modules.conv.Conv2d" and res["dtypes"] == ["torch.float16", "torch.int64"]
    assert res["model_training"] is True and res["ema_training"] is False and res["ema_requires_grad"] is False
    assert res["n_state"] == len(m.state_dict()) and res["detect_stride"] == [8.0, 16.0]
    assert res["names"] == {"0": "a", "1": "b", "2": "c"} or res["names"] == {0: "a", 1: "b", 2: "c"}
    assert res["add"] is True and res["concat_d"] == 1 and res["upsample"] == [2.0, "nearest"]
    assert res["types"][0] == "models.common.Conv" and res["types"][8] == "torch.nn.modules.upsampling.Upsample"
    assert res["types"][-1] == "models.yolo.Detect"
    assert res["groups"] == [len(g["params"]) for g in written_opt_groups(m)]
    assert res["loaded_lr"] == pytest.approx(0.01)
    half = _tiny_model(0)
    half.load_state_dict({k: v.half().float() if v.dtype.is_floating_point else v for k, v in m.state_dict().items()})
    with torch.no_grad():
        ref = to_numpy(half.model[0].eval()(from_numpy(x)))
    assert np.abs(np.asarray(res["layer0"], dtype=np.float32) - ref).max() < 1e-4


# ------------------------------------------------------------------------------------------ across backends
_WRITE = r'''
import sys
sys.path.insert(0, {root!r})
from tests.test_checkpoint.test_checkpoint_format import _trained_pieces, _checkpoint
from utils.checkpoint import save_checkpoint
save_checkpoint(_checkpoint(*_trained_pieces()), {out!r})
'''


def test_both_backends_write_the_same_pickle(written, tmp_path, other_python):
    """The other backend writes the same model/optimizer/opt: data.pkl is byte for byte the same (the weights
    differ, since the frameworks initialise differently, but they live in the storages), storages the same sizes."""
    there = tmp_path / "last.pt"
    other_python.run(_WRITE.format(root=str(ROOT), out=str(there)))
    here = written[0]
    with zipfile.ZipFile(here) as a, zipfile.ZipFile(there) as b:
        assert a.namelist() == b.namelist()
        assert a.read("last/data.pkl") == b.read("last/data.pkl")
        for n in a.namelist():
            if "/data/" in n:
                assert a.getinfo(n).file_size == b.getinfo(n).file_size, n
    ck = load_checkpoint(there, tensors=False, build_models=False)  # read back with the exact fp32 copies
    w = ck["ema"]["state_dict"]["model.0.conv.weight"]
    assert w.dtype == np.float32 and np.array_equal(w, ck["ema_float32"]["model.0.conv.weight"])


# --------------------------------------------------------------------------------------- the earlier format
@pytest.mark.oneflow_covered_by(SAME_FILE_UNDER_ONEFLOW)
def test_old_yolov5ck_files_still_load(tmp_path):
    from models.experimental import attempt_load
    from tests.helpers.legacy_yolov5ck_writer import save_yolov5ck
    m = _tiny_model(2).eval()
    m.names = {0: "a", 1: "b", 2: "c"}
    f = tmp_path / "old.pt"
    save_yolov5ck({"epoch": 5, "model": m, "ema": None, "maps": np.arange(3.0), "opt": {"epochs": 9}}, f)
    assert f.read_bytes()[:8] == b"YOLOv5CK"
    ck = load_checkpoint(f, build_models=build_model)
    assert ck["epoch"] == 5 and ck["opt"] == {"epochs": 9} and np.array_equal(ck["maps"], [0.0, 1.0, 2.0])
    x = from_numpy(_fixed_input((1, 3, 64, 64)))
    with torch.no_grad():
        y = to_numpy(m(x)[0])
        assert np.array_equal(to_numpy(ck["model"].eval()(x)[0]), y)
        assert np.array_equal(to_numpy(attempt_load(f, fuse=False)(x)[0]), y)
    # and what the project writes now reads back the same way
    g = save_checkpoint({"epoch": 5, "model": m}, tmp_path / "new.pt")
    with torch.no_grad():
        assert np.array_equal(to_numpy(attempt_load(g, fuse=False)(x)[0]), y)


@pytest.mark.oneflow_covered_by(SAME_FILE_UNDER_ONEFLOW)
def test_shared_objects_stay_shared(tmp_path):
    """One tensor referenced twice is one storage; one module used by many layers (Conv's default activation) is
    pickled once, as torch.save does."""
    t = torch.arange(4, dtype=torch.float32)
    m = _tiny_model(0)
    f = save_checkpoint({"a": t, "b": t, "model": m}, tmp_path / "s.pt")
    rec, obj, sizes = _parse(f)
    assert rec.instances["torch.nn.modules.activation.SiLU"] == 1
    assert sum(isinstance(x, nn.Conv2d) for x in m.modules()) > rec.instances["torch.nn.modules.activation.SiLU"]
    ck = load_checkpoint(f, tensors=False, build_models=False)
    # storages: t once, the state dict, the stride the model and its Detect share, Detect's empty grids (2 levels)
    assert ck["a"] is ck["b"] and len(sizes) == 1 + len(m.state_dict()) + 1 + 2 * 2


@pytest.mark.oneflow_covered_by(SAME_FILE_UNDER_ONEFLOW)
@pytest.mark.parametrize("name", ["yolov5n.pt", "yolov5n-seg-coco128.pt", "yolov5n-cls-coco128cls.pt"])
def test_ultralytics_strip_optimizer_import_strips_any_task(shared_dir, tmp_path, name):
    """`from utils.general import strip_optimizer; strip_optimizer(f, s)`, as official users call it, on each task's
    official checkpoint: s is a final checkpoint (epoch -1, no optimizer, fp16 model), f is untouched."""
    import shutil
    from models.from_record import build_any_model
    from utils.general import strip_optimizer
    f, s = tmp_path / name, tmp_path / f"stripped-{name}"
    shutil.copy(shared_dir / "weights" / name, f)
    before = f.read_bytes()
    strip_optimizer(f, s)
    assert f.read_bytes() == before
    x = load_checkpoint(s, map_location="cpu", build_models=build_any_model)
    assert x["epoch"] == -1 and x["optimizer"] is None and x["ema"] is None
    assert s.stat().st_size < 0.7 * 4 * sum(p.numel() for p in x["model"].parameters())  # 2 bytes a weight, not 4
    assert type(x["model"]).__name__ == {"yolov5n.pt": "DetectionModel", "yolov5n-seg-coco128.pt": "SegmentationModel",
                                         "yolov5n-cls-coco128cls.pt": "ClassificationModel"}[name]
