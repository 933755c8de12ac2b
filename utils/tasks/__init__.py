"""Tasks: what differs between detection, segmentation and classification, as one small plug-in object each.

The engine (utils/engine/), the validation loop (utils/evaluation/runner.py), the inference loader
(utils/inference/loading.py) and the checkpoint readers take a :class:`Task` and call only what it names; detection
(utils/tasks/detect.py, ``DETECT``) is today's only task and every default. A segmentation or classification task
lands as a new module here filling the same fields, not as a copy of train.py.
"""
from utils.tasks.task import Task

__all__ = ["Task"]
