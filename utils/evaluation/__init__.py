"""Evaluation of detection models: one evaluator and one validation loop, used by val.py and by training.

    evaluator.py   DetectionEvaluator (update per batch, compute: P, R, mAP50, mAP50-95, per class, the table,
                   curves and confusion matrix) and DetectionMetrics
    matching.py    one image's predictions against its labels in original pixels
    coco_json.py   --save-json: COCO results file and pycocotools' mAPs
    runner.py      run_validation (the loop: pre-process, model, NMS, evaluator) and validate_model (training's call)
"""
from utils.evaluation.coco_json import CocoPredictions, is_coco_dataset, save_one_json
from utils.evaluation.evaluator import IOU_THRESHOLDS, DetectionEvaluator, DetectionMetrics
from utils.evaluation.matching import labels_in_pixels, match_image
from utils.evaluation.runner import evaluator_for_dataset, model_names, run_validation, validate_model

__all__ = ["CocoPredictions", "is_coco_dataset", "save_one_json", "IOU_THRESHOLDS", "DetectionEvaluator",
           "DetectionMetrics", "labels_in_pixels", "match_image", "evaluator_for_dataset", "model_names",
           "run_validation", "validate_model"]
