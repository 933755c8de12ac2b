"""Models as plain data (:class:`ModelRecord`): what the readers return for a stored model, a live model turned into
one, and a record's weights copied into a model. Building the model a record describes is the caller's job (the
package knows no model classes): readers and the writer take a ``build_model(record, source)`` callable, such as
models/from_record.py's."""
import collections

import numpy as np

from utils.errors import UserError


class CheckpointError(UserError, RuntimeError):
    """A checkpoint file that cannot be read: truncated, corrupt, foreign, or holding a forbidden class."""


# What to do about a file whose bytes are cut short or damaged (a broken download or copy, a disk fault): the reader
# cannot repair it, a fresh copy can.
DAMAGED_REMEDY = "re-download or re-export it"


class ModelRecord(dict):
    """A model as plain data: {'class', 'yaml', 'names', 'nc', 'stride', 'hyp', 'training', 'state_dict' (name ->
    np.ndarray), ...}. Every reader returns this type for stored models, so ``attempt_load`` treats all alike."""


_LEGACY_KEYS = ("anchor_grid",)  # buffers older YOLOv5 versions saved but the model recomputes
MODEL_ATTRS = ("nc", "names", "hyp", "class_weights")  # set on the model by official training; kept on rebuild


def _backend():
    from utils import backend  # framework choice: records are read without a framework too
    return backend


def from_numpy(a, bk=None):
    """utils.backend.from_numpy (which widens the integer dtypes a framework lacks, e.g. OneFlow's int16), keeping
    0-d arrays 0-d (np.ascontiguousarray under numpy 1.x makes them 1-d, which breaks loading BatchNorm's
    num_batches_tracked)."""
    bk = bk or _backend()
    a = np.asarray(a)
    t = bk.from_numpy(a)
    return t.reshape(a.shape) if tuple(t.shape) != a.shape else t


def tensor_to_numpy(t):
    t = t.detach()
    if str(t.dtype).endswith("bfloat16"):
        t = t.float()  # numpy has no bfloat16; widening to fp32 is exact
    return t.cpu().numpy()


def model_record(model):
    """A live model as a :class:`ModelRecord` of numpy arrays."""
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
        rec["stride"] = tensor_to_numpy(stride) if isinstance(stride, bk.torch.Tensor) else np.asarray(stride)
    rec["training"] = bool(getattr(m, "training", False))
    rec["state_dict"] = collections.OrderedDict((k, tensor_to_numpy(v)) for k, v in m.state_dict().items())
    return rec


def load_record_state_dict(model, state_dict, source="checkpoint"):
    """Copy a numpy state dict into model, casting to the model's dtypes (fp16 files -> fp32 model).
    Missing parameters or shape mismatches raise; legacy extra keys (e.g. ``model.24.anchor_grid``) are skipped."""
    bk = _backend()
    own = model.state_dict()
    if not isinstance(state_dict, dict) or not all(isinstance(k, str) for k in state_dict):
        raise CheckpointError(f"{source}: the stored state dict is not a mapping of parameter names to arrays; "
                              f"{DAMAGED_REMEDY}")
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
        if a.dtype.kind not in "biuf":  # text or objects where numbers belong
            raise CheckpointError(f"{source}: {k} holds {a.dtype} values, not numbers; {DAMAGED_REMEDY}")
        new[k] = from_numpy(a.astype(np_dtype, copy=False), bk).to(ref.device)
    model.load_state_dict(new)
    return model


def model_builder(build_models):
    """The model builder a reader was given: None/False (stored models stay records) or a callable."""
    if build_models is True:
        raise TypeError("build_models takes the model builder to use (e.g. models.from_record.build_model): the "
                        "checkpoint package does not import model classes")
    return build_models or None
