"""A live module tree (OneFlow or PyTorch) -> the object layout that torch.save of the official YOLOv5 model holds.

Each module becomes NEWOBJ(class) + BUILD(state) where the class is named as official code imports it
(``models.yolo.DetectionModel``, ``models.common.Conv``, ``torch.nn.modules.conv.Conv2d``) and the state is what
torch 2.x's ``nn.Module.__dict__`` holds: the module internals (training, _parameters, _buffers, hook dicts,
_modules) followed by the class's own attributes. The layout comes from the generic module API (named children,
parameters, buffers) plus a table per torch layer, never from ``vars()`` of a framework layer, so OneFlow writes
the same file PyTorch does. Project classes (``models.*``) contribute their public plain-data attributes
(Bottleneck.add, Concat.d, the i/f/type/np of each layer, Detect's nc/no/nl/na/stride, the model's yaml, names...).
"""
import logging

import numpy as np

from utils.checkpoint.pickle_writer import Call, Global, NewObject, ordered_dict

LOGGER = logging.getLogger("yolov5")

# torch 2.x nn.Module.__dict__ before the class's own attributes, in this order (hook dicts are empty OrderedDicts)
_HOOK_DICTS = ("_backward_pre_hooks", "_backward_hooks", "_is_full_backward_hook", "_forward_hooks",
               "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks",
               "_forward_pre_hooks_with_kwargs", "_state_dict_hooks", "_state_dict_pre_hooks",
               "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")

# Where official code keeps each project class (everything else is in models.common)
_OFFICIAL_HOME = {**{n: "models.yolo" for n in ("DetectionModel", "Model", "BaseModel", "Detect", "Segment",
                                                 "SegmentationModel", "ClassificationModel")},
                  **{n: "models.experimental" for n in ("CrossConv", "Sum", "MixConv2d", "Ensemble")}}
_OFFICIAL_NAME = {"Model": "DetectionModel"}  # our alias; official files since v7.0 name the class


def _pair(v):
    return tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v), int(v))


def _int_or_pair(v):
    """Pooling layers keep what they were given: torch stores MaxPool2d(5) as 5, OneFlow as (5, 5)."""
    if isinstance(v, (tuple, list)):
        v = tuple(int(x) for x in v)
        return v[0] if len(set(v)) == 1 else v
    return int(v)


def _float_or_none(v):
    if v is None:
        return None
    return tuple(float(x) for x in v) if isinstance(v, (tuple, list)) else float(v)


def _same(v):
    return v


def _a(name, convert=_same, default=None):
    """One attribute of a torch layer: (name, module -> value as torch keeps it)."""
    return name, lambda m: convert(getattr(m, name, default))


def _const(name, value):
    return name, lambda m: value


def _conv_padding(m):
    p = getattr(m, "padding", 0)
    return p if isinstance(p, str) else _pair(p)


def _reversed_padding(m):
    """What torch's _ConvNd keeps for F.pad: per spatial dim (last first) the padding on both sides."""
    p = _conv_padding(m)
    if p == "valid":
        return [0, 0, 0, 0]
    if p == "same":
        out = [0, 0, 0, 0]
        for d, k, i in zip(_pair(getattr(m, "dilation", 1)), _pair(m.kernel_size), (2, 0)):
            total = d * (k - 1)
            out[i], out[i + 1] = total // 2, total - total // 2
        return out
    return (p[1], p[1], p[0], p[0])


def _conv_attrs(transposed):
    return (_a("in_channels", int), _a("out_channels", int), _a("kernel_size", _pair), _a("stride", _pair, 1),
            ("padding", _conv_padding), _a("dilation", _pair, 1), _const("transposed", transposed),
            _a("output_padding", _pair, 0), _a("groups", int, 1), _a("padding_mode", str, "zeros"),
            ("_reversed_padding_repeated_twice", _reversed_padding))


