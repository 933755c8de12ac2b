"""Instance segmentation pieces beside detection: polygon masks (masks.py), the polygon dataset (dataset.py), the mask
evaluator (evaluator.py, validation.py), the loss (loss.py) and the mask plots (plots.py).

general.py, dataloaders.py, metrics.py and augmentations.py are ultralytics' import paths kept for users' scripts
(thin facades over the modules above and utils/metrics.py, utils/augmentations.py); no library module imports them."""
