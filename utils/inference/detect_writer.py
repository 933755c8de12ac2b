"""detect.py's task for the predict loop (utils/inference/predict.py): letterboxed uint8 frames in, NMS'd boxes
scaled back to the original image out, written by DetectionOutputs (annotated images and videos, labels, crops,
predictions.csv)."""
from pathlib import Path

from utils.inference.steps import preprocess, to_original
from utils.nms import non_max_suppression
from utils.paths import increment_path


class DetectionWriter:
    """outputs: a DetectionOutputs; the NMS thresholds and filters as detect.py's flags name them; augment: test-time
    augmentation; visualize: each layer's feature maps into <save_dir>/<image stem>/ (.pt models)."""

    def __init__(self, outputs, conf_thres=0.25, iou_thres=0.45, classes=None, agnostic=False, max_det=1000,
                 augment=False, visualize=False):
        self.outputs = outputs
        self.conf_thres, self.iou_thres, self.classes, self.agnostic = conf_thres, iou_thres, classes, agnostic
        self.max_det, self.augment, self.visualize = max_det, augment, visualize

    @property
    def save_dir(self):
        return self.outputs.save_dir

    def prepare(self, im, model):
        return preprocess(im, model.device, model.fp16)

    def forward(self, model, x, path=None):
        maps_dir = _feature_map_dir(self.save_dir, path) if self.visualize else False
        return model(x, augment=self.augment, visualize=maps_dir)

    def postprocess(self, out):
        """Per image (n, 6) [xyxy, conf, cls] in input pixels."""
        return self.nms(out)

    def nms(self, pred, **kwargs):
        """NMS at the run's thresholds and filters (kwargs: the task's own, e.g. segmentation's mask count nm)."""
        return non_max_suppression(pred, self.conf_thres, self.iou_thres, self.classes, self.agnostic,
                                   max_det=self.max_det, **kwargs)

    def write(self, i, p, im0, det, input_hw, frame, mode, vid_cap):
        return self.outputs.write(i, p, im0, to_original(det, input_hw, im0.shape), frame, mode, vid_cap)

    def no_result_note(self, det):
        return "" if len(det) else "(no detections), "


def _feature_map_dir(save_dir, path):
    """<save_dir>/<image stem>, numbered when the name is taken (frames of a video: stem, stem2, ...)."""
    first = path[0] if isinstance(path, (list, tuple)) else path
    return increment_path(Path(save_dir) / Path(str(first)).stem, mkdir=True)