_INPLACE = (_a("inplace", bool, False),)
_ACT, _CONTAINER = "torch.nn.modules.activation", "torch.nn.modules.container"
_WB = ("weight", "bias")
# torch layer name -> (torch module path, parameter names, buffer names, attribute table); attributes in the order
# torch 2.x sets them in __init__. Parameters/buffers a framework leaves out (OneFlow's bias-free Conv2d has no
# 'bias' entry) are written as None, as torch registers them.
TORCH_LAYERS = {
    "Conv2d": ("torch.nn.modules.conv", _WB, (), _conv_attrs(False)),
    "ConvTranspose2d": ("torch.nn.modules.conv", _WB, (), _conv_attrs(True)),
    "BatchNorm2d": ("torch.nn.modules.batchnorm", _WB, ("running_mean", "running_var", "num_batches_tracked"),
                    (_a("num_features", int), _a("eps", float), _a("momentum", _float_or_none), _a("affine", bool),
                     _a("track_running_stats", bool))),
    "SiLU": (_ACT, (), (), _INPLACE),
    "ReLU": (_ACT, (), (), _INPLACE),
    "Hardswish": (_ACT, (), (), _INPLACE),
    "ReLU6": (_ACT, (), (), (_a("min_val", float, 0.0), _a("max_val", float, 6.0), *_INPLACE)),
    "LeakyReLU": (_ACT, (), (), (_a("negative_slope", float, 0.01), *_INPLACE)),
    "Sigmoid": (_ACT, (), (), ()),
    "Tanh": (_ACT, (), (), ()),
    "GELU": (_ACT, (), (), (_a("approximate", str, "none"),)),
    "Softmax": (_ACT, (), (), (_a("dim"),)),
    "Identity": ("torch.nn.modules.linear", (), (), ()),
    "Linear": ("torch.nn.modules.linear", _WB, (), (_a("in_features", int), _a("out_features", int))),
    "Upsample": ("torch.nn.modules.upsampling", (), (), (
        _const("name", "Upsample"), _a("size"), _a("scale_factor", _float_or_none), _a("mode", str, "nearest"),
        _a("align_corners"), _a("recompute_scale_factor"))),
    "MaxPool2d": ("torch.nn.modules.pooling", (), (), (
        _a("kernel_size", _int_or_pair),
        ("stride", lambda m: _int_or_pair(getattr(m, "stride", None) or m.kernel_size)),  # None means kernel_size
        _a("padding", _int_or_pair, 0), _a("dilation", _int_or_pair, 1), _a("return_indices", bool, False),
        _a("ceil_mode", bool, False))),
    "AdaptiveAvgPool2d": ("torch.nn.modules.pooling", (), (), (_a("output_size", _same, 1),)),
    "Dropout": ("torch.nn.modules.dropout", (), (), (_a("p", float, 0.5), _a("inplace", bool, False))),
    "Flatten": ("torch.nn.modules.flatten", (), (), (_a("start_dim", int, 1), _a("end_dim", int, -1))),
    "LayerNorm": ("torch.nn.modules.normalization", _WB, (), (
        _a("normalized_shape", lambda v: tuple(int(x) for x in v)), _a("eps", float),
        _a("elementwise_affine", bool))),
    "Sequential": (_CONTAINER, (), (), ()),
    "ModuleList": (_CONTAINER, (), (), ()),
}


def _is_framework_class(cls):
    return cls.__module__.split(".")[0] in ("torch", "oneflow")


def _torch_layer(cls):
    """The torch layer a framework class (or our subclass of one, e.g. the precise BatchNorm2d) stands for."""
    for c in cls.__mro__:
        if _is_framework_class(c) and c.__name__ in TORCH_LAYERS:
            return c.__name__
    return None


def official_class(cls):
    """(module, name) under which official code imports the class of a module."""
    layer = _torch_layer(cls)
    if layer is not None:
        return TORCH_LAYERS[layer][0], layer
    if _is_framework_class(cls):  # a framework layer without a table: the same place in torch's tree
        return "torch." + cls.__module__.split(".", 1)[1], cls.__name__
    name = cls.__name__
    return _OFFICIAL_HOME.get(name, "models.common"), _OFFICIAL_NAME.get(name, name)


def official_type_string(module):
    """The 'type' attribute official parse_model gives a layer: the class path ('models.common.C3'); a layer of
    n>1 repeats is an nn.Sequential named after what it repeats."""
    children = list(module.children())
    cls = type(children[0]) if type(module).__name__ == "Sequential" and children else type(module)
    mod, name = official_class(cls)
    return f"{mod}.{name}"


_HEADS = ("Detect", "Segment")  # heads whose stride official .half() converts and whose grids are caches
_LAYER_BOOKKEEPING = ("i", "f", "type", "np")  # what official parse_model adds to each layer


