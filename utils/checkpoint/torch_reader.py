"""Reading PyTorch files (torch.save: the zip archive of torch>=1.6 and the legacy single-file format) without
PyTorch and without running code from the file.

A restricted unpickler resolves only what a YOLOv5 checkpoint needs: ``models.*`` and ``torch.nn.*`` classes are
stubbed (:class:`StubObject` keeps their state, runs nothing), tensors are rebuilt from the raw storages into
numpy arrays (wrapped in :class:`TensorData` so callers can tell a tensor from a numpy array and keep
requires_grad), numpy arrays/scalars, Namespaces, paths, OrderedDicts, sets and bytes are rebuilt with the
harmless constructors numpy and the standard library provide. Any other global is refused before it is imported.
"""
import argparse
import codecs
import collections
import importlib
import io
import os
import pathlib
import pickle
import struct
import zipfile

import numpy as np

from utils.checkpoint.records import DAMAGED_REMEDY, CheckpointError

# Storage class name -> numpy dtype. BFloat16 has no numpy dtype: its raw uint16 bits are widened to float32.
STORAGE_DTYPES = {
    "HalfStorage": np.float16, "FloatStorage": np.float32, "DoubleStorage": np.float64,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16, "CharStorage": np.int8,
    "ByteStorage": np.uint8, "BoolStorage": np.bool_, "BFloat16Storage": np.uint16,
}
TORCH_DTYPES = {  # torch dtype globals (e.g. 'torch float16') that may appear in newer pickles
    "float16": np.float16, "half": np.float16, "float32": np.float32, "float": np.float32, "float64": np.float64,
    "double": np.float64, "int64": np.int64, "long": np.int64, "int32": np.int32, "int": np.int32,
    "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_, "bfloat16": np.uint16,
}
# Module namespaces whose classes are stubbed (never imported): the model's own classes and torch.nn layers.
_STUB_PREFIXES = ("models.", "torch.nn.modules.", "utils.activations")
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
MAX_PICKLE_BYTES = 256 << 20  # a checkpoint's object pickle (tensors are stored apart); yolov5x's is under 1 MB


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


def stub_class(module, name):
    key = f"{module}.{name}"
    if key not in _stub_classes:
        _stub_classes[key] = type(name, (StubObject,), {"_class_path": key, "__module__": "utils.checkpoint.stubs"})
    return _stub_classes[key]


class TensorData:
    """A tensor read from a file: its values as a C-contiguous numpy array, and whether it was a Parameter and
    required grad (so a caller with a framework can rebuild it exactly)."""
    __slots__ = ("array", "requires_grad", "param")

    def __init__(self, array, requires_grad=False, param=False):
        self.array, self.requires_grad, self.param = array, bool(requires_grad), bool(param)


class _Storage:
    """A raw storage: a flat numpy array of its dtype (BFloat16 as uint16 bits, marked)."""
    __slots__ = ("array", "bfloat16")

    def __init__(self, array, bfloat16=False):
        self.array, self.bfloat16 = array, bfloat16


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
        view = np.lib.stride_tricks.as_strided(flat[storage_offset:], shape=size,
                                               strides=tuple(st * flat.itemsize for st in stride))
        arr = np.array(view, copy=True)  # own memory, C-contiguous, writable
    if storage.bfloat16:
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return TensorData(arr, requires_grad)


def _rebuild_tensor(storage, storage_offset, size, stride):  # torch<1.0 files
    return _rebuild_tensor_v2(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None, *state):
    if isinstance(data, TensorData):
        return TensorData(data.array, requires_grad, param=True)
    return data


def _rebuild_from_type_v2(func, new_type, args, state):  # torch>=1.13 wraps tensors of subclasses / with state
    return func(*args)


def _torch_size(*args):
    return tuple(*args) if args else ()


def _torch_device(*args):
    return str(args[0]) if args else "cpu"


def _safe_numpy_globals():
    """numpy globals that only build arrays/scalars/dtypes (what torch's weights_only loader also allows)."""
    ma = None
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):  # numpy 2 / numpy 1 spelling
        try:
            ma = importlib.import_module(name)
            break
        except ImportError:
            continue
    allowed = {}
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):  # files name either, whatever numpy wrote them
        allowed[(mod, "_reconstruct")] = ma._reconstruct
        allowed[(mod, "scalar")] = ma.scalar
    allowed[("numpy", "ndarray")] = np.ndarray
    allowed[("numpy", "dtype")] = np.dtype
    for name in ("Float64DType", "Float32DType", "Float16DType", "Int64DType", "Int32DType", "Int16DType",
                 "Int8DType", "UInt8DType", "UInt32DType", "UInt16DType", "UInt64DType", "BoolDType"):
        if hasattr(np, "dtypes") and hasattr(np.dtypes, name):
            allowed[("numpy.dtypes", name)] = getattr(np.dtypes, name)
    return allowed


