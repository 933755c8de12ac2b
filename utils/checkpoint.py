"""Checkpoints: the project's own one-file format and a reader for official ultralytics YOLOv5 ``.pt`` files.

Own format (``save_checkpoint`` / ``load_checkpoint``), identical for OneFlow and PyTorch so that a file written
under one loads under the other (``flow.save`` writes a directory and ``flow.load`` imports torch, so neither
framework's serializer can be used)::

    b"YOLOv5CK" | uint32 format version | uint64 header length | header (UTF-8 JSON) | array blobs | trailer
    trailer = b"YOLOv5END" | uint64 length of everything before the trailer | uint32 crc32 of it

The JSON header holds the object tree with tagged nodes (tuples, sets, non-string dict keys, numpy scalars,
Namespaces, Paths, tensors, modules) and an index of the arrays (dtype, shape, offset). No pickle is involved on
load, so a checkpoint cannot run code. Framework tensors become numpy on save (with requires_grad recorded) and
framework tensors again on load, through ``utils.backend.from_numpy``. A ``nn.Module`` (for instance
``deepcopy(model).half()`` as ultralytics stores it) is saved as a model record: class name, yaml, names, nc,
stride, hyp and its state dict; on load it is rebuilt as a ``DetectionModel`` (float32) or, with
``build_models=False``, returned as a :class:`ModelRecord` (a dict with numpy state dict).

Official format (``read_official_pt``): a zip holding ``data.pkl`` and ``data/<key>`` storages (or the legacy
single-pickle format of torch<1.6). The pickle names classes from ``models.*`` and ``torch.*``; a restricted
unpickler stubs the module classes, rebuilds tensors into numpy arrays from the raw storages, and refuses any
other global, so it neither needs PyTorch nor imports arbitrary code.
"""
import argparse
import base64
import collections
import io
import json
import os
import pathlib
import pickle
import struct
import tempfile
import zipfile
import zlib
from datetime import datetime

import numpy as np

from utils.errors import UserError

__all__ = ["CheckpointError", "ModelRecord", "save_checkpoint", "load_checkpoint", "read_official_pt", "load_any",
           "is_own_checkpoint", "is_official_pt", "model_record", "build_model", "optimizer_state_for_backend"]

MAGIC = b"YOLOv5CK"
TRAILER_MAGIC = b"YOLOv5END"
FORMAT_VERSION = 1
_ALIGN = 64  # array blobs start on 64-byte boundaries so frombuffer views are aligned for any dtype
_HEAD = struct.Struct("<8sIQ")
_TRAIL = struct.Struct("<9sQI")


class CheckpointError(UserError, RuntimeError):
    """A checkpoint file that cannot be read: truncated, corrupt, foreign, or holding a forbidden class."""


class ModelRecord(dict):
    """A model as plain data: {'class', 'yaml', 'names', 'nc', 'stride', 'state_dict' (name -> np.ndarray), ...}.
    Both readers return this type for stored models so ``attempt_load`` treats official and own files alike."""


# =================================================================================================================
# Official ultralytics .pt files (no PyTorch needed)
# =================================================================================================================
# Storage class name -> numpy dtype. BFloat16 has no numpy dtype: its raw uint16 bits are widened to float32 below.
_STORAGE_DTYPES = {
    "HalfStorage": np.float16, "FloatStorage": np.float32, "DoubleStorage": np.float64,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16, "CharStorage": np.int8,
    "ByteStorage": np.uint8, "BoolStorage": np.bool_, "BFloat16Storage": np.uint16,
}
_TORCH_DTYPES = {  # torch dtype globals (e.g. 'torch float16') that may appear in newer pickles
    "float16": np.float16, "half": np.float16, "float32": np.float32, "float": np.float32, "float64": np.float64,
    "double": np.float64, "int64": np.int64, "long": np.int64, "int32": np.int32, "int": np.int32,
    "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_, "bfloat16": np.uint16,
}
# Module namespaces whose classes are stubbed (never imported): the model's own classes and torch.nn layers.
_STUB_PREFIXES = ("models.", "torch.nn.modules.", "utils.activations")
_STUB_EXACT = {("models.yolo", n) for n in ("Model", "DetectionModel", "Detect", "SegmentationModel", "Segment",
                                              "ClassificationModel", "BaseModel")}


class _Storage:
    """A raw storage: a flat numpy array of its dtype (BFloat16 as uint16 bits, marked)."""
    __slots__ = ("array", "bfloat16")

    def __init__(self, array, bfloat16=False):
        self.array, self.bfloat16 = array, bfloat16


