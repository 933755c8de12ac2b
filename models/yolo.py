"""YOLOv5 models built from a declarative YAML: the Detect and Segment heads, DetectionModel, SegmentationModel, and
ClassificationModel (a detection backbone cut at a layer, with models.common's Classify head), where official
ultralytics/yolov5 defines them. models/tasks.py rebuilds the last two from checkpoint records.

Usage: python models/yolo.py --cfg yolov5s.yaml   # prints the layer table, the summary and the fused summary
"""
import argparse
import math
import sys
import time
from copy import deepcopy
from pathlib import Path

if __name__ == "__main__" or str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # so `python models/yolo.py` finds utils/

from models.common import (C3, C3SPP, C3TR, SPP, SPPF, Bottleneck, BottleneckCSP, C3Ghost, C3x, Classify, Concat,
                           Contract, Conv, CrossConv, DWConv, DWConvTranspose2d, Expand, Focus, GhostBottleneck,
                           GhostConv, Proto)
from models.model_config import ModelConfigError, check_args, check_channels, check_detect_args, check_model_dict
from utils.backend import head_layout, nn, torch
from utils.device_header import select_and_log_device
from utils.img_size import make_divisible
from utils.log import LOGGER
from utils.model_stats import fuse_conv_and_bn, model_summary
from utils.paths import find_repo_file
from utils.run_header import print_args
from utils.plots import feature_visualization
from utils.torch_utils import initialize_weights
from utils.tta import forward_augment  # test-time augmentation lives with validation code
from utils.yaml_files import read_yaml

MODELS_DIR = Path(__file__).resolve().parent


class Detect(nn.Module):
    """Per-level 1x1 convs to na*(nc+5) channels; in eval mode also decodes boxes to pixels."""
    stride = None  # set by DetectionModel after a dry run
    dynamic = False  # export.py --dynamic: grids rebuilt from each input's shape (a traced graph keeps them symbolic)
    export = False  # export.py: return only the decoded predictions, (pred,), not the raw maps as well

    def __init__(self, nc=80, anchors=(), ch=(), inplace=True):
        super().__init__()
        self.nc = nc
        self.no = nc + 5  # outputs per anchor: xywh, objectness, classes
        self.nl = len(anchors)
        self.na = len(anchors[0]) // 2
        self.grid = [torch.empty(0) for _ in range(self.nl)]
        self.anchor_grid = [torch.empty(0) for _ in range(self.nl)]
        # Anchors in pixels until DetectionModel divides them by the stride (grid units, as the official state dict).
        self.register_buffer("anchors", torch.tensor(anchors, dtype=torch.float32).view(self.nl, -1, 2))
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * self.na, 1) for x in ch)
        self.inplace = inplace

    def forward(self, x):
        z = []
        for i in range(self.nl):
            x[i] = self.m[i](x[i])
            bs, _, ny, nx = x[i].shape
            x[i] = head_layout(x[i], self.na, self.no)  # view(bs, na, no, ny, nx).permute(0, 1, 3, 4, 2)
            if not self.training:
                if self.dynamic or self.grid[i].shape[2:4] != x[i].shape[2:4] or self.grid[i].device != x[i].device:
                    self.grid[i], self.anchor_grid[i] = self._make_grid(nx, ny, i, x[i].dtype, x[i].device)
                z.append(self._decode(x[i], i).view(bs, self.na * nx * ny, self.no))
        if self.training:
            return x
        return (torch.cat(z, 1),) if self.export else (torch.cat(z, 1), x)

    def _decode(self, xi, i):
        """One level's raw (bs, na, ny, nx, no) map -> boxes in pixels and probabilities (Segment overrides)."""
        xy, wh, conf = xi.sigmoid().split((2, 2, self.nc + 1), 4)
        xy = (xy * 2 + self.grid[i]) * self.stride[i]
        wh = (wh * 2) ** 2 * self.anchor_grid[i]
        return torch.cat((xy, wh, conf), 4)

    def _make_grid(self, nx, ny, i, dtype, device):
        shape = (1, self.na, ny, nx, 2)
        y = torch.arange(ny, dtype=dtype, device=device)
        x = torch.arange(nx, dtype=dtype, device=device)
        yv, xv = torch.meshgrid(y, x, indexing="ij")
        grid = torch.stack((xv, yv), 2).expand(*shape) - 0.5  # cell centre offset: xy = 2*sigmoid - 0.5 + cell
        anchor_grid = (self.anchors[i] * self.stride[i]).view((1, self.na, 1, 1, 2)).expand(*shape)
        return grid, anchor_grid


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


