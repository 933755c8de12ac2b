"""Image sizes that fit a network: multiples of its largest stride."""
import math

from utils.log import LOGGER


def make_divisible(x, divisor):
    """Smallest multiple of divisor that is >= x."""
    if hasattr(divisor, "max"):
        divisor = int(divisor.max())
    return math.ceil(x / divisor) * divisor


def check_img_size(imgsz, s=32, floor=0):
    """Round an image size (int or [h, w]) up to a multiple of the stride and to at least `floor` (training asks
    for twice the max stride), warning with the rule that changed it."""
    s = int(s)
    sizes = [imgsz] if isinstance(imgsz, int) else list(imgsz)
    new = [max(make_divisible(x, s), floor) for x in sizes]
    if new != sizes:
        rules = ([f"a multiple of max stride {s}"] if any(x % s for x in sizes) else []) + \
                ([f"at least {floor}" + (f" ({floor // s} x max stride {s})" if floor % s == 0 else "")]
                 if any(x < floor for x in sizes) else [])
        shown, shown_new = (imgsz, new[0]) if isinstance(imgsz, int) else (sizes, new)
        LOGGER.warning(f"WARNING: --img-size {shown} must be {' and '.join(rules)}, updating to {shown_new}")
    return new[0] if isinstance(imgsz, int) else new