class StubObject:
    """Stands in for a pickled ``models.*`` / ``torch.nn.*`` object: keeps its state, runs nothing."""
    _class_path = "?"

    def __init__(self, *args, **kwargs):
        self._stub_args = args

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):  # (dict, slotstate)
            state = {**(state[0] or {}), **state[1]}
        if isinstance(state, dict):
            self.__dict__.update(state)
        else:
            self.__dict__["_stub_state"] = state

    def __repr__(self):
        return f"<stub {self._class_path}>"


_stub_classes = {}


def _stub_class(module, name):
    key = f"{module}.{name}"
    if key not in _stub_classes:
        _stub_classes[key] = type(name, (StubObject,), {"_class_path": key, "__module__": "utils.checkpoint.stubs"})
    return _stub_classes[key]


def _to_float32_from_bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    """A tensor view (offset, size, stride in elements) on a storage, copied out into its own numpy array."""
    if not isinstance(storage, _Storage):
        raise CheckpointError(f"tensor rebuilt from a {type(storage).__name__}, expected a storage")
    flat = storage.array
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    n = int(np.prod(size)) if size else 1
    if n == 0:
        arr = np.zeros(size, dtype=flat.dtype)
    else:
        last = storage_offset + sum((s - 1) * st for s, st in zip(size, stride))
        if storage_offset < 0 or last >= flat.size or any(st < 0 for st in stride):
            raise CheckpointError(f"tensor of size {size} stride {stride} offset {storage_offset} overruns its "
                                  f"storage of {flat.size} elements")
        base = flat[storage_offset:]
        arr = np.lib.stride_tricks.as_strided(base, shape=size, strides=tuple(st * flat.itemsize for st in stride))
        arr = np.array(arr, copy=True)  # own memory, C-contiguous, writable
    if storage.bfloat16:
        arr = _to_float32_from_bf16(arr)
    return arr


def _rebuild_tensor(storage, storage_offset, size, stride):  # torch<1.0 files
    return _rebuild_tensor_v2(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None, *state):
    return data


def _rebuild_from_type_v2(func, new_type, args, state):  # torch>=1.13 wraps tensors of subclasses / with state
    return func(*args)


def _torch_size(*args):
    return tuple(*args) if args else ()


class _PathPlaceholder(str):
    """pathlib Path objects in ``opt`` become strings (a WindowsPath cannot be built on Linux)."""

    def __new__(cls, *parts):
        return str.__new__(cls, os.path.join(*[str(p) for p in parts]) if parts else "")


def _safe_reconstruct_allowed():
    """numpy globals that only build arrays/scalars/dtypes (what torch's weights_only loader also allows)."""
    import importlib
    allowed = {}
    ma = None
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):  # numpy 2 / numpy 1 spelling
        try:
            ma = importlib.import_module(name)
            break
        except ImportError:
            continue
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):  # files name either, whatever numpy wrote them
        allowed[(mod, "_reconstruct")] = ma._reconstruct
        allowed[(mod, "scalar")] = ma.scalar
    allowed[("numpy", "ndarray")] = np.ndarray
    allowed[("numpy", "dtype")] = np.dtype
    for name in ("Float64DType", "Float32DType", "Float16DType", "Int64DType", "Int32DType", "UInt8DType",
                 "BoolDType"):
        if hasattr(np, "dtypes") and hasattr(np.dtypes, name):
            allowed[("numpy.dtypes", name)] = getattr(np.dtypes, name)
    return {k: v for k, v in allowed.items() if v is not None}