# YAML module names -> classes. An explicit table instead of eval(): a config can name nothing else.
MODULES = {
    "Conv": Conv, "DWConv": DWConv, "Bottleneck": Bottleneck, "BottleneckCSP": BottleneckCSP, "C3": C3,
    "SPP": SPP, "SPPF": SPPF, "Focus": Focus, "Concat": Concat, "Detect": Detect,
    "GhostConv": GhostConv, "GhostBottleneck": GhostBottleneck, "C3Ghost": C3Ghost, "C3TR": C3TR, "C3SPP": C3SPP,
    "C3x": C3x, "CrossConv": CrossConv, "DWConvTranspose2d": DWConvTranspose2d, "Contract": Contract,
    "Expand": Expand, "Segment": Segment, "Proto": Proto, "Classify": Classify,
    "nn.Upsample": nn.Upsample, "nn.BatchNorm2d": nn.BatchNorm2d, "nn.Identity": nn.Identity,
    "nn.MaxPool2d": nn.MaxPool2d, "nn.ZeroPad2d": nn.ZeroPad2d, "nn.ConvTranspose2d": nn.ConvTranspose2d,
}
_CHANNEL_MODULES = (Conv, DWConv, Bottleneck, BottleneckCSP, C3, SPP, SPPF, Focus, GhostConv, GhostBottleneck,
                    CrossConv, C3TR, C3SPP, C3Ghost, C3x, nn.ConvTranspose2d, DWConvTranspose2d)  # (c1, c2, ...)
_REPEAT_MODULES = (BottleneckCSP, C3, C3TR, C3Ghost, C3x)  # take the repeat count n as their third argument


def _resolve_arg(a, d):
    """YAML args may name the config's own keys ('nc', 'anchors'); everything else is a literal."""
    if isinstance(a, str) and a in ("nc", "anchors"):
        return d[a]
    if a == "None":  # YAML reads the official configs' `None` as a string
        return None
    return a


