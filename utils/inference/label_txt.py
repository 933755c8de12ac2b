"""The label files of val.py --save-txt and detect.py --save-txt: one line per detection, normalized to the
original image, in the YOLO or the Pascal-VOC box format. Each file is written whole (utils/atomic_files.py), never
appended to: a rerun into the same folder (--exist-ok) replaces its files instead of adding to a previous run's."""
from pathlib import Path

import numpy as np

from utils.atomic_files import numbered_unique_path, write_text
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
    # in float32, as the official scripts divide their float32 boxes: the same %g digits (0.576563 for 369/640, which
    # float64 prints as 0.576562)
    gn = np.array(im0_shape, dtype=np.float32)[[1, 0, 1, 0]]  # normalization gain whwh
    box = det[:, :4].astype(np.float32)
    coords = (xyxy2xywh(box) if save_format == YOLO_FORMAT else box) / gn
    lines = []
    for b, conf, cls in zip(coords.tolist(), det[:, 4].tolist(), det[:, 5].tolist()):
        line = (cls, *b, conf) if save_conf else (cls, *b)
        lines.append(("%g " * len(line)).rstrip() % line)
    return lines


def save_one_txt(predn, save_conf, shape, file):
    """val.py --save-txt's file for one image: predn's rows as YOLO label lines; no detections, no file (as
    ultralytics, which appends to the file instead of writing it whole)."""
    lines = label_lines(predn, shape, save_conf)
    if lines:
        write_text(file, "".join(line + "\n" for line in lines))


class RunLabelFiles:
    """The per-image label files one validation run (val.py, segment/val.py --save-txt) writes into folder as
    <stem>.txt, each written whole (detect.py's are: utils/inference/outputs.py):

    * a file of an earlier run in the same folder (--exist-ok) is replaced, never appended to; an image without
      detections over such a file gets an empty one, so that every file there is this run's result, and none where
      there was none (as ultralytics);
    * a second image of this run with the same stem (a/0001.jpg and b/0001.jpg, x.jpg and x.png) gets <stem>_2.txt
      instead of replacing the first one's file (ultralytics appended both into one)."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self._written = set()  # this run's files

    def write(self, image_file, det, im0_shape, save_conf=False, save_format=YOLO_FORMAT):
        """The label file of image_file's detections det (n, 6) in original pixels; returns its path, or None when
        no file was due (no detections and no earlier file)."""
        lines = label_lines(det, im0_shape, save_conf, save_format)
        f = self.folder / f"{Path(image_file).stem}.txt"
        taken = f in self._written
        if not lines and (taken or not f.exists()):
            return None
        if taken:
            f = numbered_unique_path(f, start=2, sep="_")[0]  # reserved (an empty file) until written
        try:
            write_text(f, "".join(line + "\n" for line in lines))
        except BaseException:
            if taken:
                f.unlink(missing_ok=True)  # the reservation, this run's own empty file
            raise
        self._written.add(f)
        return f