_PATHS = {"Path": pathlib.Path, "PosixPath": pathlib.Path, "PurePosixPath": pathlib.PurePosixPath,
          "WindowsPath": pathlib.PureWindowsPath, "PureWindowsPath": pathlib.PureWindowsPath,
          "PurePath": pathlib.PurePath}
_BUILTINS = {"set": set, "frozenset": frozenset, "slice": slice, "complex": complex, "bytes": bytes,
             "bytearray": bytearray}
# Plain objects official checkpoints pickle beside the model, stubbed like the model's classes: a classifier's
# preprocessing (torchvision Compose/Normalize around ultralytics' CenterCrop/ToTensor).
_STUB_GLOBALS = {("torchvision.transforms.transforms", "Compose"), ("torchvision.transforms.transforms", "Normalize"),
                 ("utils.augmentations", "CenterCrop"), ("utils.augmentations", "ToTensor")}


class StubAttribute:
    """What ``getattr(<stubbed class>, name)`` stands for in a file (official Segment keeps ``detect =
    Detect.forward``): the attribute's dotted name, nothing resolved or called."""
    __slots__ = ("path",)

    def __init__(self, path):
        self.path = path

    def __repr__(self):
        return f"<attribute {self.path}>"


def _stub_getattr(obj, name, *default):
    """getattr as a pickle global may only name an attribute of a stubbed class: it becomes a StubAttribute."""
    if not (isinstance(obj, type) and issubclass(obj, StubObject)) or not isinstance(name, str) or \
            name.startswith("_"):
        raise CheckpointError(f"refusing getattr({obj!r}, {name!r}) in a checkpoint: only a public attribute of a "
                              "model class may be named")
    return StubAttribute(f"{obj._class_path}.{name}")


class RestrictedUnpickler(pickle.Unpickler):
    """Only the globals a YOLOv5 checkpoint needs; anything else is refused before it is imported."""

    def __init__(self, file, storages_loader, source, legacy=False):
        super().__init__(file, encoding="latin1")
        self._legacy = legacy
        self._load_storage = storages_loader
        self._source = source
        self._numpy_allowed = _safe_numpy_globals()

    def find_class(self, module, name):
        if module == "torch._utils" and self._legacy and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return lambda *args: _LazyTensor(args[:4])  # storage data follows the pickle in legacy files
        if module == "torch._utils" and self._legacy and name.startswith("_rebuild_parameter"):
            return lambda data, requires_grad=False, *rest: TensorData(data, requires_grad, param=True)
        if module == "torch._utils":
            fn = {"_rebuild_tensor_v2": _rebuild_tensor_v2, "_rebuild_tensor": _rebuild_tensor,
                  "_rebuild_parameter": _rebuild_parameter,
                  "_rebuild_parameter_with_state": _rebuild_parameter}.get(name)
            if fn:
                return fn
        if module == "torch._tensor" and name == "_rebuild_from_type_v2":
            return _rebuild_from_type_v2
        if module == "torch" and (name in STORAGE_DTYPES or name in TORCH_DTYPES):
            return stub_class("torch", name)  # storage types: markers in persistent ids; dtypes: kept by name
        if module == "torch" and name == "Size":
            return _torch_size
        if module == "torch" and name == "device":
            return _torch_device
        if (module, name) in (("torch", "Tensor"), ("torch.nn.parameter", "Parameter")):
            return stub_class(module, name)  # the new_type of _rebuild_from_type_v2: ignored
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module in ("__builtin__", "builtins") and name in _BUILTINS:
            return _BUILTINS[name]
        if module in ("__builtin__", "builtins") and name == "getattr":
            return _stub_getattr
        if (module, name) in _STUB_GLOBALS:
            return stub_class(module, name)
        if module == "_codecs" and name == "encode":  # how protocol 2 writes bytes: text -> bytes, nothing else
            return codecs.encode
        if module == "argparse" and name == "Namespace":
            return argparse.Namespace
        if module in ("pathlib", "pathlib._local") and name in _PATHS:
            return _PATHS[name]
        if (module, name) in self._numpy_allowed:
            return self._numpy_allowed[(module, name)]
        if module.startswith(_STUB_PREFIXES) or module == "torch.nn":
            return stub_class(module, name)
        raise CheckpointError(f"{self._source}: refusing to load global '{module}.{name}': it is not a class a "
                              "YOLOv5 checkpoint needs, and importing it could run arbitrary code")

    def persistent_load(self, pid):
        # ('storage', storage_type, key, location, numel[, view_metadata])
        if isinstance(pid, tuple) and len(pid) >= 2 and pid[0] == "module":  # legacy files: (tag, class, file, src)
            return pid[1]  # already vetted (stubbed) by find_class
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise CheckpointError(f"{self._source}: unsupported persistent id {pid!r}")
        storage_type, key, numel = pid[1], str(pid[2]), int(pid[4])
        if isinstance(storage_type, type) and issubclass(storage_type, StubObject):
            tname = storage_type._class_path.split(".")[-1]
            dtype = STORAGE_DTYPES.get(tname) or TORCH_DTYPES.get(tname)
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