def parse_model(d, ch):
    """Build nn.Sequential from a model dict; returns (model, sorted indices of layers whose outputs are reused)."""
    anchors, nc, gd, gw = d["anchors"], d["nc"], d["depth_multiple"], d["width_multiple"]
    ch_mul = d.get("channel_multiple") or 8  # widths are rounded up to a multiple of this
    act = d.get("activation")
    where = d.get("yaml_file") or "model YAML"
    if act:
        if act not in ("nn.SiLU()", "nn.ReLU()", "nn.LeakyReLU(0.1)", "nn.Hardswish()"):
            raise ModelConfigError(f"{where}: activation {act!r} is not supported (use nn.SiLU(), nn.ReLU(), "
                                   "nn.LeakyReLU(0.1) or nn.Hardswish())")
        Conv.default_act = {"nn.SiLU()": nn.SiLU(), "nn.ReLU()": nn.ReLU(), "nn.LeakyReLU(0.1)": nn.LeakyReLU(0.1),
                            "nn.Hardswish()": nn.Hardswish()}[act]
    else:
        Conv.default_act = nn.SiLU()
    na = (len(anchors[0]) // 2) if isinstance(anchors, list) else anchors
    no = na * (nc + 5)

    LOGGER.info(f"\n{'':>3}{'from':>18}{'n':>3}{'params':>10}  {'module':<40}{'arguments':<30}")
    layers, save, c2 = [], [], ch[-1]
    for i, (f, n, name, args) in enumerate(d["backbone"] + d["head"]):
        if name not in MODULES:
            raise ModelConfigError(f"{where}: layer {i}: unknown module {name!r}; known: {', '.join(sorted(MODULES))}")
        try:
            m_, c2, args, n_ = _build_layer(i, f, n, name, args, d, ch, gd, gw, ch_mul, no, where)
        except (TypeError, ValueError, IndexError, AttributeError, ArithmeticError, RuntimeError, AssertionError) as e:
            raise ModelConfigError(f"{where}: layer {i} {[f, n, name, args]} cannot be built ({type(e).__name__}: "
                                   f"{' '.join(str(e).split())[:200]}); check its from, number and args.") from None
        m_.i, m_.f, m_.type = i, f, name
        m_.np = sum(p.numel() for p in m_.parameters())
        LOGGER.info(f"{i:>3}{str(f):>18}{n_:>3}{m_.np:10.0f}  {name:<40}{str(args):<30}")
        save.extend(x % i for x in ([f] if isinstance(f, int) else f) if x != -1)
        layers.append(m_)
        if i == 0:
            ch = []
        ch.append(c2)
    return nn.Sequential(*layers), sorted(save)


def _is_head(m):
    return isinstance(m, type) and issubclass(m, Detect)


def _build_layer(i, f, n, name, args, d, ch, gd, gw, ch_mul, no, where):
    """One YAML layer -> (module, its output channels, the args it was built with, the repeat count)."""
    m, c2 = MODULES[name], ch[-1]  # layers that keep their input's width (and Detect) pass ch[-1] on
    args = [_resolve_arg(a, d) for a in args]
    n = n_ = max(round(n * gd), 1) if n > 1 else n  # depth gain

    if m in _CHANNEL_MODULES:
        c1, c2 = ch[f], args[0]
        if c2 != no:
            c2 = make_divisible(c2 * gw, ch_mul)  # width gain
        args = [c1, c2, *args[1:]]
        if m in _REPEAT_MODULES:
            args.insert(2, n)
            n = 1
    elif m is nn.BatchNorm2d:
        args = [ch[f]]
    elif m is Concat:
        c2 = sum(ch[x] for x in f)
    elif _is_head(m):  # Detect and Segment
        check_detect_args(i, args, where)
        args.append([ch[x] for x in f])
        if isinstance(args[1], int):  # number of anchors per level: placeholder anchors
            args[1] = [list(range(args[1] * 2))] * len(f)
        if hasattr(m, "scale_yaml_args"):
            args = m.scale_yaml_args(args, gw, make_divisible, ch_mul)
    elif m is Contract:
        c2 = ch[f] * args[0] ** 2
    elif m is Expand:
        c2 = ch[f] // args[0] ** 2
    else:
        c2 = ch[f]

    if not _is_head(m):
        check_args(i, name, args[2:] if m in _CHANNEL_MODULES else args, where)
    if m in _CHANNEL_MODULES:  # before anything is allocated: a small file must not ask for gigabytes
        # a repeat module's args carry its repeat count third ([c1, c2, n, ...]): the kernel check reads past it
        check_channels(i, name, args[0], c2, [*args[:2], *args[3:]] if m in _REPEAT_MODULES else args, n_, where)
    elif m is Contract or m is Expand:
        check_channels(i, name, ch[f], c2, [], n_, where)
    m_ = nn.Sequential(*(m(*args) for _ in range(n))) if n > 1 else m(*args)
    return m_, c2, args, n_


def check_anchor_order(m):
    """Anchors must grow with the stride; flip them when a config lists them the other way round."""
    a = m.anchors.prod(-1).mean(-1).view(-1)
    da = a[-1] - a[0]
    ds = m.stride[-1] - m.stride[0]
    if bool(da != 0) and (bool(da < 0) != bool(ds < 0)):
        LOGGER.info("AutoAnchor: reversing anchor order")
        m.anchors[:] = m.anchors.flip(0)


def load_model_yaml(cfg):
    """A model dict from a dict, a path, or a bare name: models/yolov5s.yaml first, else the one file of that name
    under models/ (or data/, utils/) at any depth, e.g. 'yolov5-p7.yaml' -> models/hub/yolov5-p7.yaml."""
    if isinstance(cfg, dict):
        return deepcopy(cfg)
    path = find_repo_file(cfg, what="model config", prefer=(MODELS_DIR,))
    d = read_yaml(path, what="model YAML", error=ModelConfigError)
    d["yaml_file"] = path.name
    return d


class BaseModel(nn.Module):
    """What every YOLOv5 network shares (ultralytics' BaseModel): the layer-by-layer forward over self.model with the
    outputs listed in self.save kept, BatchNorm folding, the summary line."""

    def forward(self, x, profile=False, visualize=False):
        return self._forward_once(x, visualize)

    def _forward_once(self, x, visualize=False):
        """visualize: False, or the folder where each layer's feature maps are drawn (detect.py --visualize)."""
        y = []  # outputs of layers listed in self.save, None otherwise (frees memory early)
        for m in self.model:
            if m.f != -1:
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = m(x)
            y.append(x if m.i in self.save else None)
            if visualize:
                feature_visualization(x, m.type, m.i, save_dir=visualize)
        return x

    def fuse(self):
        """Fold each BatchNorm into the preceding conv for inference (fewer layers, same outputs)."""
        LOGGER.info("Fusing layers... ")
        fold_batchnorm(self)
        self.info()
        return self

    def info(self, verbose=False, img_size=640):
        LOGGER.info(model_summary(self, img_size=img_size, verbose=verbose))


class DetectionModel(BaseModel):
    def __init__(self, cfg="yolov5s.yaml", ch=3, nc=None, anchors=None):
        super().__init__()
        self.yaml = load_model_yaml(cfg)
        self.yaml_file = self.yaml.get("yaml_file", "")
        if not isinstance(self.yaml, dict):
            check_model_dict(self.yaml, self.yaml_file or "model YAML")
        ch = self.yaml["ch"] = self.yaml.get("ch", ch)
        if nc and nc != self.yaml.get("nc"):
            LOGGER.info(f"Overriding model.yaml nc={self.yaml['nc']} with nc={nc}")
            self.yaml["nc"] = nc
        if anchors:
            LOGGER.info(f"Overriding model.yaml anchors with anchors={anchors}")
            self.yaml["anchors"] = round(anchors)
        check_model_dict(self.yaml, self.yaml_file or "model YAML")
        self.model, self.save = parse_model(deepcopy(self.yaml), ch=[ch])
        self.names = [str(i) for i in range(self.yaml["nc"])]
        self.inplace = self.yaml.get("inplace", True)

        m = self.model[-1]
        if isinstance(m, Detect):
            s = 256  # twice the largest stride (128, P7): every level has >1 pixel, as training-mode BN needs
            m.inplace = self.inplace
            with torch.no_grad():
                try:
                    outs = self._stride_maps(self.forward(torch.zeros(1, ch, s, s)))
                except (RuntimeError, IndexError, TypeError, ValueError, ArithmeticError, AssertionError) as e:
                    raise ModelConfigError(f"{self.yaml_file or 'model YAML'}: the layers do not fit together on a "
                                           f"{s}x{s} image ({' '.join(str(e).split())[:200]}); check from and args."
                                           ) from None
            m.stride = torch.tensor([s / x.shape[-2] for x in outs])
            check_anchor_order(m)
            m.anchors /= m.stride.view(-1, 1, 1)
            self.stride = m.stride
            self._initialize_biases()
        initialize_weights(self)
        self.info()
        LOGGER.info("")

    def forward(self, x, augment=False, profile=False, visualize=False):
        if augment:
            return forward_augment(self, x)
        return self._forward_once(x, visualize)

    def _stride_maps(self, outs):
        """The per-level maps in the head's training-mode output (SegmentationModel's also holds the protos)."""
        return outs

    def _initialize_biases(self, cf=None):
        """Objectness prior of 8 objects per 640x640 image and class prior 0.6/nc (arXiv:1708.02002 section 3.3)."""
        m = self.model[-1]
        with torch.no_grad():
            for mi, s in zip(m.m, m.stride):
                b = mi.bias.view(m.na, -1)
                b[:, 4] += math.log(8 / (640 / float(s)) ** 2)
                if cf is None:
                    b[:, 5:5 + m.nc] += math.log(0.6 / (m.nc - 0.99999))
                else:
                    b[:, 5:5 + m.nc] += torch.log(cf / cf.sum())

    def _apply(self, fn, *args, **kwargs):
        # .to()/.cuda()/.half() must also move the Detect layer's cached stride and grids, which are not buffers.
        self = super()._apply(fn, *args, **kwargs)
        m = self.model[-1]
        if isinstance(m, Detect):
            m.stride = fn(m.stride)
            m.grid = [fn(g) for g in m.grid]
            m.anchor_grid = [fn(g) for g in m.anchor_grid]
        return self


def fold_batchnorm(model):
    """Each Conv's BatchNorm folded into its convolution, in place, silently (DetectionModel.fuse logs it): a model
    for inference only, the folded layers have no batch statistics left. Returns model."""
    for m in model.modules():
        if isinstance(m, Conv) and hasattr(m, "bn"):
            m.conv = fuse_conv_and_bn(m.conv, m.bn)
            delattr(m, "bn")
            m.forward = m.forward_fuse
    return model


def inference_copy(model):
    """A copy of model in eval mode with its BatchNorms folded (fold_batchnorm), model untouched: what a validation
    during training runs. The same outputs up to float rounding (yolov5s 640: at most 4e-6 apart) in three quarters of
    the time on a CPU, where an eval-mode BatchNorm is one more pass over every activation."""
    return fold_batchnorm(deepcopy(model).eval())


Model = DetectionModel  # the name ultralytics users import


class SegmentationModel(DetectionModel):
    """A DetectionModel whose YAML ends in a Segment head (models/segment/yolov5*-seg.yaml)."""

    def __init__(self, cfg="yolov5s-seg.yaml", ch=3, nc=None, anchors=None):
        super().__init__(cfg, ch, nc, anchors)

    def _stride_maps(self, outs):
        return outs[0]  # training mode: (maps, protos); the strides come from the maps


class ClassificationModel(BaseModel):
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
        return self._forward_once(x, visualize)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Build a YOLOv5 model from its YAML and print its summary")
    parser.add_argument("--cfg", type=str, default="yolov5s.yaml", help="model.yaml")
    parser.add_argument("--batch-size", type=int, default=1, help="batch size for --profile")
    parser.add_argument("--device", default="", help="cuda device, i.e. 0 or cpu")
    parser.add_argument("--profile", action="store_true", help="time one forward pass")
    parser.add_argument("--no-fuse", action="store_true", help="skip the fused summary")
    opt = parser.parse_args(argv)
    print_args(vars(opt))  # the official header: the arguments line, then the 'YOLOv5 🚀 ...' device line
    device = select_and_log_device(opt.device)
    model = DetectionModel(opt.cfg).to(device)
    if opt.profile:
        im = torch.rand(opt.batch_size, 3, 640, 640).to(device)
        model.eval()
        with torch.no_grad():
            t = time.perf_counter()
            model(im)
            LOGGER.info(f"forward {(time.perf_counter() - t) * 1e3:.1f} ms at batch {opt.batch_size}, 640")
    if not opt.no_fuse:
        model.eval().fuse()
    return model


if __name__ == "__main__":
    main()