class _OfficialUnpickler(pickle.Unpickler):
    """Only the globals a YOLOv5 checkpoint needs; anything else is refused before it is imported."""

    def __init__(self, file, storages_loader, source, legacy=False):
        super().__init__(file, encoding="latin1")
        self._legacy = legacy
        self._load_storage = storages_loader
        self._source = source
        self._numpy_allowed = _safe_reconstruct_allowed()

    def find_class(self, module, name):
        if module == "torch._utils" and self._legacy and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return lambda *args: _LazyTensor(args[:4])
        if module == "torch._utils":
            fn = {"_rebuild_tensor_v2": _rebuild_tensor_v2, "_rebuild_tensor": _rebuild_tensor,
                  "_rebuild_parameter": _rebuild_parameter,
                  "_rebuild_parameter_with_state": _rebuild_parameter}.get(name)
            if fn:
                return fn
        if module == "torch._tensor" and name == "_rebuild_from_type_v2":
            return _rebuild_from_type_v2
        if module == "torch" and name in _STORAGE_DTYPES:
            return _stub_class("torch", name)  # only used as a marker in persistent ids
        if module == "torch" and name == "Size":
            return _torch_size
        if module == "torch" and name in _TORCH_DTYPES:
            return _stub_class("torch", name)
        if (module, name) in (("torch", "Tensor"), ("torch.nn.parameter", "Parameter")):
            return _stub_class(module, name)  # the new_type of _rebuild_from_type_v2: ignored
        if module in ("collections",) and name == "OrderedDict":
            return collections.OrderedDict
        if module in ("__builtin__", "builtins") and name in ("set", "frozenset", "slice", "complex"):
            return {"set": set, "frozenset": frozenset, "slice": slice, "complex": complex}[name]
        if module == "argparse" and name == "Namespace":
            return argparse.Namespace
        if module == "pathlib" and name in ("Path", "PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath"):
            return _PathPlaceholder
        if (module, name) in self._numpy_allowed:
            return self._numpy_allowed[(module, name)]
        if (module, name) in _STUB_EXACT or module.startswith(_STUB_PREFIXES) or module == "torch.nn":
            return _stub_class(module, name)
        raise CheckpointError(f"{self._source}: refusing to load global '{module}.{name}': it is not a class a "
                              "YOLOv5 checkpoint needs, and importing it could run arbitrary code")

    def persistent_load(self, pid):
        # ('storage', storage_type, key, location, numel[, view_metadata])
        if isinstance(pid, tuple) and len(pid) >= 2 and pid[0] == "module":  # legacy files: (tag, class, file, src)
            return pid[1]  # already vetted (stubbed) by find_class
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage"):
            raise CheckpointError(f"{self._source}: unsupported persistent id {pid!r}")
        storage_type, key, numel = pid[1], str(pid[2]), int(pid[4])
        if isinstance(storage_type, type) and issubclass(storage_type, StubObject):
            tname = storage_type._class_path.split(".")[-1]
            dtype = _STORAGE_DTYPES.get(tname) or _TORCH_DTYPES.get(tname)
        else:
            tname, dtype = repr(storage_type), None
        if dtype is None:
            raise CheckpointError(f"{self._source}: unsupported storage type {tname}")
        bf16 = "BFloat16" in tname or tname == "bfloat16"
        st = self._load_storage(key, np.dtype(dtype), numel)
        if isinstance(st, _DeferredStorage):
            st.bfloat16 = bf16
            return st
        return _Storage(st, bfloat16=bf16)


def _read_zip_pt(path):
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        pkl = [n for n in names if n.endswith("data.pkl")]
        if not pkl:
            raise CheckpointError(f"{path}: zip archive without data.pkl: not a PyTorch checkpoint")
        prefix = pkl[0][: -len("data.pkl")]
        cache = {}

        def load_storage(key, dtype, numel):
            if key not in cache:
                raw = zf.read(f"{prefix}data/{key}")
                if len(raw) < numel * dtype.itemsize:
                    raise CheckpointError(f"{path}: storage {key} holds {len(raw)} bytes, expected "
                                          f"{numel * dtype.itemsize}")
                cache[key] = np.frombuffer(raw, dtype=dtype, count=numel)
            return cache[key]

        return _OfficialUnpickler(io.BytesIO(zf.read(pkl[0])), load_storage, path).load()


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


class _DeferredStorage:
    """Legacy files store raw storage data after the object pickle: tensors are resolved once it is read."""
    __slots__ = ("key", "dtype", "numel", "bfloat16")

    def __init__(self, key, dtype, numel, bfloat16):
        self.key, self.dtype, self.numel, self.bfloat16 = key, dtype, numel, bfloat16


class _LazyTensor:
    __slots__ = ("args",)

    def __init__(self, args):
        self.args = args


class _HeaderUnpickler(pickle.Unpickler):
    """The legacy header records (magic, protocol, sys info, storage keys) hold only builtins."""

    def find_class(self, module, name):
        raise CheckpointError(f"unexpected global {module}.{name} in a legacy checkpoint header")


def _resolve_lazy(x, data):
    if isinstance(x, _LazyTensor):
        storage, *rest = x.args
        return _rebuild_tensor_v2(_Storage(data[storage.key], storage.bfloat16), *rest)
    if isinstance(x, dict):
        for k in list(x):
            x[k] = _resolve_lazy(x[k], data)
    elif isinstance(x, list):
        x[:] = [_resolve_lazy(v, data) for v in x]
    elif isinstance(x, tuple):
        return type(x)(_resolve_lazy(v, data) for v in x) if not hasattr(x, "_fields") else x
    elif isinstance(x, StubObject):
        for k, v in list(vars(x).items()):
            vars(x)[k] = _resolve_lazy(v, data)
    return x


