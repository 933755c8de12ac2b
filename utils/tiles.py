"""Sliced inference's framework-free parts: the tile grid of an image and the merge of the detections that the tiles
(and the optional full-image pass) give, both as SAHI (sahi 0.12.8) computes them, so the same settings give the
same detections.

    settings = SliceSettings.of(512, overlap=0.2)            # SAHI: slice_height=slice_width=512, overlap ratios 0.2
    for x1, y1, x2, y2 in tile_grid(1080, 1920, settings):    # row by row, each tile inside the image
        ...
    det, groups = merge_detections(det, settings)            # (n, 6) [xyxy, conf, cls] in full-image pixels

The grid: tiles of the slice size start every `size - int(overlap * size)` pixels; the last tile of a row (column)
is moved back to end on the image's edge, so every tile but those of an image smaller than the slice is of the full
slice size (SAHI moves border tiles inward the same way; the model's letterbox pads a smaller tile).

The merge (SAHI's postprocess): greedy non-maximum merging ('nmm', SAHI's GREEDYNMM, the default) or suppression
('nms'), matching boxes by intersection over union ('iou') or over the smaller box's area ('ios', the default) at a
threshold (0.5), per class unless class_agnostic. Greedy NMM: the best remaining box takes every box that matches it
(metric >= threshold) and merges in, best first, each one that still matches the growing merged box (metric >=
threshold): union box, highest score, the class of the higher-scoring box (of the merged-in one on a tie). Ties of
score are ordered by x1, y1, x2, y2, as SAHI orders them. Numpy only; add_slice_flags adds the scripts' --slice
flags."""
from dataclasses import dataclass

import numpy as np

from utils.errors import UserError

MERGES = ("nmm", "nms")  # SAHI's postprocess_type GREEDYNMM, NMS
METRICS = ("ios", "iou")  # SAHI's postprocess_match_metric IOS, IOU


class SliceSettingError(UserError, ValueError):
    """A slice size, overlap or merge setting that cannot be used."""


@dataclass(frozen=True)
class SliceSettings:
    """How an image is sliced and how the detections are merged (SAHI's name for each field in brackets).

    size: (height, width) of a tile in image pixels [slice_height, slice_width];
    overlap: (height, width) ratios of overlap between neighbouring tiles, each in [0, 1) [overlap_height_ratio,
    overlap_width_ratio]; full_image: also run the whole image once (when it is more than one tile)
    [perform_standard_pred]; merge: 'nmm' or 'nms' [postprocess_type]; metric: 'ios' or 'iou'
    [postprocess_match_metric]; threshold [postprocess_match_threshold]; class_agnostic
    [postprocess_class_agnostic]; batch: tiles per model call (1 where the model format takes one image)."""
    size: tuple = (512, 512)
    overlap: tuple = (0.2, 0.2)
    full_image: bool = True
    merge: str = "nmm"
    metric: str = "ios"
    threshold: float = 0.5
    class_agnostic: bool = False
    batch: int = 16

    def __post_init__(self):
        h, w = self.size
        if int(h) != h or int(w) != w or h < 1 or w < 1:
            raise SliceSettingError(f"slice size {h}x{w} must be whole pixels >= 1: pass --slice 512 (or --slice H W)")
        for r in self.overlap:
            if not 0 <= float(r) < 1:
                raise SliceSettingError(f"slice overlap {r} is outside [0, 1): pass a ratio of the slice size such as "
                                        "--slice-overlap 0.2 (0 for none)")
        if self.merge not in MERGES:
            raise SliceSettingError(f"slice merge {self.merge!r} is not one of {', '.join(MERGES)}")
        if self.metric not in METRICS:
            raise SliceSettingError(f"slice match metric {self.metric!r} is not one of {', '.join(METRICS)}")
        if not 0 <= float(self.threshold) <= 1:
            raise SliceSettingError(f"slice match threshold {self.threshold} is outside [0, 1]")
        if int(self.batch) < 1:
            raise SliceSettingError(f"slice batch {self.batch} must be >= 1")

    @classmethod
    def of(cls, size, overlap=0.2, **kw):
        """size: an int or (h, w) (a 1-element list is square); overlap: a ratio or (h, w) ratios."""
        size = _pair(size, "slice size")
        overlap = _pair(overlap, "slice overlap")
        return cls(size=(int(size[0]), int(size[1])), overlap=(float(overlap[0]), float(overlap[1])), **kw)

    def overlap_pixels(self):
        """(height, width) overlap in pixels, truncated as SAHI truncates it."""
        return int(self.overlap[0] * self.size[0]), int(self.overlap[1] * self.size[1])


