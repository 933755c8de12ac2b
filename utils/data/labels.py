"""Label files: verify each image/label pair (with ultralytics' messages), scan a dataset in parallel, and the checks
that stop a run with one line naming the file to fix."""
import os
import threading
from itertools import repeat
from multiprocessing.pool import ThreadPool

import cv2
import numpy as np
from PIL import Image, ImageFile, ImageOps

from utils.augmentations import segments2boxes
from utils.atomic_files import write_atomically
from utils.data.files import (HELP_URL, IMG_FORMATS, NUM_THREADS, WARN, NotRegularFileError, displayed_size,
                              exif_orientation, is_writeable, open_regular_file, special_file_kind)
from utils.errors import UserError


class LabelError(UserError, ValueError):
    """The labels cannot be trained on (none at all, a class id the data YAML does not name); the message names
    the dataset or label file and line, and what to change."""


_PIL_TRUNCATED_LOCK = threading.Lock()


def _restore_jpeg(im_file):
    """Re-save a JPEG that lacks its end marker (truncated): PIL decodes what is there (OpenCV refuses such files),
    EXIF-rotated, written back at quality 100, 4:4:4, atomically, like ultralytics."""
    with _PIL_TRUNCATED_LOCK:  # PIL's switch is global: set it only around this decode
        old = ImageFile.LOAD_TRUNCATED_IMAGES
        ImageFile.LOAD_TRUNCATED_IMAGES = True
        try:
            with open_regular_file(im_file) as f:  # never blocks: a file swapped for a FIFO is refused
                im = ImageOps.exif_transpose(Image.open(f))
                im.load()
        finally:
            ImageFile.LOAD_TRUNCATED_IMAGES = old
    write_atomically(im_file, lambda f: im.save(f, "JPEG", subsampling=0, quality=100))


def _check_jpeg_end(im_file, prefix):
    """'' when the JPEG is whole, else the warning for the truncated file (restored when it may be written)."""
    with open_regular_file(im_file) as f:
        f.seek(-2, 2)
        if f.read() == b"\xff\xd9":
            return ""
    try:
        if not (is_writeable(os.path.dirname(im_file)) and os.access(im_file, os.W_OK)
                and os.stat(im_file).st_mode & 0o222):
            raise PermissionError("read-only")
        _restore_jpeg(im_file)
        return f"{prefix}{WARN} {im_file}: corrupt JPEG restored and saved"
    except OSError as e:  # read-only data: usable only if OpenCV decodes it as it is
        with open_regular_file(im_file) as f:
            data = np.fromfile(f, np.uint8)
        if cv2.imdecode(data, cv2.IMREAD_COLOR) is None:
            raise ValueError(f"truncated JPEG that could not be restored ({e})") from e
        return f"{prefix}{WARN} {im_file}: corrupt JPEG (no end marker), could not restore ({e}); using it"


def _box_corners(x, y, w, h):
    """The 4-corner polygon (clockwise from top left) of a normalized xywh box."""
    return np.array([[x - w / 2, y - h / 2], [x + w / 2, y - h / 2], [x + w / 2, y + h / 2], [x - w / 2, y + h / 2]],
                    dtype=np.float32)


def _parse_rows(rows):
    """(labels (n, 5), segments [(k, 2)] or [] for a box file, number of box rows in a polygon file), float32, read
    row by row. As the official reader, a file with any row of more than 6 values is a polygon file (class x1 y1 x2
    y2 ...) whose boxes are the polygons' bounding boxes. Unlike it, a 5-value row there is a box: it keeps its box
    and its polygon is its rectangle, not a 2-point polygon that takes the width and height for a second point."""
    with np.errstate(over="ignore"):  # 1e400 becomes inf here, refused below as a non-finite value
        values = [np.array(row, dtype=np.float32) for row in rows]
    if not any(len(v) > 6 for v in values):  # boxes: class x y w h
        for j, v in enumerate(values, 1):
            assert len(v) == 5, f"labels require 5 columns, {len(v)} columns detected (line {j})"
        return np.array(values, dtype=np.float32).reshape(-1, 5), [], 0
    for j, v in enumerate(values, 1):  # 3 values (one point) pass here and are dropped as degenerate
        assert len(v) % 2 and len(v) >= 3, \
            f"a polygon row is a class and x y pairs, line {j} has {len(v) - 1} coordinates"
    is_box = [len(v) == 5 for v in values]
    segments = [_box_corners(*v[1:]) if box else v[1:].reshape(-1, 2) for v, box in zip(values, is_box)]
    lb = np.concatenate((np.array([v[0] for v in values]).reshape(-1, 1), segments2boxes(segments)), 1)
    lb = lb.astype(np.float32)
    for j, (v, box) in enumerate(zip(values, is_box)):
        if box:
            lb[j] = v  # the box as written (its rectangle's bounding box is the same up to rounding)
    return lb, segments, sum(is_box)