def _read_legacy_pt(path):
    """torch<1.6 format: pickles of magic, protocol, sys info, the object, storage keys, then per storage an
    int64 element count and its raw bytes."""
    with open(path, "rb") as f:
        head = _HeaderUnpickler(f)
        if head.load() != _LEGACY_MAGIC:
            raise CheckpointError(f"{path}: not a PyTorch checkpoint (bad legacy magic number)")
        head.load(), head.load()  # protocol version, sys info
        pending = {}

        def load_storage(key, dtype, numel):
            pending[key] = _DeferredStorage(key, dtype, numel, False)
            return pending[key]

        obj = _OfficialUnpickler(f, load_storage, path, legacy=True).load()
        keys = _HeaderUnpickler(f).load()
        data = {}
        for key in keys:
            st = pending[str(key)]
            (numel,) = struct.unpack("<q", f.read(8))
            raw = f.read(numel * st.dtype.itemsize)
            if len(raw) < numel * st.dtype.itemsize:
                raise CheckpointError(f"{path}: truncated storage {key}")
            data[str(key)] = np.frombuffer(raw, dtype=st.dtype)
    return _resolve_lazy(obj, data)


def _stub_state_dict(module, prefix="", out=None):
    """The state dict of a stubbed nn.Module tree: parameters and persistent buffers, ordered like torch's."""
    out = collections.OrderedDict() if out is None else out
    d = vars(module)
    non_persistent = d.get("_non_persistent_buffers_set") or set()
    for name, p in (d.get("_parameters") or {}).items():
        if p is not None:
            out[prefix + name] = p
    for name, b in (d.get("_buffers") or {}).items():
        if b is not None and name not in non_persistent:
            out[prefix + name] = b
    for name, child in (d.get("_modules") or {}).items():
        if child is not None:
            _stub_state_dict(child, f"{prefix}{name}.", out)
    return out


