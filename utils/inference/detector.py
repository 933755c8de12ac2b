"""Detector: boxes from a model in a few lines of Python, without detect.py's files.

    from utils.inference import Detector
    det = Detector("yolov5n.pt", device="cpu", imgsz=640)
    results = det.predict("data/images/bus.jpg")          # a path, folder, glob, .txt list, BGR array or a list
    r = results[0]
    r["boxes"]    # (n, 4) float32 xyxy in ORIGINAL image pixels
    r["scores"]   # (n,) confidence = objectness * class probability
    r["classes"]  # (n,) int class ids
    r["names"]    # list of n class names
    r["path"]     # the file (None for an array input)

Arrays are taken as OpenCV images (H, W, 3) BGR uint8, what cv2.imread returns; pass rgb=True for RGB arrays.
Detector(..., slice=512) predicts each image tile by tile (an int, (h, w), or a utils.tiles.SliceSettings for the
overlap and merge; docs/sliced-inference.md), the boxes merged and still in original pixels.
"""
from pathlib import Path

import numpy as np

from utils.augmentations import letterbox
from utils.backend import inference_mode
from utils.data.media import LoadImages
from utils.inference.loading import load_model
from utils.inference.slicing import SlicedPredictor
from utils.inference.steps import preprocess, to_original
from utils.nms import non_max_suppression
from utils.tiles import SliceSettings


class Detector:
    """load_model + letterbox + model + NMS + rescale. weights: any format DetectMultiBackend runs (.pt,
    .torchscript, .onnx, *_openvino_model)."""

    def __init__(self, weights, device="", imgsz=640, conf_thres=0.25, iou_thres=0.45, max_det=1000, classes=None,
                 agnostic=False, augment=False, half=False, dnn=False, data=None, slice=None):
        settings = slice if slice is None or isinstance(slice, SliceSettings) else SliceSettings.of(slice)
        self.model, self.imgsz = load_model(weights, device=device, half=half, dnn=dnn, data=data, imgsz=imgsz)
        self.device, self.half = self.model.device, self.model.fp16
        self.stride, self.names = self.model.stride, self.model.names
        self.auto = self.model.pt  # exported models take the one square size they were exported at
        self.conf_thres, self.iou_thres, self.max_det = conf_thres, iou_thres, max_det
        self.classes, self.agnostic, self.augment = classes, agnostic, augment
        self.sliced = None if settings is None else SlicedPredictor(
            self.model, self.imgsz, settings, conf_thres, iou_thres, classes, agnostic, max_det, augment)

    def _letterbox(self, im0):
        im = letterbox(im0, self.imgsz, stride=self.stride, auto=self.auto)[0]
        return np.ascontiguousarray(im.transpose((2, 0, 1))[::-1])  # HWC BGR -> CHW RGB

    @inference_mode()
    def infer(self, im, im0):
        """One letterboxed CHW RGB image and its original BGR image -> (n, 6) numpy [xyxy, conf, cls] in im0 pixels."""
        if self.sliced is not None:  # the original image, tile by tile
            return self.sliced.predict(im0)
        x = preprocess(im, self.device, self.half)
        pred = self.model(x, augment=self.augment)
        det = non_max_suppression(pred, self.conf_thres, self.iou_thres, self.classes, self.agnostic,
                                  max_det=self.max_det)[0]
        return to_original(det, x.shape[2:], im0.shape)

    def _result(self, det, path):
        classes = det[:, 5].astype(int)
        return {"path": path, "boxes": det[:, :4], "scores": det[:, 4], "classes": classes,
                "names": [self.names.get(int(c), str(c)) for c in classes]}

    def predict(self, source, rgb=False):
        """Run on a path (file, folder, glob, .txt list, video), a BGR array, or a list of either.
        Returns one dict per image (or video frame), see the module docstring."""
        if isinstance(source, np.ndarray):
            source = [source]
        if isinstance(source, (list, tuple)) and source and all(isinstance(s, np.ndarray) for s in source):
            out = []
            for im0 in source:
                im0 = np.ascontiguousarray(im0[..., ::-1]) if rgb else im0
                out.append(self._result(self.infer(self._letterbox(im0), im0), None))
            return out
        dataset = LoadImages([str(s) for s in source] if isinstance(source, (list, tuple)) else str(Path(source)),
                             img_size=self.imgsz, stride=self.stride, auto=self.auto)
        return [self._result(self.infer(im, im0), path) for path, im, im0, _, _ in dataset]

    __call__ = predict
