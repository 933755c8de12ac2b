"""The segmentation and classification networks beside detection: the Proto and Classify blocks, the Segment head,
SegmentationModel and ClassificationModel.

Official checkpoints name these classes models.common.Proto / models.common.Classify and models.yolo.Segment /
SegmentationModel / ClassificationModel; the checkpoint writer writes them under those names whatever module they
live in here. Importing this module registers Segment, Proto and Classify in models.yolo's name-to-class table, so
that the segmentation YAMLs (models/segment/*.yaml) parse.

    model = SegmentationModel("yolov5n-seg.yaml")               # 225 modules, 1,991,549 parameters, 7.2 GFLOPs
    clf = ClassificationModel(model=DetectionModel("yolov5n.yaml"), nc=10, cutoff=10)   # backbone + Classify
"""
import copy

import models.common as common
from models.common import Conv, autopad
from models.yolo import MODULES, DetectionModel, Detect, initialize_weights
from utils.backend import nn, torch
from utils.log import LOGGER
from utils.model_stats import model_summary


class Proto(nn.Module):
    """The prototype branch: 3x3 conv, 2x nearest upsample, 3x3 conv, 1x1 conv to c2 masks (1/4 of the input for a
    P3 input)."""

    def __init__(self, c1, c_=256, c2=32):
        super().__init__()
        self.cv1 = Conv(c1, c_, k=3)
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
        self.cv2 = Conv(c_, c_, k=3)
        self.cv3 = Conv(c_, c2)

    def forward(self, x):
        return self.cv3(self.cv2(self.upsample(self.cv1(x))))


class Classify(nn.Module):
    """Classification head: conv to 1280 channels (EfficientNet-B0's width), global average pool, dropout, linear."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, dropout_p=0.0):
        super().__init__()
        c_ = 1280
        self.conv = Conv(c1, c_, k, s, autopad(k, p), g)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(p=dropout_p, inplace=True)
        self.linear = nn.Linear(c_, c2)

    def forward(self, x):
        if isinstance(x, list):
            x = torch.cat(x, 1)
        return self.linear(self.drop(self.pool(self.conv(x)).flatten(1)))


class Segment(Detect):
    """Detect with nm mask coefficients per anchor and a Proto branch on the first (P3) input.

    Outputs: training (raw maps, protos); eval (decoded (b, n, 5 + nc + nm), protos, raw maps); export (decoded,
    protos). Box and objectness/class columns are decoded as Detect's, the mask coefficients stay raw."""

    def __init__(self, nc=80, anchors=(), nm=32, npr=256, ch=(), inplace=True):
        super().__init__(nc, anchors, ch, inplace)
        self.nm = nm  # masks (coefficients per anchor)
        self.npr = npr  # prototype channels
        self.no = 5 + nc + nm
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * self.na, 1) for x in ch)
        self.proto = Proto(ch[0], self.npr, self.nm)

    @staticmethod
    def scale_yaml_args(args, width_multiple, make_divisible, ch_mul):
        """parse_model: the prototype channel count (args[3]) follows the width multiple, as official."""
        args[3] = make_divisible(args[3] * width_multiple, ch_mul)
        return args

    def forward(self, x):
        p = self.proto(x[0])
        out = super().forward(x)
        if self.training:
            return out, p
        return (out[0], p) if self.export else (out[0], p, out[1])

    def _decode(self, xi, i):
        xy, wh, conf, mask = xi.split((2, 2, self.nc + 1, self.nm), 4)
        xy = (xy.sigmoid() * 2 + self.grid[i]) * self.stride[i]
        wh = (wh.sigmoid() * 2) ** 2 * self.anchor_grid[i]
        return torch.cat((xy, wh, conf.sigmoid(), mask), 4)


class SegmentationModel(DetectionModel):
    """A DetectionModel whose YAML ends in a Segment head (models/segment/yolov5*-seg.yaml)."""

    def __init__(self, cfg="yolov5s-seg.yaml", ch=3, nc=None, anchors=None):
        super().__init__(cfg, ch, nc, anchors)

    def _stride_maps(self, outs):
        return outs[0]  # training mode: (maps, protos); the strides come from the maps


class ClassificationModel(nn.Module):
    """A classifier: the first `cutoff` layers of a detection network with a Classify head in place of the last.

    model: a DetectionModel (or a DetectMultiBackend around one) whose layers are reused, weights and all;
    cfg: a model YAML (or dict) to build that network from instead. Official ultralytics takes only model=."""

    def __init__(self, cfg=None, model=None, nc=1000, cutoff=10):
        super().__init__()
        if model is None:
            if cfg is None:
                raise ValueError("ClassificationModel needs a detection model (model=) or a model YAML (cfg=)")
            model = DetectionModel(cfg)
        self._from_detection_model(model, nc, cutoff)

    def _from_detection_model(self, model, nc=1000, cutoff=10):
        model = getattr(model, "model", model) if not isinstance(model, DetectionModel) else model  # unwrap
        layers = list(model.model.children())[:cutoff]
        last = layers[-1]
        ch = last.conv.in_channels if hasattr(last, "conv") else last.cv1.conv.in_channels  # channels into it
        head = Classify(ch, nc)
        head.i, head.f, head.type = last.i, last.f, "models.common.Classify"
        layers[-1] = head
        self.model = nn.Sequential(*layers)
        stride = getattr(model, "stride", None)
        self.stride = stride if stride is not None else torch.tensor([32.0])
        self.save = []
        self.nc = nc
        initialize_weights(head)

    def forward(self, x, augment=False, profile=False, visualize=False):
        return DetectionModel._forward_once(self, x, visualize)

    def fuse(self):
        return DetectionModel.fuse(self)

    def info(self, verbose=False, img_size=640):
        LOGGER.info(model_summary(self, img_size=img_size, verbose=verbose))


MODULES.update({"Segment": Segment, "Proto": Proto, "Classify": Classify})


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
