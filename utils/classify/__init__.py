"""Image classification pieces: the ImageFolder dataset and its transforms (dataset.py), top-k accuracy
(metrics.py)."""