def _plain(x):
    """Stub objects left outside models (rare) become dicts of their plain attributes."""
    if isinstance(x, StubObject):
        return {"__class__": x._class_path, **{k: _plain(v) for k, v in vars(x).items() if k != "_stub_args"}}
    if isinstance(x, dict):
        return type(x)((k, _plain(v)) for k, v in x.items()) if isinstance(x, collections.OrderedDict) else \
            {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    return x


def _stub_model_record(model):
    d = vars(model)
    sd = _stub_state_dict(model)
    detect = None
    modules = d.get("_modules", {})
    seq = modules.get("model")
    if seq is not None:
        kids = list(vars(seq).get("_modules", {}).values())
        detect = kids[-1] if kids else None
    rec = ModelRecord()
    rec["class"] = model._class_path
    rec["yaml"] = _plain(d.get("yaml"))
    rec["yaml_file"] = d.get("yaml_file")
    rec["names"] = _plain(d.get("names"))
    nc = d.get("nc")
    if nc is None and isinstance(rec["yaml"], dict):
        nc = rec["yaml"].get("nc")
    rec["nc"] = nc
    stride = d.get("stride")
    if stride is None and detect is not None:
        stride = vars(detect).get("stride")
    rec["stride"] = None if stride is None else np.asarray(stride, dtype=np.float32)
    rec["hyp"] = _plain(d.get("hyp"))
    if detect is not None:
        dd = vars(detect)
        rec["detect"] = {k: _plain(dd[k]) for k in ("nc", "no", "nl", "na", "inplace") if k in dd}
    rec["state_dict"] = sd
    return rec


def read_official_pt(path):
    """Read an official ultralytics YOLOv5 checkpoint without PyTorch.

    Returns a plain dict with the file's top-level entries; ``model`` and ``ema`` are :class:`ModelRecord` (or
    None), their state dicts numpy arrays in the stored dtype (fp16 for release files)."""
    path = str(path)
    try:
        if zipfile.is_zipfile(path):
            obj = _read_zip_pt(path)
        else:
            obj = _read_legacy_pt(path)
    except CheckpointError:
        raise
    except (pickle.UnpicklingError, EOFError, zipfile.BadZipFile, struct.error, KeyError, ValueError) as e:
        raise CheckpointError(f"{path}: not a readable PyTorch/YOLOv5 checkpoint ({type(e).__name__}: {e})") from e
    if isinstance(obj, StubObject) and "_modules" in vars(obj):  # a bare pickled model (torch.save(model))
        obj = {"model": obj}
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: holds a {type(obj).__name__}, expected a checkpoint dict")
    out = {}
    for k, v in obj.items():
        out[k] = _stub_model_record(v) if isinstance(v, StubObject) and "_modules" in vars(v) else _plain(v)
    out.setdefault("ema", None)
    out.setdefault("epoch", -1)
    out.setdefault("best_fitness", None)
    return out


# =================================================================================================================
# Own format
# =================================================================================================================
def _backend():
    from utils import backend  # lazy: the official reader and the file checks must work without a framework
    return backend


def _from_numpy(a, bk):
    """utils.backend.from_numpy, keeping 0-d arrays 0-d (np.ascontiguousarray under numpy 1.x makes them 1-d,
    which breaks loading BatchNorm's num_batches_tracked). Dtypes a framework lacks (OneFlow: int16) are widened."""
    a = np.asarray(a)
    try:
        t = bk.from_numpy(a)
    except Exception:
        t = bk.from_numpy(a.astype(np.int32 if a.dtype.kind in "iu" and a.itemsize < 4 else np.int64))
    return t.reshape(a.shape) if tuple(t.shape) != a.shape else t


def _is_tensor(x, bk):
    return bk is not None and isinstance(x, bk.torch.Tensor)


def _is_module(x, bk):
    return bk is not None and isinstance(x, bk.nn.Module)


def _tensor_to_numpy(t, bk):
    t = t.detach()
    if str(t.dtype).endswith("bfloat16"):
        t = t.float()  # numpy has no bfloat16; widening to fp32 is exact
    return t.cpu().numpy()


def model_record(model):
    """A model as a :class:`ModelRecord` of numpy arrays (the form it takes inside a checkpoint)."""
    bk = _backend()
    m = getattr(model, "module", model)  # DDP / DataParallel wrappers
    rec = ModelRecord()
    rec["class"] = type(m).__name__
    for k in ("yaml", "yaml_file", "names", "nc", "hyp"):
        v = getattr(m, k, None)
        if v is not None:
            rec[k] = v
    stride = getattr(m, "stride", None)
    if stride is not None:
        rec["stride"] = _tensor_to_numpy(stride, bk) if _is_tensor(stride, bk) else np.asarray(stride)
    rec["state_dict"] = collections.OrderedDict((k, _tensor_to_numpy(v, bk)) for k, v in m.state_dict().items())
    return rec


class _Encoder:
    """Object tree -> JSON-able tree + list of numpy arrays."""

    def __init__(self, bk):
        self.bk = bk
        self.arrays = []

    def array(self, a):
        a = np.asarray(a)
        self.arrays.append(a if a.flags.c_contiguous else np.ascontiguousarray(a))  # the latter makes 0-d 1-d
        return len(self.arrays) - 1

    def enc(self, x, where="obj"):
        bk = self.bk
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int) and not isinstance(x, bool):
            return x
        if isinstance(x, float):
            return x if np.isfinite(x) else {"__t__": "float", "v": repr(x)}
        if _is_tensor(x, bk):
            is_param = isinstance(x, bk.nn.Parameter)
            return {"__t__": "tensor", "i": self.array(_tensor_to_numpy(x, bk)), "rg": bool(x.requires_grad),
                    "param": bool(is_param)}
        if isinstance(x, np.ndarray):
            if x.dtype.hasobject:
                raise TypeError(f"{where}: numpy arrays of Python objects cannot be saved")
            return {"__t__": "nd", "i": self.array(x)}
        if isinstance(x, np.generic):
            return {"__t__": "npscalar", "dtype": x.dtype.str, "i": self.array(np.asarray(x))}
        if _is_module(x, bk):
            return {"__t__": "module", "v": self.enc(dict(model_record(x)), f"{where}<module>")}
        if isinstance(x, ModelRecord):
            return {"__t__": "module", "v": self.enc(dict(x), f"{where}<module>")}
        if isinstance(x, dict):
            tag = "odict" if isinstance(x, collections.OrderedDict) else "dict"
            return {"__t__": tag, "k": [self.enc(k, f"{where}.key") for k in x],
                    "v": [self.enc(v, f"{where}[{k!r}]") for k, v in x.items()]}
        if isinstance(x, list):
            return [self.enc(v, f"{where}[{i}]") for i, v in enumerate(x)]
        if isinstance(x, tuple):
            return {"__t__": "tuple", "v": [self.enc(v, f"{where}[{i}]") for i, v in enumerate(x)]}
        if isinstance(x, (set, frozenset)):
            return {"__t__": "set" if isinstance(x, set) else "frozenset", "v": [self.enc(v, where) for v in x]}
        if isinstance(x, bytes):
            return {"__t__": "bytes", "v": base64.b64encode(x).decode("ascii")}
        if isinstance(x, argparse.Namespace):
            return {"__t__": "namespace", "v": self.enc(vars(x), where)}
        if isinstance(x, pathlib.PurePath):
            return {"__t__": "path", "v": str(x)}
        if isinstance(x, complex):
            return {"__t__": "complex", "v": [x.real, x.imag]}
        if bk is not None and isinstance(x, bk.torch.dtype):
            return {"__t__": "dtype", "v": str(x).split(".")[-1]}
        if bk is not None and isinstance(x, bk.torch.device):
            return {"__t__": "device", "v": str(x)}
        hint = " (save its .state_dict())" if hasattr(x, "state_dict") else ""
        raise TypeError(f"{where}: cannot save a {type(x).__module__}.{type(x).__name__} in a checkpoint{hint}")


