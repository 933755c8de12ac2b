"""segment/predict.py's task for the predict loop (utils/inference/predict.py): detection's steps with the mask
coefficients kept through NMS, each image's masks made from its prototypes, blended into the drawn image and
written as polygons by --save-txt (SegmentOutputs)."""
import numpy as np

from utils.backend import to_numpy
from utils.boxes import scale_boxes
from utils.inference.detect_writer import DetectionWriter
from utils.inference.outputs import DetectionOutputs
from utils.plots import colors
from utils.segment.masks import (draw_masks, masks2segments, process_mask, process_mask_native, scale_image,
                                 scale_segments)

MASK_COEFFICIENTS = 32  # per detection, as every official segmentation model (and export) has


class SegmentOutputs(DetectionOutputs):
    """DetectionOutputs with the masks blended into the drawn image and, with save_polygons, polygons as the
    label lines (DetectionOutputs' own box lines are off: its save_txt stays False)."""

    save_polygons = False

    def write_masks(self, i, p, im0, det, masks, segments, frame, mode):
        if len(det):
            draw_masks(im0, masks, [colors(int(c), True) for c in det[:, 5]])
        if self.save_polygons:  # the file written whole: a rerun replaces it (write_labels)
            lines = []
            for j in range(len(det) - 1, -1, -1):  # lowest confidence first, as the official file
                seg = segments[j].reshape(-1)
                line = (int(det[j, 5]), *seg, det[j, 4]) if self.save_conf else (int(det[j, 5]), *seg)
                lines.append(("%g " * len(line)).rstrip() % line)
            self.write_labels(i, p, frame, mode, lines)


class SegmentationWriter(DetectionWriter):
    """outputs: a SegmentOutputs; retina_masks: masks at the original image size (sharper, slower); the rest as
    DetectionWriter (no feature maps)."""

    def __init__(self, outputs, retina_masks=False, **kwargs):
        super().__init__(outputs, **kwargs)
        self.retina_masks = retina_masks

    def forward(self, model, x, path=None):
        return model(x, augment=self.augment) if self.augment else model(x)

    def postprocess(self, out):
        """Per image (its NMS'd detections (n, 6 + 32) in input pixels, its prototypes (32, h, w) numpy)."""
        preds = self.nms(out[0], nm=MASK_COEFFICIENTS)
        return list(zip(preds, to_numpy(out[1]).astype(np.float32)))

    def write(self, i, p, im0, pred, input_hw, frame, mode, vid_cap):
        det, proto = pred
        det = to_numpy(det).astype(np.float32)
        masks, segments = self._masks(det, proto, input_hw, im0.shape)
        self.outputs.write_masks(i, p, im0, det, masks, segments, frame, mode)
        return self.outputs.write(i, p, im0, det[:, :6], frame, mode, vid_cap)

    def _masks(self, det, proto, input_hw, im0_shape):
        """The image's masks (n, h0, w0) bool and polygons (normalized to the original image); det's boxes are
        scaled to the original image and rounded in place, as the official script draws and writes them."""
        if not len(det):
            return np.zeros((0, *im0_shape[:2]), bool), []
        if self.retina_masks:
            scale_boxes(input_hw, det[:, :4], im0_shape)
            det[:, :4] = det[:, :4].round()
            masks = process_mask_native(proto, det[:, 6:], det[:, :4], im0_shape[:2])
            return masks, [scale_segments(im0_shape, sg, im0_shape, normalize=True) for sg in masks2segments(masks)]
        masks_in = process_mask(proto, det[:, 6:], det[:, :4], input_hw, upsample=True)
        scale_boxes(input_hw, det[:, :4], im0_shape)
        det[:, :4] = det[:, :4].round()
        segments = [scale_segments(input_hw, sg, im0_shape, normalize=True) for sg in masks2segments(masks_in)]
        masks = scale_image(input_hw, masks_in.transpose(1, 2, 0).astype(np.float32), im0_shape).transpose(2, 0, 1)
        return masks > 0.5, segments

    def no_result_note(self, pred):
        return super().no_result_note(pred[0])