def encode_module(m, enc, cast_half=False):
    """The NEWOBJ node of module m; its children come from ``enc.module`` (memoised, so a module shared by several
    parents, like Conv's default activation, stays one object). ``enc`` encodes everything else:
    ``enc.tensor(t, half, param)`` for framework tensors, ``enc.array_tensor(a)`` for a numpy array written as a
    tensor, ``enc.value(x)``, ``enc.is_tensor(x)``. ``cast_half``: float parameters and buffers, and the Detect
    tensors official ``.half()`` converts, are written as fp16 (how official checkpoints store model and ema)."""
    cls = type(m)
    mod, name = official_class(cls)
    layer = _torch_layer(cls)
    if layer is not None:
        _, pnames, bnames, attrs = TORCH_LAYERS[layer]
    else:
        pnames = [n for n, _ in m.named_parameters(recurse=False)]
        bnames = [n for n, _ in m.named_buffers(recurse=False)]
        attrs = None
    buffers = {n: getattr(m, n, None) for n in bnames}
    state = {"training": bool(m.training),
             "_parameters": {n: _tensor_or_none(enc, getattr(m, n, None), cast_half, True) for n in pnames},
             "_buffers": {n: _tensor_or_none(enc, b, cast_half) for n, b in buffers.items()}}
    if layer == "BatchNorm2d" and buffers.get("running_mean") is not None and \
            buffers.get("num_batches_tracked") is None:  # OneFlow keeps no counter
        state["_buffers"]["num_batches_tracked"] = enc.array_tensor(np.zeros((), np.int64))
    non_persistent = [n for n in (getattr(m, "_non_persistent_buffers_set", None) or ()) if n in buffers]
    state["_non_persistent_buffers_set"] = Call(Global("__builtin__", "set"), (non_persistent,))
    for h in _HOOK_DICTS:
        state[h] = None if h == "_is_full_backward_hook" else ordered_dict([])
    state["_modules"] = {n: None if c is None else enc.module(c, cast_half) for n, c in m.named_children()}
    if attrs is not None:
        state.update((n, fn(m)) for n, fn in attrs)
        state.update((n, _bookkeeping(m, n, enc)) for n in _LAYER_BOOKKEEPING if n in vars(m))
    else:
        if _is_framework_class(cls):
            _warn_once(cls)
        state.update(_own_attrs(m, enc, cast_half, name))
    return NewObject(Global(mod, name), state)


def _tensor_or_none(enc, t, half, param=False):
    return None if t is None else enc.tensor(t, half, param)


def _bookkeeping(m, n, enc):
    return official_type_string(m) if n == "type" else enc.value(vars(m)[n])


def _own_attrs(m, enc, cast_half, class_name):
    """Public plain-data attributes of a project class (in the order they were set), with the official forms of
    the layer bookkeeping and of Detect's cached tensors."""
    out = {}
    registered = {n for n, _ in m.named_parameters(recurse=False)} | {n for n, _ in m.named_buffers(recurse=False)} \
        | {n for n, _ in m.named_children()}
    for k, v in vars(m).items():
        if k.startswith("_") or k == "training" or k in registered:
            continue
        if k in _LAYER_BOOKKEEPING:
            out[k] = _bookkeeping(m, k, enc)
        elif enc.is_tensor(v):
            out[k] = enc.tensor(v, cast_half and class_name in _HEADS and k == "stride")  # as official _apply
        elif class_name in _HEADS and k in ("grid", "anchor_grid") and isinstance(v, (list, tuple)):
            # cached decode grids: written empty, as a fresh Detect holds them; forward rebuilds them
            dtype = np.float16 if cast_half else enc.numpy_dtype(getattr(m, "anchors", None))
            out[k] = [enc.array_tensor(np.empty(0, dtype)) for _ in v]
        elif callable(v) and not isinstance(v, type) and not enc.is_module(v):
            raise TypeError(f"{type(m).__name__}.{k} holds a function (a fused model?): it cannot be written to a "
                            "checkpoint; save the model before fuse()")
        else:
            out[k] = enc.value(v)
    if class_name == "Segment":  # official Segment.forward calls self.detect, which it sets to Detect.forward
        out["detect"] = Call(Global("__builtin__", "getattr"), (Global("models.yolo", "Detect"), "forward"))
    return out


_warned = set()


def _warn_once(cls):
    if cls not in _warned:
        _warned.add(cls)
        LOGGER.warning(f"WARNING ⚠️ checkpoint: no attribute table for {cls.__module__}.{cls.__name__}; its public "
                       "attributes are written as they are")