def _pair(v, what):
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            return v[0], v[0]
        if len(v) == 2:
            return tuple(v)
        raise SliceSettingError(f"{what} takes one or two values (height width), not {len(v)}: {list(v)}")
    return v, v


def _starts(length, size, overlap):
    """(start, end) of the tiles along one axis: every size - overlap pixels, the last one moved back to end on the
    edge (the whole axis as one tile when it is no longer than size)."""
    spans, start = [], 0
    while True:
        end = start + size
        if end >= length:
            spans.append((max(0, length - size), length))
            return spans
        spans.append((start, end))
        start = end - overlap


def tile_grid(height, width, settings):
    """The tiles of a height x width image as (n, 4) int [x1, y1, x2, y2], row by row (SAHI's order)."""
    oh, ow = settings.overlap_pixels()
    rows = _starts(int(height), settings.size[0], oh)
    cols = _starts(int(width), settings.size[1], ow)
    return np.array([(x1, y1, x2, y2) for y1, y2 in rows for x1, x2 in cols], dtype=np.int64).reshape(-1, 4)


def fits_one_tile(height, width, settings):
    """True when the image is no larger than a tile on both sides: slicing is then one plain pass."""
    return height <= settings.size[0] and width <= settings.size[1]


def shift_boxes(det, offset_xy):
    """Detections (n, 6+) on a tile -> the same rows with the boxes moved by the tile's top-left (x, y) (a copy)."""
    out = np.array(det, dtype=np.float32, copy=True)
    out[:, [0, 2]] += offset_xy[0]
    out[:, [1, 3]] += offset_xy[1]
    return out


def _areas(b):
    return (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])


def match_values(box, boxes, metric):
    """Overlap of one xyxy box (4,) with each of boxes (n, 4): IoU, or intersection over the smaller area (IoS)."""
    w = np.clip(np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0]), 0, None)
    h = np.clip(np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1]), 0, None)
    inter = w * h
    a, b = _areas(box), _areas(boxes)
    denom = (a + b - inter) if metric == "iou" else np.minimum(a, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, inter / np.where(denom > 0, denom, 1), 0.0)


def score_order(boxes, scores):
    """Indices best score first; ties by x1, then y1, x2, y2 (SAHI's deterministic order)."""
    return np.lexsort((boxes[:, 3], boxes[:, 2], boxes[:, 1], boxes[:, 0], -scores))


def _greedy_groups(boxes, scores, metric, threshold):
    """SAHI's greedy selection: the best remaining box takes all remaining boxes whose metric with it is >= threshold.
    Returns [(kept index, [taken indices, best first])], kept best first."""
    order = score_order(boxes, scores)
    groups = []
    while len(order):
        i, order = order[0], order[1:]
        m = match_values(boxes[i], boxes[order], metric)
        groups.append((int(i), order[m >= threshold].tolist()))
        order = order[m < threshold]
    return groups


def _merge_group(det, keep, taken, metric, threshold):
    """The kept row merged with each taken row that still matches the growing merged box (>= threshold): the
    union box, the higher score and its class (the taken row's on a tie). Returns (row, indices merged in)."""
    row = det[keep].copy()
    merged = []
    for j in taken:
        other = det[j]
        if match_values(row[:4], other[None, :4], metric)[0] >= threshold:
            if not row[4] > other[4]:
                row[4], row[5] = other[4], other[5]
            row[:4] = (min(row[0], other[0]), min(row[1], other[1]), max(row[2], other[2]), max(row[3], other[3]))
            merged.append(j)
    return row, merged


