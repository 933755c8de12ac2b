"""Sliced prediction: an image cut into overlapping tiles (utils/tiles.py's grid), the tiles run through the model in
batches, each tile's boxes moved back onto the image, an optional full-image pass added, and the whole merged
(utils/tiles.py's merge_detections, SAHI's GREEDYNMM / NMS with IOS / IOU matching).

    from utils.inference.slicing import SlicedPredictor
    from utils.tiles import SliceSettings
    sliced = SlicedPredictor(model, 640, SliceSettings.of(512, overlap=0.2), conf_thres=0.25)
    det = sliced.predict(im0)          # im0: BGR uint8 (H, W, 3); det (n, 6) [xyxy, conf, cls] in im0 pixels

Each tile (and the full image) is letterboxed as torch.hub's AutoShape (and SAHI's yolov5 model through it) does:
the longer side scaled to imgsz, both sides rounded up to the stride, centred padding; an exported model of one
fixed input shape gets that shape. Tiles of one image are all of one size, so they go through the model as one
batch (settings.batch tiles a call); a model exported for batch 1 takes them one at a time (said once).
SAHI runs one tile a call in Python; here the model sees the whole batch, which is where the speed comes from."""
import math

import numpy as np

from utils.augmentations import letterbox
from utils.img_size import make_divisible
from utils.inference.steps import preprocess, to_original
from utils.log import LOGGER
from utils.nms import non_max_suppression
from utils.tiles import fits_one_tile, for_confidence, merge_detections, shift_boxes, tile_grid


def _static_input(model):
    """(batch, (h, w)) of a model exported for one input shape; (None, None) where it takes any shape (.pt, a
    dynamic export)."""
    shape = getattr(model, "input_shape", None)
    if getattr(model, "pt", False) or not shape or len(shape) != 4 or not all(isinstance(d, int) for d in shape):
        return None, None
    return int(shape[0]), (int(shape[2]), int(shape[3]))


def autoshape_hw(hw, imgsz, stride):
    """The input (h, w) AutoShape letterboxes an image of size hw into: the longer side scaled to imgsz (the larger
    of an (h, w) pair), each side truncated then rounded up to the stride."""
    size = max(imgsz) if isinstance(imgsz, (list, tuple)) else int(imgsz)
    g = size / max(hw)
    return [make_divisible(int(x * g), stride) for x in hw]


class SlicedPredictor:
    """Sliced detection with a DetectMultiBackend (any format). imgsz: the long side each tile is inferred at
    (SAHI's image_size); the NMS settings are detect.py's, applied per tile; settings: a utils.tiles.SliceSettings
    (below confidence 0.1 a merge other than NMS becomes NMS/IoU, as SAHI does, said once).
    predict(im0) -> merged (n, 6) numpy detections in im0 pixels."""

    def __init__(self, model, imgsz, settings, conf_thres=0.25, iou_thres=0.45, classes=None, agnostic=False,
                 max_det=1000, augment=False, multi_label=False, device=None, half=None):
        settings, note = for_confidence(settings, conf_thres)
        if note:
            LOGGER.warning(f"WARNING: {note}")
        self.model, self.imgsz, self.settings = model, imgsz, settings
        # no NMS time limit: a tile cut by it would be a hole in the image (each tile's candidates are capped by
        # max_nms, and a batch of tiles on a slow CPU backend took longer than the limit for a batch)
        self.nms = dict(conf_thres=conf_thres, iou_thres=iou_thres, classes=classes, agnostic=agnostic,
                        max_det=max_det, multi_label=multi_label, time_limit=math.inf)
        self.augment = augment
        # a DetectMultiBackend knows its device and precision; a plain module (AutoShape's) is told them
        self.device = device if device is not None else model.device
        self.half = bool(model.fp16 if half is None else half)
        static_batch, self.fixed_hw = _static_input(model)
        self.batch = static_batch or settings.batch
        if static_batch == 1 and settings.batch > 1:
            LOGGER.info(f"{getattr(model, 'w', 'this model')} was exported for batch 1: tiles run one at a time")
        self._warned_small = False

    def input_hw(self, hw):
        """The model input (h, w) for an image or tile of size hw."""
        return self.fixed_hw or autoshape_hw(hw, self.imgsz, self.model.stride)

    def _run(self, ims):
        """Equal-size BGR images -> their NMS'd detections (list of (n, 6) numpy) in each image's own pixels."""
        hw = ims[0].shape[:2]
        shape = self.input_hw(hw)
        x = np.stack([letterbox(im, shape, auto=False)[0] for im in ims])  # (b, h, w, 3) BGR
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2)[:, ::-1])  # BCHW RGB
        out = []
        for i in range(0, len(x), self.batch):
            chunk = x[i:i + self.batch]
            n = len(chunk)
            if self.fixed_hw and n < self.batch:  # a static batch > 1: fill it, read back the real images only
                chunk = np.concatenate([chunk, np.zeros((self.batch - n, *chunk.shape[1:]), chunk.dtype)])
            out.extend(self._forward(preprocess(chunk, self.device, self.half), n, shape, hw))
        return out

    def _forward(self, t, n, shape, hw):
        """One batch through the model and NMS -> the first n images' detections in their own (hw) pixels."""
        pred = non_max_suppression(self.model(t, augment=self.augment), **self.nms)[:n]
        return [to_original(d, shape, hw) for d in pred]

    def tiles(self, im0):
        """[(x1, y1, x2, y2)] of im0's tiles (one, the whole image, when it fits a tile: said once)."""
        h, w = im0.shape[:2]
        if fits_one_tile(h, w, self.settings) and not self._warned_small:
            self._warned_small = True
            LOGGER.warning(f"WARNING: slice {self.settings.size[0]}x{self.settings.size[1]} is not smaller than the "
                           f"image ({h}x{w}): it runs as one tile, a plain pass (pass a smaller --slice to slice it)")
        return tile_grid(h, w, self.settings)

    def predict_raw(self, im0):
        """Every tile's (and the full-image pass's) detections in im0 pixels, before the merge: (n, 6) numpy."""
        grid = self.tiles(im0)
        found = []
        # tiles of the slice size share one input shape; a smaller one (an image narrower than the slice) differs
        sizes = {}
        for k, (x1, y1, x2, y2) in enumerate(grid):
            sizes.setdefault((y2 - y1, x2 - x1), []).append(k)
        for ks in sizes.values():
            results = self._run([im0[grid[k][1]:grid[k][3], grid[k][0]:grid[k][2]] for k in ks])
            found += [(k, self._place(r, grid[k][:2])) for k, r in zip(ks, results)]
        found = [r for _, r in sorted(found, key=lambda kr: kr[0])]  # tile order, whatever the batching
        if len(grid) > 1 and self.settings.full_image:
            found.append(self._place(self._run([im0])[0], (0, 0)))
        return self._join(found, im0.shape[:2])

    def _place(self, det, offset):
        """One tile's detections moved onto the image (SAHI drops boxes clipped to nothing first)."""
        return shift_boxes(det[(det[:, 2] > det[:, 0]) & (det[:, 3] > det[:, 1])], offset)

    def _join(self, found, hw):
        return np.concatenate(found, 0) if found else np.zeros((0, 6), np.float32)

    def merge(self, raw):
        """predict_raw's rows -> merged (n, 6) float32 [xyxy, conf, cls], best first."""
        return merge_detections(raw, self.settings)[0]

    def predict(self, im0):
        """im0: a BGR uint8 (H, W, 3) image -> merged (n, 6) float32 [xyxy, conf, cls] in im0 pixels, best first."""
        return self.merge(self.predict_raw(im0))

    __call__ = predict
