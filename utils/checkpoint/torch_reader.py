"""Reading PyTorch files (torch.save: the zip archive of torch>=1.6 and the legacy single-file format) without
PyTorch and without running code from the file.

A restricted unpickler resolves only what a YOLOv5 checkpoint needs: ``models.*`` and ``torch.nn.*`` classes are
stubbed (:class:`StubObject` keeps their state, runs nothing), tensors are rebuilt from the raw storages into
numpy arrays (wrapped in :class:`TensorData` so callers can tell a tensor from a numpy array and keep
requires_grad), numpy arrays/scalars, Namespaces, paths, OrderedDicts, sets and bytes are rebuilt with the
harmless constructors numpy and the standard library provide. Any other global is refused before it is imported.

What a file may make the reader allocate is bounded before it is allocated: a storage must be a stored (not
compressed) archive member whose size is exactly what the pickle declares and which lies inside the archive; a tensor
view must lie inside its storage, and may hold more elements than its storage (a stride-0 expansion, as Detect's
anchor_grid) only up to MAX_EXPANDED_ELEMENTS; all tensors of one file together are copied out within a budget of
twice the file's size plus BUDGET_ALLOWANCE. numpy arrays, scalars and dtypes are rebuilt from checked state only
(no object dtypes, no forged dtype flags: numpy would read raw bytes as object pointers and crash). A file that breaks
a bound is refused with one CheckpointError naming it.

This module reads the two file formats; unpickler.py resolves the pickle's globals, pickle_values.py builds the values.
"""
import io
import os
import pickle
import struct
import zipfile

import numpy as np

from utils.checkpoint.pickle_values import Budget
from utils.checkpoint.records import DAMAGED_REMEDY, CheckpointError
from utils.checkpoint.unpickler import DeferredStorage, RestrictedUnpickler, resolve_lazy

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
MAX_PICKLE_BYTES = 256 << 20  # a checkpoint's object pickle (tensors are stored apart); yolov5x's is under 1 MB


def read_zip(path):
    """The object stored in a torch>=1.6 zip archive (any archive folder name)."""
    archive_bytes = os.path.getsize(path)
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
                _check_storage_member(path, key, info, numel * dtype.itemsize, archive_bytes)
                raw = zf.read(info)
                if len(raw) < numel * dtype.itemsize:
                    raise CheckpointError(f"{path} is truncated or corrupt (storage {key} holds {len(raw)} bytes, "
                                          f"expected {numel * dtype.itemsize}); {DAMAGED_REMEDY}")
                cache[key] = np.frombuffer(raw, dtype=dtype, count=numel)
            return cache[key]

        if zf.getinfo(pkl[0]).file_size > MAX_PICKLE_BYTES:
            raise CheckpointError(f"{path}: its object pickle is over {MAX_PICKLE_BYTES >> 20} MiB, no YOLOv5 "
                                  f"checkpoint's is; {DAMAGED_REMEDY}")
        return RestrictedUnpickler(io.BytesIO(zf.read(pkl[0])), load_storage, path,
                                   budget=Budget(archive_bytes)).load()


def _check_storage_member(path, key, info, declared, archive_bytes):
    """Before a storage is read: its member holds exactly the bytes the pickle declares, stored as they are
    (torch.save never compresses; a compressed member may declare gigabytes that a few bytes inflate to), and lies
    inside the archive (a stored member's declared size cannot exceed what the file has)."""
    if info.compress_type != zipfile.ZIP_STORED:
        raise CheckpointError(f"{path} is corrupt (storage {key} is compressed, which torch.save never writes, and "
                              f"declares {info.file_size} bytes); {DAMAGED_REMEDY}")
    if info.file_size != declared or info.compress_size != info.file_size:
        raise CheckpointError(f"{path} is corrupt (storage {key} holds {info.file_size} bytes, expected "
                              f"{declared}); {DAMAGED_REMEDY}")
    if info.header_offset + info.compress_size > archive_bytes:
        raise CheckpointError(f"{path} is truncated or corrupt (storage {key} of {declared} bytes would end past "
                              f"the file's {archive_bytes} bytes); {DAMAGED_REMEDY}")


class _HeaderUnpickler(pickle.Unpickler):
    """The legacy header records (magic, protocol, sys info, storage keys) hold only builtins."""

    def find_class(self, module, name):
        raise CheckpointError(f"unexpected global {module}.{name} in a legacy checkpoint header")


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
            pending[key] = DeferredStorage(key, dtype, numel, False)
            return pending[key]

        budget = Budget(size)
        obj = RestrictedUnpickler(f, load_storage, path, legacy=True, budget=budget).load()
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
    return resolve_lazy(obj, data, budget)


def read_pytorch_file(path):
    """The raw object tree of a torch.save file (zip or legacy): stubs, TensorData, plain Python and numpy."""
    path = str(path)
    try:
        return read_zip(path) if zipfile.is_zipfile(path) else read_legacy(path)
    except CheckpointError as e:
        if path in str(e):
            raise
        raise CheckpointError(f"{path} is corrupt or not a checkpoint: {e}; {DAMAGED_REMEDY}") from e
    except (RecursionError, MemoryError) as e:
        raise CheckpointError(f"{path} is corrupt or not a checkpoint: it asks for more "
                              f"{'nesting' if isinstance(e, RecursionError) else 'memory'} than any checkpoint "
                              f"needs; {DAMAGED_REMEDY}") from e
    except zipfile.BadZipFile as e:
        raise CheckpointError(f"{path}: corrupt checkpoint ({e}): the file was damaged after it was written; "
                              f"{DAMAGED_REMEDY}") from e
    except (pickle.UnpicklingError, EOFError, struct.error, KeyError, ValueError, TypeError, AttributeError,
            IndexError) as e:
        raise CheckpointError(f"{path} is truncated or not a checkpoint: corrupt or unreadable PyTorch/YOLOv5 file "
                              f"({type(e).__name__}: {e}); {DAMAGED_REMEDY}") from e