def read_zip(path):
    """The object stored in a torch>=1.6 zip archive (any archive folder name)."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        pkl = [n for n in names if n.endswith("data.pkl") and n.count("/") <= 1]
        if not pkl:
            raise CheckpointError(f"{path}: zip archive without data.pkl: not a PyTorch checkpoint")
        prefix = pkl[0][: -len("data.pkl")]
        cache = {}

        def load_storage(key, dtype, numel):
            if key not in cache:
                info = zf.getinfo(f"{prefix}data/{key}")
                if info.file_size != numel * dtype.itemsize:  # checked before reading: no member inflates unasked
                    raise CheckpointError(f"{path} is corrupt (storage {key} holds {info.file_size} bytes, expected "
                                          f"{numel * dtype.itemsize}); {DAMAGED_REMEDY}")
                raw = zf.read(info)
                if len(raw) < numel * dtype.itemsize:
                    raise CheckpointError(f"{path} is truncated or corrupt (storage {key} holds {len(raw)} bytes, "
                                          f"expected {numel * dtype.itemsize}); {DAMAGED_REMEDY}")
                cache[key] = np.frombuffer(raw, dtype=dtype, count=numel)
            return cache[key]

        if zf.getinfo(pkl[0]).file_size > MAX_PICKLE_BYTES:
            raise CheckpointError(f"{path}: its object pickle is over {MAX_PICKLE_BYTES >> 20} MiB, no YOLOv5 "
                                  f"checkpoint's is; {DAMAGED_REMEDY}")
        return RestrictedUnpickler(io.BytesIO(zf.read(pkl[0])), load_storage, path).load()


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
    if isinstance(x, TensorData) and isinstance(x.array, _LazyTensor):  # a Parameter around a lazy tensor
        t = _resolve_lazy(x.array, data)
        return TensorData(t.array, x.requires_grad, x.param)
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


def read_legacy(path):
    """torch<1.6 format: pickles of magic, protocol, sys info, the object, storage keys, then per storage an
    int64 element count and its raw bytes."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = _HeaderUnpickler(f)
        if head.load() != _LEGACY_MAGIC:
            raise CheckpointError(f"{path}: not a PyTorch checkpoint (bad legacy magic number)")
        head.load(), head.load()  # protocol version, sys info
        pending = {}

        def load_storage(key, dtype, numel):
            pending[key] = _DeferredStorage(key, dtype, numel, False)
            return pending[key]

        obj = RestrictedUnpickler(f, load_storage, path, legacy=True).load()
        keys = _HeaderUnpickler(f).load()
        data = {}
        for key in keys:
            st = pending[str(key)]
            (numel,) = struct.unpack("<q", f.read(8))
            if not 0 <= numel * st.dtype.itemsize <= size - f.tell():  # checked before reading: no huge allocation
                raise CheckpointError(f"{path} is truncated (storage {key} ends early); {DAMAGED_REMEDY}")
            raw = f.read(numel * st.dtype.itemsize)
            if len(raw) < numel * st.dtype.itemsize:
                raise CheckpointError(f"{path} is truncated (storage {key} ends early); {DAMAGED_REMEDY}")
            data[str(key)] = np.frombuffer(raw, dtype=st.dtype)
    return _resolve_lazy(obj, data)


def read_pytorch_file(path):
    """The raw object tree of a torch.save file (zip or legacy): stubs, TensorData, plain Python and numpy."""
    path = str(path)
    try:
        return read_zip(path) if zipfile.is_zipfile(path) else read_legacy(path)
    except CheckpointError:
        raise
    except zipfile.BadZipFile as e:
        raise CheckpointError(f"{path}: corrupt checkpoint ({e}): the file was damaged after it was written; "
                              f"{DAMAGED_REMEDY}") from e
    except (pickle.UnpicklingError, EOFError, struct.error, KeyError, ValueError, TypeError, AttributeError,
            IndexError) as e:
        raise CheckpointError(f"{path} is truncated or not a checkpoint: corrupt or unreadable PyTorch/YOLOv5 file "
                              f"({type(e).__name__}: {e}); {DAMAGED_REMEDY}") from e