def _polygon_area(xy):
    """Shoelace area of a closed polygon (k, 2), in float64; 0 for fewer than 3 points."""
    xy = np.asarray(xy, np.float64)
    x, y = xy[:, 0], xy[:, 1]
    return 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))) if len(xy) >= 3 else 0.0


MIN_POLYGON_AREA_PX = 0.5  # a polygon that covers less than half a pixel (collinear points) outlines nothing


def degenerate_rows(lb, segments, shape):
    """Boolean mask of the labels that cannot be trained on: boxes of zero width or height (AutoAnchor's k-means
    and fitness turn them into NaN and 0-pixel anchors), and polygons of (nearly) zero area at the image's size
    (w, h): collinear points, fewer than 3 points."""
    bad = (lb[:, 3] <= 0) | (lb[:, 4] <= 0)
    if segments:
        w, h = shape
        bad |= np.array([_polygon_area(s * (w, h)) < MIN_POLYGON_AREA_PX for s in segments])
    return bad


def _read_label_file(lb_file, shape):
    """(labels (n, 5) float32, segments, nf, ne, notes) of one label file (the caller counts it missing). shape: the
    image's (w, h), for the area of polygons. notes: what was changed, for the file's one warning line (box rows of
    a polygon file taken as rectangles, degenerate and duplicate labels dropped)."""
    with open_regular_file(lb_file, "r") as f:  # a FIFO label file is refused, not read (it would block for good)
        rows = [x.split() for x in f.read().strip().splitlines() if len(x.strip())]
    if not rows:
        return np.zeros((0, 5), dtype=np.float32), [], 1, 1, []  # label file empty: a background image
    lb, segments, n_boxes = _parse_rows(rows)
    assert np.isfinite(lb).all() and all(np.isfinite(s).all() for s in segments), "non-finite label values"
    assert (lb >= 0).all(), f"negative label values {lb[lb < 0]}"
    assert (lb[:, 1:] <= 1).all(), f"non-normalized or out of bounds coordinates {lb[:, 1:][lb[:, 1:] > 1]}"
    notes = []
    if n_boxes:
        notes.append(f"{n_boxes} box row{'s' * (n_boxes > 1)} in a polygon label file taken as rectangle polygons")
    bad = degenerate_rows(lb, segments, shape)
    if bad.any():
        lb = lb[~bad]
        segments = [s for s, b in zip(segments, bad) if not b]
        notes.append(f"{int(bad.sum())} degenerate labels (zero width, height or area) removed")
    nl = len(lb)
    _, i = np.unique(lb, axis=0, return_index=True)
    if len(i) < nl:  # duplicate rows
        i = np.sort(i)
        lb = lb[i]
        if segments:
            segments = [segments[x] for x in i]
        notes.append(f"{nl - len(i)} duplicate labels removed")
    return lb, segments, 1, int(not len(lb)), notes


def verify_image_label(args):
    """ultralytics' check of one (image, label file, prefix): (im_file, labels (n,5), shape (w,h) as displayed,
    segments, nm, nf, ne, nc, msg); im_file is None when the pair is dropped, and msg then names the reason."""
    return _verify_pair(args)[:9]


