"""What the restricted unpickler returns -> what callers get: stubbed modules become :class:`ModelRecord` (or a
rebuilt DetectionModel), tensors become framework tensors (or numpy arrays when no framework is wanted), other
stubbed objects become dicts of their plain attributes."""
import collections

import numpy as np

from utils.checkpoint.records import ModelRecord, from_numpy, model_builder
from utils.checkpoint.pickle_values import StubObject, TensorData


def _is_stub_module(x):
    return isinstance(x, StubObject) and "_modules" in vars(x)


def _array(x):
    return x.array if isinstance(x, TensorData) else x


def stub_state_dict(module, prefix="", out=None):
    """The state dict of a stubbed nn.Module tree: parameters and persistent buffers, ordered like torch's."""
    out = collections.OrderedDict() if out is None else out
    d = vars(module)
    non_persistent = d.get("_non_persistent_buffers_set") or set()
    for name, p in (d.get("_parameters") or {}).items():
        if p is not None:
            out[prefix + name] = _array(p)
    for name, b in (d.get("_buffers") or {}).items():
        if b is not None and name not in non_persistent:
            out[prefix + name] = _array(b)
    for name, child in (d.get("_modules") or {}).items():
        if child is not None:
            stub_state_dict(child, f"{prefix}{name}.", out)
    return out


def plain(x):
    """Plain data: TensorData -> numpy, stubs -> dicts of their attributes (with '__class__')."""
    if isinstance(x, TensorData):
        return x.array
    if isinstance(x, StubObject):
        return {"__class__": x._class_path, **{k: plain(v) for k, v in vars(x).items() if k != "_stub_args"}}
    if isinstance(x, collections.OrderedDict):
        return collections.OrderedDict((k, plain(v)) for k, v in x.items())
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(plain(v) for v in x) if not hasattr(x, "_fields") else x
    return x


def stub_model_record(model):
    """A stubbed model -> ModelRecord (yaml, names, nc, stride, hyp, class weights, mode, numpy state dict)."""
    d = vars(model)
    detect = None
    seq = (d.get("_modules") or {}).get("model")
    if seq is not None:
        kids = list((vars(seq).get("_modules") or {}).values())
        detect = kids[-1] if kids else None
    rec = ModelRecord()
    rec["class"] = model._class_path
    rec["yaml"] = plain(d.get("yaml"))
    rec["yaml_file"] = d.get("yaml_file")
    rec["names"] = plain(d.get("names"))
    nc = d.get("nc")
    if nc is None and isinstance(rec["yaml"], dict):
        nc = rec["yaml"].get("nc")
    rec["nc"] = nc
    stride = d.get("stride")
    if stride is None and detect is not None:
        stride = vars(detect).get("stride")
    rec["stride"] = None if stride is None else np.asarray(_array(stride), dtype=np.float32)
    rec["hyp"] = plain(d.get("hyp"))
    if d.get("class_weights") is not None:
        rec["class_weights"] = np.asarray(_array(d["class_weights"]))
    if "training" in d:
        rec["training"] = bool(d["training"])
    if detect is not None and isinstance(detect, StubObject):
        dd = vars(detect)
        rec["detect"] = {k: plain(dd[k]) for k in ("nc", "no", "nl", "na", "inplace") if k in dd}
    rec["state_dict"] = stub_state_dict(model)
    if not isinstance(rec["yaml"], dict):  # an official classifier keeps no yaml: its layers say how to rebuild it
        rec["module_tree"] = module_tree(model)
    return rec


def module_tree(module):
    """A stubbed module tree as plain data: {'class': pickled class path, 'attrs': its plain attributes,
    'params': names of its parameters that are set, 'children': {name: subtree or None}} (no tensors)."""
    d = vars(module)
    attrs = {k: plain(v) for k, v in d.items() if not k.startswith("_") and k != "training"
             and not isinstance(v, (StubObject, TensorData))}
    params = [k for k, v in (d.get("_parameters") or {}).items() if v is not None]
    children = {k: None if c is None else module_tree(c) for k, c in (d.get("_modules") or {}).items()}
    return {"class": module._class_path, "attrs": attrs, "params": params, "children": children}


