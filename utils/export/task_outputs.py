"""Which YOLOv5 task an exported model does, told by its outputs as every runtime reports them, and the one line
for a model given to another task's script. Exports carry only the official metadata (stride, names), so the
outputs are the mark, for official exports as for this project's:

    detection       one output  (batch, anchors, 5 + nc)                      'output0'
    segmentation    two outputs (batch, anchors, 5 + nc + nm), (batch, nm, h/4, w/4)   'output0', 'output1'
    classification  one output  (batch, nc)                                   'output0'
No framework import."""
from utils.errors import UserError

TASKS = ("detect", "segment", "classify")
_WHAT = {"detect": "detection", "segment": "segmentation", "classify": "classification"}
_SCRIPTS = {"detect": "val.py or detect.py", "segment": "segment/val.py or segment/predict.py",
            "classify": "classify/val.py or classify/predict.py"}
# export.py writes these for every task; the converters' formats (TensorFlow, CoreML, Paddle, NCNN) take detection
TASK_FORMATS = ("torchscript", "onnx", "openvino")
# ONNX output names, as official export.py names them
ONNX_OUTPUTS = {"detect": ["output0"], "segment": ["output0", "output1"], "classify": ["output0"]}


class WrongTaskError(UserError):
    pass


def task_from_ranks(ranks):
    """The task of a model whose outputs have these ranks (None where a runtime does not say): two outputs are
    segmentation's predictions and prototypes, one output of rank 2 is a classifier's logits, else detection."""
    ranks = list(ranks)
    if len(ranks) == 2 and ranks[1] in (4, None):
        return "segment"
    if len(ranks) == 1 and ranks[0] == 2:
        return "classify"
    return "detect"


def task_name(task):
    return _WHAT[task]


def check_task(weights, found, expected):
    """One line when a model of one task is given to another task's script, naming the scripts that run it."""
    if found != expected:
        raise WrongTaskError(f"--weights {weights} is a YOLOv5 {_WHAT[found]} model, not a {_WHAT[expected]} model: "
                             f"run it with {_SCRIPTS[found]}")


def scripts_for(task):
    """(directory of the task's scripts, its predict script's name) as official export.py prints them."""
    return {"detect": ("", "detect.py"), "segment": ("segment/", "predict.py"),
            "classify": ("classify/", "predict.py")}[task]
