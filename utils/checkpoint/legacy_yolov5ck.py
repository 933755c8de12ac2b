"""Reader of the project's earlier checkpoint format, 'YOLOv5CK' (files written before checkpoints became
PyTorch archives keep loading)::

    b"YOLOv5CK" | uint32 format version | uint64 header length | header (UTF-8 JSON) | array blobs | trailer
    trailer = b"YOLOv5END" | uint64 length of everything before the trailer | uint32 crc32 of it

The JSON header holds the object tree with tagged nodes (tuples, sets, non-string dict keys, numpy scalars,
Namespaces, Paths, tensors, modules stored as model records) and an index of the arrays (dtype, shape, offset).
No pickle is involved, so such a file cannot run code either.
"""
import argparse
import base64
import collections
import json
import pathlib
import struct
import zlib

import numpy as np

from utils.checkpoint.records import DAMAGED_REMEDY, CheckpointError, ModelRecord, from_numpy, model_builder

MAGIC = b"YOLOv5CK"
TRAILER_MAGIC = b"YOLOv5END"
FORMAT_VERSION = 1
HEAD = struct.Struct("<8sIQ")
TRAIL = struct.Struct("<9sQI")


def _backend():
    from utils import backend  # framework choice: with tensors=False the file is read without one
    return backend


def is_legacy_checkpoint(path):
    with open(path, "rb") as f:
        return f.read(len(MAGIC)) == MAGIC


def _read_own(path):
    """Validate and parse an own-format file -> (header dict, data buffer, data offset)."""
    path = str(path)
    with open(path, "rb") as f:
        buf = bytearray(f.read())  # bytearray: numpy views on it are writable, so tensors need no extra copy
    if len(buf) < HEAD.size or bytes(buf[:len(MAGIC)]) != MAGIC:
        raise CheckpointError(f"{path}: not a YOLOv5 checkpoint of this project (no '{MAGIC.decode()}' header); "
                              "official ultralytics .pt files are read with load_any()/read_official_pt()")
    _, version, hlen = HEAD.unpack_from(buf, 0)
    if version > FORMAT_VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {version} is newer than this code reads "
                              f"({FORMAT_VERSION}); update the project")
    if len(buf) < HEAD.size + hlen + TRAIL.size:
        raise CheckpointError(f"{path} is truncated ({len(buf)} bytes; its header alone needs {HEAD.size + hlen}): "
                              f"the copy or save did not finish; {DAMAGED_REMEDY}")
    tmagic, body_len, crc = TRAIL.unpack_from(buf, len(buf) - TRAIL.size)
    if tmagic != TRAILER_MAGIC or body_len != len(buf) - TRAIL.size:
        raise CheckpointError(f"{path}: truncated or corrupt checkpoint (trailer missing or wrong length, file has "
                              f"{len(buf)} bytes); {DAMAGED_REMEDY}")
    body = memoryview(buf)[:body_len]
    if zlib.crc32(body) & 0xFFFFFFFF != crc:
        raise CheckpointError(f"{path}: corrupt checkpoint (crc32 mismatch); {DAMAGED_REMEDY}")
    try:
        header = json.loads(bytes(buf[HEAD.size:HEAD.size + hlen]).decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"{path}: corrupt checkpoint header ({type(e).__name__})") from e
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt checkpoint header (a {type(header).__name__})")
    return header, buf, HEAD.size + hlen


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
        t = from_numpy(a, bk)
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
                m = self.build_models(rec, source=self.path)
                return m.to(self.map_location) if self.map_location is not None else m
            return rec
        raise CheckpointError(f"{self.path}: unknown node type {t!r} in checkpoint")


def load_legacy_checkpoint(path, map_location=None, tensors=True, build_models=None):
    """Read a 'YOLOv5CK' file.

    tensors=True rebuilds framework tensors (on ``map_location`` if given) through ``utils.backend.from_numpy``;
    False leaves numpy arrays (no framework needed). Stored models come back as :class:`ModelRecord`, or as what
    the ``build_models(record, source)`` callable makes of them (models.from_record.build_model: float32
    ``DetectionModel``s)."""
    header, buf, start = _read_own(path)
    try:
        return _Decoder(header, buf, start, str(path), tensors, map_location,
                        model_builder(build_models)).dec(header["tree"])
    except CheckpointError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, ArithmeticError, RecursionError) as e:
        raise CheckpointError(f"{path}: corrupt checkpoint structure ({type(e).__name__}: "
                              f"{' '.join(str(e).split())[:200]})") from e
