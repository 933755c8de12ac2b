"""Evaluation: the one validation loop of every task (val.py, segment/val.py, classify/val.py and training) and
detection's evaluator.

    evaluator.py   DetectionEvaluator (update per batch, compute: P, R, mAP50, mAP50-95, per class, the table,
                   curves and confusion matrix) and DetectionMetrics
    matching.py    one image's predictions against its labels in original pixels
    coco_json.py   --save-json: COCO results file and pycocotools' mAPs
    loop.py        validation_pass (the loop: per batch the task's steps and its evaluator's update) and
                   run_validation (detection and segmentation: plot helpers, figures, Speed line, COCO JSON, losses)
    detection_steps.py  DetectionSteps (to the device, forward in chunks when memory is short, loss, NMS, update)
    batch_memory.py     how many images of a batch run at once
    runner.py      validate_model (training's call), evaluator_for_dataset, speed_or_study (--task speed/study)
    from_weights.py     validate_weights: val.py's and segment/val.py's run from --weights and --data
"""
from utils.evaluation.coco_json import CocoPredictions, is_coco_dataset, save_one_json
from utils.evaluation.evaluator import IOU_THRESHOLDS, DetectionEvaluator, DetectionMetrics
from utils.evaluation.matching import labels_in_pixels, match_image
from utils.evaluation.runner import evaluator_for_dataset, model_names, run_validation, validate_model

__all__ = ["CocoPredictions", "is_coco_dataset", "save_one_json", "IOU_THRESHOLDS", "DetectionEvaluator",
           "DetectionMetrics", "labels_in_pixels", "match_image", "evaluator_for_dataset", "model_names",
           "run_validation", "validate_model"]
