"""Checkpoints in the format of the YOLOv5 ecosystem, written and read the same way under OneFlow and PyTorch.

Written (``save_checkpoint``): what ``torch.save`` of an official ultralytics checkpoint produces, a PyTorch zip
archive whose protocol-2 pickle names the official classes (``models.yolo.DetectionModel``,
``models.common.Conv``, ``torch.nn.modules.conv.Conv2d``...) with the attribute layout official code expects,
built from the live module tree without importing torch (zip_writer, pickle_writer, encoder, module_layout).

Read (``load_checkpoint``, ``load_any``, ``read_official_pt``): PyTorch zip and legacy archives through a
restricted unpickler that stubs model classes, rebuilds tensors from raw storages and refuses any other global
(torch_reader, unpickler, pickle_values, materialize), plus the project's earlier 'YOLOv5CK' files
(legacy_yolov5ck). Stored models come back as :class:`ModelRecord` (records), or as the models a caller's
``build_models`` callable makes of them: the package knows no model classes (models/from_record.py builds a
DetectionModel from a record). Optimizer states translate between PyTorch's layout, which files hold, and OneFlow's
(optimizer_state, utils/optimizer_layout.py).
"""
from utils.checkpoint.encoder import Half
from utils.checkpoint.files import (is_official_pt, is_own_checkpoint, load_any, load_checkpoint, read_official_pt,
                                    save_checkpoint)
from utils.checkpoint.optimizer_state import complete_torch_groups, optimizer_state_for_backend
from utils.checkpoint.records import CheckpointError, ModelRecord, load_record_state_dict, model_record

__all__ = ["CheckpointError", "ModelRecord", "Half", "save_checkpoint", "load_checkpoint", "read_official_pt",
           "load_any", "is_own_checkpoint", "is_official_pt", "model_record",
           "load_record_state_dict", "optimizer_state_for_backend", "complete_torch_groups"]