def save_checkpoint(obj, path):
    """Write obj (nested dicts/lists/tuples of tensors, arrays, numbers, strings, Namespaces, modules...) to one
    file, atomically: a temporary file in the same folder is fsynced and then renamed over ``path``, so a crash
    mid-save never leaves a half-written checkpoint under the final name."""
    path = pathlib.Path(path)
    try:
        bk = _backend()
    except ImportError:
        bk = None  # plain numpy objects can still be saved
    enc = _Encoder(bk)
    tree = enc.enc(obj)
    index, offset = [], 0
    for a in enc.arrays:
        offset = -(-offset // _ALIGN) * _ALIGN
        index.append({"dtype": a.dtype.str, "shape": list(a.shape), "offset": offset, "nbytes": a.nbytes})
        offset += a.nbytes
    header = json.dumps({
        "format": "yolov5-checkpoint", "version": FORMAT_VERSION, "tree": tree, "arrays": index,
        "producer": {"backend": getattr(bk, "BACKEND", None), "framework": getattr(bk, "VERSION", None),
                     "numpy": np.__version__},
        "saved": datetime.now().isoformat(timespec="seconds")}, allow_nan=False).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            crc = 0
            written = 0

            def write(b):
                nonlocal crc, written
                f.write(b)
                crc = zlib.crc32(b, crc)
                written += len(b)

            write(_HEAD.pack(MAGIC, FORMAT_VERSION, len(header)))
            write(header)
            data_start = written
            for a, meta in zip(enc.arrays, index):
                pad = data_start + meta["offset"] - written
                if pad:
                    write(b"\0" * pad)
                write(memoryview(a).cast("B") if a.nbytes else b"")
            f.write(_TRAIL.pack(TRAILER_MAGIC, written, crc & 0xFFFFFFFF))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def is_own_checkpoint(path):
    with open(path, "rb") as f:
        return f.read(len(MAGIC)) == MAGIC


def is_official_pt(path):
    """A PyTorch file: a zip archive (torch>=1.6) or a legacy pickle (starts with a pickle protocol opcode)."""
    with open(path, "rb") as f:
        head = f.read(4)
    return head[:4] == b"PK\x03\x04" or head[:1] == b"\x80"


def _read_own(path):
    """Validate and parse an own-format file -> (header dict, data buffer, data offset)."""
    path = str(path)
    with open(path, "rb") as f:
        buf = bytearray(f.read())  # bytearray: numpy views on it are writable, so tensors need no extra copy
    if len(buf) < _HEAD.size or bytes(buf[:len(MAGIC)]) != MAGIC:
        raise CheckpointError(f"{path}: not a YOLOv5 checkpoint of this project (no '{MAGIC.decode()}' header); "
                              "official ultralytics .pt files are read with load_any()/read_official_pt()")
    _, version, hlen = _HEAD.unpack_from(buf, 0)
    if version > FORMAT_VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {version} is newer than this code reads "
                              f"({FORMAT_VERSION}); update the project")
    if len(buf) < _HEAD.size + hlen + _TRAIL.size:
        raise CheckpointError(f"{path}: truncated checkpoint ({len(buf)} bytes; header alone needs "
                              f"{_HEAD.size + hlen}): the save was interrupted or the copy is incomplete")
    tmagic, body_len, crc = _TRAIL.unpack_from(buf, len(buf) - _TRAIL.size)
    if tmagic != TRAILER_MAGIC or body_len != len(buf) - _TRAIL.size:
        raise CheckpointError(f"{path}: truncated or corrupt checkpoint (trailer missing or wrong length, file has "
                              f"{len(buf)} bytes)")
    body = memoryview(buf)[:body_len]
    if zlib.crc32(body) & 0xFFFFFFFF != crc:
        raise CheckpointError(f"{path}: corrupt checkpoint (crc32 mismatch)")
    try:
        header = json.loads(bytes(buf[_HEAD.size:_HEAD.size + hlen]).decode("utf-8"))
    except ValueError as e:
        raise CheckpointError(f"{path}: corrupt checkpoint header ({e})") from e
    return header, buf, _HEAD.size + hlen


