"""Small Python inference API and the per-image steps detect.py shares with it.

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
"""
from pathlib import Path

import numpy as np

from utils.backend import from_numpy, inference_mode, select_device, to_numpy
from utils.general import check_img_size, non_max_suppression, scale_boxes


def preprocess(im, device, half=False):
    """Letterboxed CHW RGB uint8 numpy -> (1, 3, H, W) float tensor in [0, 1] on device."""
    x = from_numpy(im).to(device)
    x = x.half() if half else x.float()
    x /= 255
    return x[None] if x.ndim == 3 else x


def to_original(det, input_hw, im0_shape):
    """Detections (n, 6) tensor on the letterboxed input -> numpy float32 rows in original pixels (clipped)."""
    det = to_numpy(det).astype(np.float32)
    if len(det):
        scale_boxes(input_hw, det[:, :4], im0_shape)
    return det


class Detector:
    """DetectMultiBackend + letterbox + model + NMS + rescale, for scripts that want boxes without detect.py's files.
    weights: any format DetectMultiBackend runs (.pt, .torchscript, .onnx, *_openvino_model)."""

    def __init__(self, weights, device="", imgsz=640, conf_thres=0.25, iou_thres=0.45, max_det=1000, classes=None,
                 agnostic=False, augment=False, half=False, dnn=False, data=None):
        from models.multibackend import DetectMultiBackend
        self.device = select_device(device)
        self.model = DetectMultiBackend(weights, device=self.device, dnn=dnn, data=data, fp16=half)
        self.half, self.stride, self.names = self.model.fp16, self.model.stride, self.model.names
        self.imgsz = check_img_size(imgsz, s=self.stride)
        self.auto = self.model.pt  # exported models take the one square size they were exported at
        self.conf_thres, self.iou_thres, self.max_det = conf_thres, iou_thres, max_det
        self.classes, self.agnostic, self.augment = classes, agnostic, augment

    def _letterbox(self, im0):
        from utils.augmentations import letterbox
        im = letterbox(im0, self.imgsz, stride=self.stride, auto=self.auto)[0]
        return np.ascontiguousarray(im.transpose((2, 0, 1))[::-1])  # HWC BGR -> CHW RGB

    @inference_mode()
    def infer(self, im, im0):
        """One letterboxed CHW RGB image and its original BGR image -> (n, 6) numpy [xyxy, conf, cls] in im0 pixels."""
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
        from utils.dataloaders import LoadImages
        dataset = LoadImages([str(s) for s in source] if isinstance(source, (list, tuple)) else str(Path(source)),
                             img_size=self.imgsz, stride=self.stride, auto=self.auto)
        return [self._result(self.infer(im, im0), path) for path, im, im0, _, _ in dataset]

    __call__ = predict
