"""Checks on a model YAML (a file, or the dict a checkpoint stores) before any layer is built.

A model YAML is user input: each value is checked for type and range where it is read, and anything wrong is one
ModelConfigError line naming the file, the key or layer, the value, and what to write instead. Sizes are bounded so
that a small file cannot make the program allocate gigabytes (a width of 10**7 channels, 10**6 repeats).
"""
import math
import numbers

from utils.errors import UserError
from utils.yaml_files import describe

MAX_NC = 10_000  # as utils/dataset_config.MAX_CLASSES
MAX_CHANNELS = 16_384  # yolov5x6 uses 1,280
MAX_REPEATS = 64  # after depth_multiple; yolov5x uses 12
MAX_LAYER_PARAMS = 1 << 27  # one conv of c1*c2*k*k weights; yolov5x's largest holds 14.7 M
LAYOUT = "see models/yolov5s.yaml for the layout"


class ModelConfigError(UserError, KeyError):
    """A model YAML that cannot be built. A KeyError too (unknown module names were KeyErrors), printed as its
    message rather than KeyError's quoted repr."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


def _number(d, key, where, low=0.0, high=math.inf):
    v = d.get(key)
    if not isinstance(v, numbers.Real) or isinstance(v, bool) or not math.isfinite(v) or not low < v <= high:
        raise ModelConfigError(f"{where}: {key}: {describe(v)} must be a number above {low:g} and at most "
                               f"{high:g}; {LAYOUT}.")
    return v


def check_model_dict(d, where):
    """Raise ModelConfigError unless d has the keys and value types parse_model reads."""
    if not isinstance(d, dict):
        raise ModelConfigError(f"{where}: holds a {type(d).__name__}, expected a model YAML mapping; {LAYOUT}.")
    missing = [k for k in ("nc", "anchors", "backbone", "head") if k not in d]
    if missing:
        raise ModelConfigError(f"{where}: missing {', '.join(missing)}; every model YAML needs nc, anchors, "
                               f"backbone and head ({LAYOUT}).")
    nc = d["nc"]
    if not isinstance(nc, int) or isinstance(nc, bool) or not 1 <= nc <= MAX_NC:
        raise ModelConfigError(f"{where}: nc: {describe(nc)} must be a whole number of classes from 1 to {MAX_NC:,}.")
    ch = d.get("ch", 3)
    if not isinstance(ch, int) or isinstance(ch, bool) or not 1 <= ch <= 64:
        raise ModelConfigError(f"{where}: ch: {describe(ch)} must be the number of input channels (3 for RGB).")
    d.setdefault("depth_multiple", 1.0)
    d.setdefault("width_multiple", 1.0)
    _number(d, "depth_multiple", where, high=16)
    _number(d, "width_multiple", where, high=16)
    _check_anchors(d["anchors"], where)
    layers = d["backbone"], d["head"]
    if not all(isinstance(part, list) for part in layers) or not d["backbone"] or not d["head"]:
        raise ModelConfigError(f"{where}: backbone and head must each be a non-empty list of layers "
                               f"[from, number, module, args]; {LAYOUT}.")
    for i, layer in enumerate(d["backbone"] + d["head"]):
        check_layer(i, layer, where)
    last = d["head"][-1][2]
    if last not in ("Detect", "Segment"):
        raise ModelConfigError(f"{where}: the last head layer is {describe(last)}; a detection model ends in "
                               f"Detect ([[17, 20, 23], 1, Detect, [nc, anchors]]), a segmentation model in "
                               f"Segment; {LAYOUT}.")


def _check_anchors(a, where):
    if isinstance(a, int) and not isinstance(a, bool) and 1 <= a <= 16:
        return  # anchors per level, placed by AutoAnchor
    ok = isinstance(a, list) and 1 <= len(a) <= 8 and all(
        isinstance(level, list) and level and len(level) % 2 == 0 and len(level) <= 64 and
        all(isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) and x > 0 for x in level)
        for level in a) and len({len(level) for level in a}) == 1
    if not ok:
        raise ModelConfigError(f"{where}: anchors: {describe(a)} must be a list of levels, each the same even count "
                               f"of positive widths and heights ([10,13, 16,30, 33,23]), or a count per level; "
                               f"{LAYOUT}.")


def check_layer(i, layer, where):
    if not (isinstance(layer, list) and len(layer) == 4):
        raise ModelConfigError(f"{where}: layer {i} {describe(layer)} must be [from, number, module, args]; {LAYOUT}.")
    f, n, name, args = layer
    froms = f if isinstance(f, list) else [f]
    if not froms or not all(isinstance(x, int) and not isinstance(x, bool) and -i - 1 <= x < max(i, 1) for x in froms):
        raise ModelConfigError(f"{where}: layer {i} from {describe(f)} must name earlier layers (-1 is the one "
                               f"before, 0..{max(i - 1, 0)} by index).")
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 1000:
        raise ModelConfigError(f"{where}: layer {i} number {describe(n)} must be a whole repeat count from 1.")
    if not isinstance(name, str):
        raise ModelConfigError(f"{where}: layer {i} module {describe(name)} must be a module name such as Conv.")
    if not isinstance(args, list):
        raise ModelConfigError(f"{where}: layer {i} args {describe(args)} must be a list, e.g. [64, 3, 2].")


def check_channels(i, name, c1, c2, args, n, where):
    """The built layer's size: channels and repeats in range, one conv's weights bounded."""
    if not isinstance(c2, int) or isinstance(c2, bool) or not 1 <= c2 <= MAX_CHANNELS:
        raise ModelConfigError(f"{where}: layer {i} {name} width {describe(c2)} must be a whole number of channels "
                               f"from 1 to {MAX_CHANNELS:,}, e.g. [64, 3, 2].")
    k = args[2] if len(args) > 2 and isinstance(args[2], int) and not isinstance(args[2], bool) else 1
    if n > MAX_REPEATS or n * c1 * c2 * k * k > MAX_LAYER_PARAMS:
        raise ModelConfigError(f"{where}: layer {i} {name} is too large ({n} x {c1}->{c2} channels, kernel {k}); "
                               "check its number and args.")


def check_detect_args(i, args, where):
    """Detect's [nc, anchors] after 'nc'/'anchors' are replaced by the config's values."""
    nc = args[0] if args else None
    if not isinstance(nc, int) or isinstance(nc, bool) or not 1 <= nc <= MAX_NC:
        raise ModelConfigError(f"{where}: layer {i} Detect args {describe(args)} must start with the class count "
                               f"(nc, or a whole number from 1 to {MAX_NC:,}).")
    if len(args) < 2:
        raise ModelConfigError(f"{where}: layer {i} Detect args {describe(args)} need the anchors too: [nc, anchors].")
    _check_anchors(args[1], where)


_MODES = ("nearest", "bilinear", "bicubic")  # nn.Upsample's modes
_LIST_ARGS = ("SPP", "C3SPP", "nn.ZeroPad2d")  # the layers that take a list: pooling kernels, paddings


def _plain_arg(a, lists):
    if a is None or isinstance(a, bool):
        return True
    if isinstance(a, int):
        return 0 <= a <= MAX_CHANNELS
    if isinstance(a, float):
        return math.isfinite(a) and 0 < a <= 16
    if isinstance(a, str):
        return a in _MODES
    return lists and isinstance(a, (list, tuple)) and 0 < len(a) <= 16 and all(
        isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 64 for x in a)  # pooling kernels, paddings


def check_args(i, name, args, where):
    """A layer's args (other than Detect's): None, flags, counts, fractions, kernel lists, an Upsample mode. Checked
    before the module is built: OneFlow aborts the process (no exception) on an empty kernel list, for one."""
    lists = name in _LIST_ARGS  # elsewhere a list is a kernel OneFlow aborts on ([1]: a 1-d kernel for a 2-d conv)
    bad = next((a for a in args if not _plain_arg(a, lists)), _OK)
    if bad is not _OK:
        raise ModelConfigError(f"{where}: layer {i} {name} argument {describe(bad)} in {describe(args)} is not a "
                               f"size, a flag or a mode this layer takes; {LAYOUT}.")


_OK = object()