class _Decoder:
    def __init__(self, header, buf, start, path, tensors, map_location, build_models):
        self.index, self.buf, self.start, self.path = header["arrays"], buf, start, path
        self.tensors, self.map_location, self.build_models = tensors, map_location, build_models
        self.bk = _backend() if tensors or build_models else None

    def array(self, i):
        meta = self.index[i]
        dt = np.dtype(meta["dtype"])
        off = self.start + meta["offset"]
        n = int(np.prod(meta["shape"])) if meta["shape"] else 1
        if off + n * dt.itemsize > len(self.buf):
            raise CheckpointError(f"{self.path}: array {i} lies past the end of the file")
        return np.frombuffer(self.buf, dtype=dt, count=n, offset=off).reshape(meta["shape"])

    def tensor(self, a, requires_grad=False, param=False):
        bk = self.bk
        t = _from_numpy(a, bk)
        if self.map_location is not None:
            t = t.to(self.map_location)
        if param:
            t = bk.nn.Parameter(t, requires_grad=requires_grad)
        elif requires_grad:
            t.requires_grad_(True)
        return t

    def dec(self, x):
        if not isinstance(x, dict):
            return [self.dec(v) for v in x] if isinstance(x, list) else x
        t = x.get("__t__")
        if t == "tensor":
            a = self.array(x["i"])
            return self.tensor(a, x.get("rg", False), x.get("param", False)) if self.tensors else a.copy()
        if t == "nd":
            return self.array(x["i"]).copy()
        if t == "npscalar":
            return self.array(x["i"]).reshape(())[()]
        if t in ("dict", "odict"):
            keys = [self.dec(k) for k in x["k"]]
            vals = [self.dec(v) for v in x["v"]]
            return (collections.OrderedDict if t == "odict" else dict)(zip(keys, vals))
        if t == "tuple":
            return tuple(self.dec(v) for v in x["v"])
        if t in ("set", "frozenset"):
            return (set if t == "set" else frozenset)(self.dec(v) for v in x["v"])
        if t == "float":
            return float(x["v"])
        if t == "bytes":
            return base64.b64decode(x["v"])
        if t == "namespace":
            return argparse.Namespace(**self.dec(x["v"]))
        if t == "path":
            return pathlib.Path(x["v"])
        if t == "complex":
            return complex(*x["v"])
        if t == "dtype":
            return getattr(self.bk.torch, x["v"]) if self.bk is not None else x["v"]
        if t == "device":
            return x["v"]
        if t == "module":
            saved_tensors, self.tensors = self.tensors, False  # records hold numpy state dicts
            rec = ModelRecord(self.dec(x["v"]))
            self.tensors = saved_tensors
            if self.build_models and isinstance(rec.get("yaml"), dict):  # a YOLOv5 model; other modules stay records
                m = build_model(rec, source=self.path)
                return m.to(self.map_location) if self.map_location is not None else m
            return rec
        raise CheckpointError(f"{self.path}: unknown node type {t!r} in checkpoint")


def load_checkpoint(path, map_location=None, tensors=True, build_models=True):
    """Read a file written by :func:`save_checkpoint`.

    tensors=True rebuilds framework tensors (on ``map_location`` if given) through ``utils.backend.from_numpy``;
    False leaves numpy arrays (no framework needed). Stored models come back as float32 ``DetectionModel``s
    (build_models=True) or as :class:`ModelRecord`."""
    header, buf, start = _read_own(path)
    try:
        return _Decoder(header, buf, start, str(path), tensors, map_location, build_models).dec(header["tree"])
    except CheckpointError:
        raise
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: corrupt checkpoint structure ({type(e).__name__}: {e})") from e


