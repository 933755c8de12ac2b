"""Sliced segmentation: SlicedPredictor's tiles and merge, each detection carrying its mask. A tile's masks are made
at the tile's own pixels from its prototypes (process_mask_native, as --retina-masks), moved with the boxes, and a
merged detection's mask is the union of the masks merged into it (SAHI's get_merged_mask).

    sliced = SlicedSegmenter(model, 640, SliceSettings.of(512))
    det, masks = sliced.predict(im0)     # (n, 6) [xyxy, conf, cls], (n, H, W) bool, both in im0 pixels

segment/predict.py --slice writes them through SlicedSegmentWriter."""
import numpy as np

from utils.backend import to_numpy
from utils.segment.predict_writer import MASK_COEFFICIENTS
from utils.inference.sliced_writer import SlicedWriter
from utils.inference.slicing import SlicedPredictor
from utils.inference.steps import to_original
from utils.nms import non_max_suppression
from utils.segment.masks import masks2segments, process_mask_native, scale_segments
from utils.tiles import merge_detections, shift_boxes


class SlicedSegmenter(SlicedPredictor):
    """SlicedPredictor for segmentation models: predict(im0) -> (det (n, 6), masks (n, H, W) bool)."""

    def _forward(self, t, n, shape, hw):
        out = self.model(t, augment=self.augment)
        preds = non_max_suppression(out[0], nm=MASK_COEFFICIENTS, **self.nms)[:n]
        protos = to_numpy(out[1]).astype(np.float32)
        results = []
        for d, proto in zip(preds, protos):
            d = to_numpy(d).astype(np.float32)
            det = to_original(d[:, :6], shape, hw)
            masks = process_mask_native(proto, d[:, 6:], det[:, :4], hw) if len(det) else np.zeros((0, *hw), bool)
            results.append((det, masks.astype(bool)))
        return results

    def _place(self, result, offset):
        det, masks = result
        keep = (det[:, 2] > det[:, 0]) & (det[:, 3] > det[:, 1])
        return shift_boxes(det[keep], offset), [(tuple(int(v) for v in offset), m) for m in masks[keep]]

    def _join(self, found, hw):
        det = np.concatenate([d for d, _ in found], 0) if found else np.zeros((0, 6), np.float32)
        return det, [p for _, pieces in found for p in pieces], hw

    def merge(self, raw):
        """(det, [(offset, tile mask)], image hw) -> merged det (k, 6) and their masks (k, H, W) bool."""
        det, pieces, (h, w) = raw
        merged, groups = merge_detections(det, self.settings)
        masks = np.zeros((len(merged), h, w), bool)
        for r, group in enumerate(groups):
            for j in group:
                (x, y), m = pieces[j]
                masks[r, y:y + m.shape[0], x:x + m.shape[1]] |= m
        return merged, masks


class SlicedSegmentWriter(SlicedWriter):
    """segment/predict.py --slice: the merged masks blended and (--save-txt) written as polygons by the
    SegmentationWriter's outputs, the boxes rounded to whole pixels as the official script writes them."""

    def postprocess(self, raw):
        return [self.sliced.merge(raw)]

    def write(self, i, p, im0, pred, input_hw, frame, mode, vid_cap):
        det, masks = pred
        det = det.copy()
        det[:, :4] = det[:, :4].round()
        segments = [scale_segments(im0.shape, sg, im0.shape, normalize=True) for sg in masks2segments(masks)]
        self.outputs.write_masks(i, p, im0, det, masks, segments, frame, mode)
        return self.outputs.write(i, p, im0, det, frame, mode, vid_cap)