def merge_detections(det, settings):
    """Detections (n, 6) [xyxy, conf, cls] from all tiles, in full-image pixels -> (merged (k, 6) float32, best
    first; groups: for each output row, the input rows it was made of, its own first). Per class unless
    settings.class_agnostic. nms keeps the best box of each group as it is; nmm merges the group (see module doc)."""
    det = np.asarray(det, dtype=np.float32)
    det = det.reshape(-1, det.shape[-1] if det.ndim == 2 else 6)
    if len(det) < 2:
        return det.copy(), [[i] for i in range(len(det))]
    classes = np.zeros(len(det)) if settings.class_agnostic else det[:, 5]
    rows, groups = [], []
    for c in np.unique(classes):
        idx = np.flatnonzero(classes == c)
        for keep, taken in _greedy_groups(det[idx, :4], det[idx, 4], settings.metric, settings.threshold):
            if settings.merge == "nms":
                rows.append(det[idx[keep]].copy())
                groups.append([int(idx[keep])])
                continue
            row, merged = _merge_group(det, int(idx[keep]), [int(idx[j]) for j in taken], settings.metric,
                                       settings.threshold)
            rows.append(row)
            groups.append([int(idx[keep]), *merged])
    order = np.argsort(-np.array([r[4] for r in rows]), kind="stable")
    return np.stack([rows[i] for i in order]).astype(np.float32), [groups[i] for i in order]


LOW_CONFIDENCE = 0.1  # SAHI's LOW_MODEL_CONFIDENCE: below it merging would grow boxes out of many faint ones


def for_confidence(settings, conf_thres):
    """SAHI's rule for a low confidence threshold (validation's 0.001): below 0.1 a merge other than NMS becomes
    NMS with IoU matching (SAHI's force_postprocess_type=False). Returns (settings, a line saying so or None)."""
    if conf_thres >= LOW_CONFIDENCE or settings.merge == "nms":
        return settings, None
    from dataclasses import replace
    return replace(settings, merge="nms", metric="iou"), (
        f"slice merge {settings.merge}/{settings.metric} at confidence {conf_thres} < {LOW_CONFIDENCE} merges faint "
        "boxes into large ones: merging by NMS/IoU instead, as SAHI does (pass --slice-merge nms to say so)")


def add_slice_flags(parser):
    """--slice and its settings, shared by detect.py, segment/predict.py and val.py (docs/sliced-inference.md)."""
    parser.add_argument("--slice", nargs="+", type=int, default=None, metavar="SIZE",
                        help="sliced inference: tiles of SIZE (or H W) image pixels (SAHI slice_height/width); "
                             "off without it")
    parser.add_argument("--slice-overlap", nargs="+", type=float, default=[0.2], metavar="RATIO",
                        help="overlap of neighbouring tiles as a ratio of the slice, in [0, 1) (or H W ratios; "
                             "SAHI overlap_height/width_ratio)")
    parser.add_argument("--slice-no-full", action="store_true",
                        help="no full-image pass besides the tiles (SAHI perform_standard_pred=False)")
    parser.add_argument("--slice-merge", default="nmm", choices=MERGES,
                        help="merge of the tiles' boxes: greedy merging or suppression (SAHI postprocess_type "
                             "GREEDYNMM, NMS)")
    parser.add_argument("--slice-match", default="ios", choices=METRICS,
                        help="box overlap for the merge (SAHI postprocess_match_metric IOS, IOU)")
    parser.add_argument("--slice-match-thres", type=float, default=0.5,
                        help="overlap at which boxes merge (SAHI postprocess_match_threshold)")
    parser.add_argument("--slice-agnostic", action="store_true",
                        help="merge boxes of different classes too (SAHI postprocess_class_agnostic)")
    parser.add_argument("--slice-batch", type=int, default=16, help="tiles per model call")


def settings_from_flags(slice=None, slice_overlap=0.2, slice_no_full=False, slice_merge="nmm", slice_match="ios",
                        slice_match_thres=0.5, slice_agnostic=False, slice_batch=16):
    """The scripts' --slice* values (their run() keywords) -> SliceSettings, or None when --slice is not given."""
    if slice is None or (isinstance(slice, (list, tuple)) and not slice):
        return None
    return SliceSettings.of(slice, slice_overlap, full_image=not slice_no_full, merge=slice_merge,
                            metric=slice_match, threshold=slice_match_thres, class_agnostic=slice_agnostic,
                            batch=slice_batch)


SLICE_DEFAULTS = dict(slice=None, slice_overlap=0.2, slice_no_full=False, slice_merge="nmm", slice_match="ios",
                      slice_match_thres=0.5, slice_agnostic=False, slice_batch=16)  # the flags' defaults, by keyword