EXACT_COPIES = {"model": "model_float32", "ema": "ema_float32"}  # this project's fp32 copies of the fp16 models


def use_exact_copies(obj):
    """Files of this project keep fp32 copies of the fp16 ``model`` and ``ema`` (official code ignores them): put
    those values into the stored models, so that reading gives back exactly the weights that were saved."""
    if not isinstance(obj, dict):
        return obj
    for key, copy_key in EXACT_COPIES.items():
        model, exact = obj.get(key), obj.get(copy_key)
        if _is_stub_module(model) and isinstance(exact, dict):
            for name, holder, slot in _stub_tensors(model):
                t = exact.get(name)
                if isinstance(t, TensorData) and isinstance(holder[slot], TensorData) and \
                        t.array.shape == holder[slot].array.shape:
                    old = holder[slot]
                    holder[slot] = TensorData(t.array, old.requires_grad, old.param)
    return obj


def _stub_tensors(module, prefix=""):
    """(state-dict name, dict, key) of every parameter and buffer of a stubbed module tree."""
    d = vars(module)
    for slot in ("_parameters", "_buffers"):
        holder = d.get(slot) or {}
        for name in holder:
            yield prefix + name, holder, name
    for name, child in (d.get("_modules") or {}).items():
        if child is not None:
            yield from _stub_tensors(child, f"{prefix}{name}.")


class Materializer:
    """Converts a read tree once, keeping shared objects shared (one tensor referenced twice stays one tensor)."""

    def __init__(self, tensors=False, build_models=None, map_location=None, source="checkpoint"):
        self.tensors, self.build_models = tensors, model_builder(build_models)
        self.map_location, self.source = map_location, source
        self.memo = {}
        self.bk = None
        if tensors or self.build_models:
            from utils import backend  # framework choice: plain-data reads need none
            self.bk = backend

    def __call__(self, x):
        key = id(x)
        if key in self.memo:
            return self.memo[key][1]
        out = self._convert(x)
        self.memo[key] = (x, out)  # keep x alive: its id stays unique while converting
        return out

    def _tensor(self, t):
        if not self.tensors:
            return t.array
        bk = self.bk
        x = from_numpy(t.array, bk)
        if self.map_location is not None:
            x = x.to(self.map_location)
        if t.param:
            return bk.nn.Parameter(x, requires_grad=t.requires_grad)
        return x.requires_grad_(True) if t.requires_grad else x

    def _convert(self, x):
        if isinstance(x, TensorData):
            return self._tensor(x)
        if _is_stub_module(x):
            rec = stub_model_record(x)
            if self.build_models and (isinstance(rec.get("yaml"), dict) or "module_tree" in rec):  # a YOLOv5 model
                m = self.build_models(rec, source=self.source)
                return m.to(self.map_location) if self.map_location is not None else m
            return rec
        if isinstance(x, StubObject):
            path = x._class_path
            if path.startswith("torch.") and not vars(x):  # a torch dtype global ('torch float16')
                name = path.split(".")[-1]
                return getattr(self.bk.torch, name) if self.tensors else name
            return plain(x)
        if isinstance(x, collections.OrderedDict):
            return collections.OrderedDict((self(k), self(v)) for k, v in x.items())
        if isinstance(x, dict):
            return {self(k): self(v) for k, v in x.items()}
        if isinstance(x, list):
            return [self(v) for v in x]
        if isinstance(x, tuple):
            return type(x)(self(v) for v in x) if not hasattr(x, "_fields") else x
        if isinstance(x, (set, frozenset)):
            return type(x)(self(v) for v in x)
        return x