def load_any(path, map_location=None, tensors=False, build_models=False):
    """Either format -> a dict. Defaults give plain data (numpy, ModelRecord) for both, so callers such as
    ``attempt_load`` need no branch on the file type."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if is_own_checkpoint(path):
        return load_checkpoint(path, map_location=map_location, tensors=tensors, build_models=build_models)
    if is_official_pt(path):
        return read_official_pt(path)
    raise CheckpointError(f"{path}: neither a checkpoint of this project nor a PyTorch/ultralytics .pt file")


# =================================================================================================================
# Building models from records
# =================================================================================================================
_LEGACY_KEYS = ("anchor_grid",)  # buffers older YOLOv5 versions saved but the model recomputes


def load_record_state_dict(model, state_dict, source="checkpoint"):
    """Copy a numpy state dict into model, casting to the model's dtypes (fp16 files -> fp32 model).
    Missing parameters or shape mismatches raise; legacy extra keys (e.g. ``model.24.anchor_grid``) are skipped."""
    bk = _backend()
    own = model.state_dict()
    missing = [k for k in own if k not in state_dict and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state_dict if k not in own and not k.endswith(_LEGACY_KEYS)
                  and not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise CheckpointError(f"{source}: state dict does not match the model built from its yaml: "
                              f"missing {missing[:8]}{'...' if len(missing) > 8 else ''}, "
                              f"unexpected {unexpected[:8]}{'...' if len(unexpected) > 8 else ''}")
    new = collections.OrderedDict()
    for k, ref in own.items():
        if k not in state_dict:
            new[k] = ref
            continue
        a = np.asarray(state_dict[k])
        if tuple(a.shape) != tuple(ref.shape):
            raise CheckpointError(f"{source}: {k} has shape {tuple(a.shape)}, the model expects {tuple(ref.shape)}")
        np_dtype = np.dtype(str(ref.dtype).split(".")[-1]) if "bfloat16" not in str(ref.dtype) else np.float32
        new[k] = _from_numpy(a.astype(np_dtype, copy=False), bk).to(ref.device)
    model.load_state_dict(new)
    return model


def build_model(record, source="checkpoint"):
    """A float32 DetectionModel from a :class:`ModelRecord` (official or own): yaml -> model, weights, names."""
    import copy
    from models.yolo import DetectionModel  # lazy: models import this module
    cfg = record.get("yaml")
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{source}: the stored model has no yaml dict, cannot rebuild it")
    cfg = copy.deepcopy(cfg)
    nc = record.get("nc") or cfg.get("nc")
    model = DetectionModel(cfg, ch=cfg.get("ch", 3), nc=nc)
    load_record_state_dict(model, record["state_dict"], source)
    names = record.get("names")
    if isinstance(names, (list, tuple)):
        names = dict(enumerate(names))
    if names is not None:
        model.names = names
    if record.get("hyp") is not None:
        model.hyp = record["hyp"]
    stored_stride = record.get("stride")
    if stored_stride is not None:
        ours = np.asarray(_backend().to_numpy(model.stride) if not isinstance(model.stride, np.ndarray)
                          else model.stride, dtype=np.float32)
        if ours.shape != np.asarray(stored_stride).shape or not np.allclose(ours, stored_stride):
            raise CheckpointError(f"{source}: stored stride {np.asarray(stored_stride).tolist()} differs from the "
                                  f"rebuilt model's {ours.tolist()}")
    return model.float()


# =================================================================================================================
# Optimizer state across backends
# =================================================================================================================
def optimizer_state_for_backend(state_dict, backend=None):
    """Translate an SGD/Adam/AdamW state dict saved under one backend into the layout of the other.

    PyTorch: state {i: {'momentum_buffer'|'exp_avg','exp_avg_sq','step'}}, groups with flat hyperparameters.
    OneFlow 0.9: state {'step': n, i: {'momentum_buf'|'exp_avg','exp_avg_sq'}}, groups {'_options': {...},
    '_enable_clip_grad': False, 'params': [...]}. Unknown keys are kept; a state already in the target layout
    is returned unchanged."""
    backend = backend or _backend().BACKEND
    state, groups = state_dict.get("state", {}), state_dict.get("param_groups", [])
    from_oneflow = any("_options" in g for g in groups)
    if (backend == "oneflow") == from_oneflow:
        return state_dict
    bk = _backend()
    if backend == "oneflow":  # torch -> oneflow
        new_state, step = {}, None
        for i, s in state.items():
            s = dict(s)
            if "step" in s:
                st = s.pop("step")
                step = int(float(st.item() if hasattr(st, "item") else st))
            if "momentum_buffer" in s:
                s["momentum_buf"] = s.pop("momentum_buffer")
            new_state[i] = s
        if step is not None:
            new_state["step"] = step
        new_groups = []
        for g in groups:
            opts = {k: v for k, v in g.items() if k != "params" and
                    k not in ("foreach", "differentiable", "capturable", "fused", "decoupled_weight_decay")}
            opts["fused"] = False
            if "betas" in opts and step:  # OneFlow keeps Adam's bias corrections in the group
                b1, b2 = opts["betas"]
                opts.update(bias_correction1=1 - b1 ** step, bias_correction2=1 - b2 ** step,
                            do_bias_correction=True)
            new_groups.append({"_options": opts, "_enable_clip_grad": False, "params": list(g["params"])})
        return {"state": new_state, "param_groups": new_groups}
    # oneflow -> torch
    step = state.get("step")
    new_state = {}
    for i, s in state.items():
        if i == "step":
            continue
        s = dict(s)
        if "momentum_buf" in s:
            s["momentum_buffer"] = s.pop("momentum_buf")
        if "exp_avg" in s and step is not None:
            s["step"] = bk.torch.tensor(float(step))
        new_state[i] = s
    new_groups = []
    for g in groups:
        opts = {k: v for k, v in g.get("_options", {}).items()
                if k not in ("bias_correction1", "bias_correction2", "do_bias_correction", "fused")}
        new_groups.append({**opts, "params": list(g["params"])})
    return {"state": new_state, "param_groups": new_groups}