def _verify_pair(args):
    """verify_image_label, plus the image's EXIF orientation (which --rect batching needs, see rect.py)."""
    im_file, lb_file, prefix = args
    nm, nf, ne, nc, msg, segments = 0, 0, 0, 0, "", []
    try:
        # the listing dropped special files, but one may be swapped in since: opened without blocking, refused
        with open_regular_file(im_file) as f:
            im = Image.open(f)
            im.verify()  # PIL verify
            orientation = exif_orientation(im)
        shape = displayed_size(im.size, orientation)
        assert (shape[0] > 9) & (shape[1] > 9), f"image size {shape} <10 pixels"
        assert im.format.lower() in IMG_FORMATS, f"invalid image format {im.format}"
        if im.format.lower() in ("jpg", "jpeg"):
            msg = _check_jpeg_end(im_file, prefix)
        if os.path.isfile(lb_file) or special_file_kind(lb_file):  # a FIFO label is named below, not 'missing'
            lb, segments, nf, ne, notes = _read_label_file(lb_file, shape)
            if notes:  # one line per file, after the JPEG's note when there is one
                msg = f"{msg or f'{prefix}{WARN} {im_file}'}: {'; '.join(notes)}"
        else:
            nm = 1  # label missing: a background image
            lb = np.zeros((0, 5), dtype=np.float32)
        return im_file, lb, shape, segments, nm, nf, ne, nc, msg, orientation
    except Exception as e:
        nc = 1
        why = e.strerror if isinstance(e, NotRegularFileError) else str(e)  # names the path and what it is
        msg = f"{prefix}{WARN} {im_file}: ignoring corrupt image/label: {' '.join(why.split())[:300]}"  # one line
        return None, None, None, None, nm, nf, ne, nc, msg, 0


def scan_labels(im_files, label_files, prefix=""):
    """Verify every pair in parallel. Returns the scan as a dict: files, labels, shapes (w, h), orientations,
    segments (per kept image), msgs (per dropped or repaired file) and results (found, missing, empty, corrupt,
    total)."""
    scan = {"files": [], "labels": [], "shapes": [], "orientations": [], "segments": [], "msgs": []}
    nm = nf = ne = nc = 0
    with ThreadPool(NUM_THREADS) as pool:
        for im_file, lb, shape, segments, nm_f, nf_f, ne_f, nc_f, msg, orientation in pool.imap(
                _verify_pair, zip(im_files, label_files, repeat(prefix))):
            nm, nf, ne, nc = nm + nm_f, nf + nf_f, ne + ne_f, nc + nc_f
            if im_file:
                for k, v in (("files", im_file), ("labels", lb), ("shapes", shape), ("orientations", orientation),
                             ("segments", segments)):
                    scan[k].append(v)
            if msg:
                scan["msgs"].append(msg)
    scan["results"] = (nf, nm, ne, nc, len(im_files))
    return scan


def require_labels(labels, path, label_dir, prefix=""):
    """Training needs at least one box: stop with one line naming the images and the labels folder."""
    if not any(len(x) for x in labels):
        raise LabelError(f"{prefix}All labels empty: no labels for the {len(labels)} images in {path} (every label "
                         f"file under {label_dir} is empty or missing), can not start training. Put one "
                         f"'class x_center y_center width height' line (normalized 0-1) per object in "
                         f"labels/<name>.txt beside images/. {HELP_URL}")


def _first_line_with_class(lb_file, nc):
    try:
        with open_regular_file(lb_file, "r") as f:
            for j, row in enumerate(f, 1):
                parts = row.split()
                if parts and float(parts[0]) >= nc:
                    return j
    except (OSError, ValueError):
        pass
    return "?"


def check_classes(labels, label_files, im_files, nc, prefix=""):
    """Stop with a message naming the label file and line when a class id is >= nc."""
    for lb, im_file, lb_file in zip(labels, im_files, label_files):
        if len(lb) and lb[:, 0].max() >= nc:
            bad = int(lb[:, 0].max())
            raise LabelError(f"{prefix}Label class {bad} exceeds nc={nc} in {lb_file}, line "
                             f"{_first_line_with_class(lb_file, nc)} (image {im_file}). Possible class labels are "
                             f"0-{nc - 1}: fix the label, or the data YAML's names.")
