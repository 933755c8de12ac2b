"""Inference: one model loader, the per-image steps every path shares, and what is built on them.

    loading.py     load_model: DetectMultiBackend (any format, device, fp16, stride, names) + image size check
    steps.py       preprocess (uint8 -> float in [0, 1]) and to_original (boxes back to original pixels);
                   non-maximum suppression between them is utils.nms.non_max_suppression
    profile.py     Profile: stage timers for the Speed lines
    label_txt.py   label_lines, RunLabelFiles: the --save-txt label files of val.py and detect.py (--save-format),
                   each written whole
    detector.py    Detector: the small Python API (boxes from paths or arrays)
    sources.py, outputs.py   the predict scripts' source readers and output files
    predict.py     predict_source: the one predict loop of detect.py, segment/predict.py and classify/predict.py
    detect_writer.py, classify_writer.py   each task's steps and outputs in that loop (segmentation's, with the
                   mask maths: utils/segment/predict_writer.py)
    format_loader.py   DetectMultiBackend: one loader for every export format (models.common hands it out too)
    autoshape.py       AutoShape, Detections: what torch.hub (hubconf.py) returns, images in as users hold them

Used by detect.py, val.py (utils/evaluation), hubconf.py (torch.hub) and Detector.
"""
from utils.inference.detector import Detector
from utils.inference.label_txt import RunLabelFiles, check_save_format, label_lines
from utils.inference.loading import load_model
from utils.inference.profile import Profile, ms_per_image
from utils.inference.steps import preprocess, to_original

__all__ = ["Detector", "RunLabelFiles", "check_save_format", "label_lines", "load_model", "Profile", "ms_per_image",
           "preprocess", "to_original"]
