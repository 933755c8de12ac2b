"""Segmentation and classification models rebuilt from checkpoint records, and the official names of their classes.

The classes themselves live where official ultralytics/yolov5 defines them (`from models.yolo import
SegmentationModel, ClassificationModel, Segment`; `from models.common import Proto, Classify`); this module
re-exports them for the project's own imports and rebuilds them from a checkpoint's ModelRecord
(`model_from_record`): a segmentation model from its stored yaml, an official classifier (which keeps no yaml)
from its stored module tree.

    model = SegmentationModel("yolov5n-seg.yaml")               # 225 modules, 1,991,549 parameters, 7.2 GFLOPs
    clf = ClassificationModel(model=DetectionModel("yolov5n.yaml"), nc=10, cutoff=10)   # backbone + Classify
"""
import copy

import models.common as common
from models.common import Classify, Proto
from models.yolo import MODULES, ClassificationModel, DetectionModel, Segment, SegmentationModel
from utils.backend import nn, torch

__all__ = ["Proto", "Classify", "Segment", "SegmentationModel", "ClassificationModel", "DetectionModel",
           "module_from_tree", "model_from_record", "model_task"]


def model_task(model):
    """'segment', 'classify' or 'detect': what a built model does (an Ensemble: its first member)."""
    if isinstance(model, nn.ModuleList) and len(model):
        model = model[0]
    if isinstance(model, SegmentationModel):
        return "segment"
    return "classify" if isinstance(model, ClassificationModel) else "detect"


# ---- rebuilding from a checkpoint record -------------------------------------------------------------------------
def _torch_layer(name, a, params):
    """A framework layer from the attributes its pickled torch counterpart kept."""
    bias = "bias" in params
    builders = {
        "Conv2d": lambda: nn.Conv2d(a["in_channels"], a["out_channels"], tuple(a["kernel_size"]), tuple(a["stride"]),
                                    tuple(a["padding"]) if not isinstance(a["padding"], str) else a["padding"],
                                    tuple(a.get("dilation", (1, 1))), a.get("groups", 1), bias=bias),
        "BatchNorm2d": lambda: _batchnorm(a),
        "SiLU": lambda: nn.SiLU(), "ReLU": lambda: nn.ReLU(), "Identity": lambda: nn.Identity(),
        "Hardswish": lambda: nn.Hardswish(), "Sigmoid": lambda: nn.Sigmoid(),
        "LeakyReLU": lambda: nn.LeakyReLU(a.get("negative_slope", 0.01)),
        "MaxPool2d": lambda: nn.MaxPool2d(a["kernel_size"], a.get("stride"), a.get("padding", 0)),
        "Upsample": lambda: nn.Upsample(size=a.get("size"), scale_factor=a.get("scale_factor"),
                                        mode=a.get("mode", "nearest")),
        "AdaptiveAvgPool2d": lambda: nn.AdaptiveAvgPool2d(a.get("output_size", 1)),
        "Dropout": lambda: nn.Dropout(p=float(a.get("p", 0.5)), inplace=bool(a.get("inplace", False))),
        "Linear": lambda: nn.Linear(a["in_features"], a["out_features"], bias=bias),
        "Sequential": lambda: nn.Sequential(), "ModuleList": lambda: nn.ModuleList(),
    }
    if name not in builders:
        raise ValueError(f"cannot rebuild a torch.nn {name} layer from a checkpoint")
    return builders[name]()


def _batchnorm(a):
    from utils.backend import BatchNorm2d
    bn = BatchNorm2d(a["num_features"], eps=a.get("eps", 1e-5), momentum=a.get("momentum", 0.1))
    return bn


def _project_classes():
    """The project's blocks a pickled module tree may name: the YAML table's and models.common's (what official
    classifiers hold). models.experimental has only Ensemble, which no classifier holds (and it imports this module)."""
    classes = {k: v for k, v in MODULES.items() if isinstance(v, type) and not k.startswith("nn.")}
    classes.update({k: v for k, v in vars(common).items() if isinstance(v, type) and issubclass(v, nn.Module)})
    classes.update({"Proto": Proto, "Classify": Classify, "Segment": Segment})
    return classes


def module_from_tree(tree, classes=None):
    """A module from a checkpoint's module tree (plain data: {'class', 'attrs', 'params', 'children'}): framework
    layers are made from their stored arguments, project blocks get their stored plain attributes and children
    (their forward is this project's code). Weights are loaded afterwards from the state dict."""
    classes = classes or _project_classes()
    path, attrs = tree["class"], tree.get("attrs", {})
    module, name = path.rsplit(".", 1)
    if module.startswith("torch.nn"):
        m = _torch_layer(name, attrs, tree.get("params", ()))
        project = False
    else:
        if name not in classes:
            raise ValueError(f"cannot rebuild {path} from a checkpoint: no such block in this project")
        cls = classes[name]
        m = cls.__new__(cls)
        nn.Module.__init__(m)
        project = True
    for child_name, child in tree.get("children", {}).items():
        if child is not None:
            m.add_module(child_name, module_from_tree(child, classes))
    for k, v in attrs.items():
        if project or k in ("i", "f", "type", "np"):
            if k not in dict(m.named_children()):
                setattr(m, k, copy.deepcopy(v))
    return m


def model_from_record(record):
    """A float32 SegmentationModel or ClassificationModel (not yet weighted) from a checkpoint ModelRecord."""
    cls_name = str(record.get("class", "")).rsplit(".", 1)[-1]
    cfg = record.get("yaml")
    if cls_name == "SegmentationModel" or (isinstance(cfg, dict) and cls_name != "ClassificationModel"):
        cfg = copy.deepcopy(cfg)
        return SegmentationModel(cfg, ch=cfg.get("ch", 3), nc=record.get("nc") or cfg.get("nc"))
    tree = record.get("module_tree")
    if tree is None:
        raise ValueError("the stored classification model has neither a yaml nor its module tree")
    model = ClassificationModel.__new__(ClassificationModel)
    nn.Module.__init__(model)
    model.model = module_from_tree(tree["children"]["model"])
    stride = record.get("stride")
    model.stride = torch.tensor([32.0]) if stride is None else torch.tensor([float(s) for s in stride])
    model.save = list(tree.get("attrs", {}).get("save", []) or [])
    model.nc = record.get("nc")
    return model
