"""A float32 DetectionModel rebuilt from a :class:`~utils.checkpoint.ModelRecord` (what every checkpoint reader
returns for a stored model, whatever wrote the file): yaml -> model, then the weights, names, hyp and class weights.
The checkpoint package reads and writes records only; its readers and writer take this function as their model
builder (``load_checkpoint(path, build_models=build_model)``)."""
import copy

import numpy as np

from models.yolo import DetectionModel
from utils.checkpoint.records import MODEL_ATTRS, CheckpointError, from_numpy, load_record_state_dict, tensor_to_numpy


def build_model(record, source="checkpoint"):
    """A float32 DetectionModel from a record (any format): yaml -> model, weights, names, hyp, class weights, and
    the train/eval mode it was saved in."""
    cfg = record.get("yaml")
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{source}: the stored model has no yaml dict, cannot rebuild it")
    cfg = copy.deepcopy(cfg)
    nc = record.get("nc") or cfg.get("nc")
    model = DetectionModel(cfg, ch=cfg.get("ch", 3), nc=nc)
    load_record_state_dict(model, record["state_dict"], source)
    for k in MODEL_ATTRS:
        v = record.get(k)
        if v is None:
            continue
        if k == "names" and isinstance(v, (list, tuple)):
            v = dict(enumerate(v))
        if k == "class_weights":
            v = from_numpy(np.asarray(v, dtype=np.float32))
        setattr(model, k, v)
    stored_stride = record.get("stride")
    if stored_stride is not None:
        ours = np.asarray(tensor_to_numpy(model.stride), dtype=np.float32)
        if ours.shape != np.asarray(stored_stride).shape or not np.allclose(ours, stored_stride):
            raise CheckpointError(f"{source}: stored stride {np.asarray(stored_stride).tolist()} differs from the "
                                  f"rebuilt model's {ours.tolist()}")
    model = model.float()
    if "training" in record:
        model.train(bool(record["training"]))
    return model
