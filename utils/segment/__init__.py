"""Instance segmentation pieces beside detection: polygon masks (masks.py), the polygon dataset (dataset.py), mask
metrics and the evaluator (metrics.py, evaluator.py)."""
