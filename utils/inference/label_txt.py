"""The label files of val.py --save-txt and detect.py --save-txt: one line per detection, normalized to the
original image, in the YOLO or the Pascal-VOC box format."""
import numpy as np

from utils.backend import to_numpy
from utils.boxes import xyxy2xywh
from utils.errors import UserError

YOLO_FORMAT, VOC_FORMAT = 0, 1  # --save-format values


class SaveFormatError(UserError):
    pass


def check_save_format(save_format):
    if save_format not in (YOLO_FORMAT, VOC_FORMAT):
        raise SaveFormatError(f"--save-format {save_format}: use 0 (YOLO: class x y w h) or 1 (Pascal-VOC: class x1 y1 "
                              "x2 y2)")


def label_lines(det, im0_shape, save_conf=False, save_format=YOLO_FORMAT):
    """det's rows (n, 6) [x1, y1, x2, y2, conf, cls] in original pixels as label lines (no newline):
    `class x y w h [conf]` (YOLO) or `class x1 y1 x2 y2 [conf]` (Pascal-VOC), coordinates divided by the image width
    and height."""
    det = det if isinstance(det, np.ndarray) else to_numpy(det)
    if not len(det):
        return []
    gn = np.array(im0_shape, dtype=np.float64)[[1, 0, 1, 0]]  # normalization gain whwh
    box = det[:, :4].astype(np.float64)
    coords = (xyxy2xywh(box) if save_format == YOLO_FORMAT else box) / gn
    lines = []
    for b, conf, cls in zip(coords.tolist(), det[:, 4].tolist(), det[:, 5].tolist()):
        line = (cls, *b, conf) if save_conf else (cls, *b)
        lines.append(("%g " * len(line)).rstrip() % line)
    return lines


def write_label_txt(file, det, im0_shape, save_conf=False, save_format=YOLO_FORMAT):
    """Append det's label_lines to file (val.py's per-image files, which the evaluators own). detect.py and the
    predict scripts write each file whole instead (utils/inference/outputs.py), so a rerun replaces its files."""
    lines = label_lines(det, im0_shape, save_conf, save_format)
    if not lines:
        return
    with open(file, "a") as f:
        f.write("".join(line + "\n" for line in lines))
