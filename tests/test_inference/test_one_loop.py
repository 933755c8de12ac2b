"""One predict loop and one validation loop for the three tasks: every predict script reaches
utils/inference/predict.py:predict_source with its task's writer, and every validation (val.py, segment/val.py,
classify/val.py and the trainers' calls) reaches utils/evaluation/loop.py:validation_pass with its task's steps. A
task that grew its own loop again would not reach them, and these tests would fail naming it."""
import importlib
import shutil
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from utils.backend import from_numpy, nn, torch

SQUARE = ((32, 32), ((1.0, 1.0), (0.0, 0.0)))  # a loader's shapes entry: original size, (gain, pad)


def _spy_everywhere(monkeypatch, module, name):
    """Replace module.name, and every imported module's reference to that same function, by a spy recording its
    arguments; returns the list of calls."""
    real, calls = getattr(module, name), []

    def spy(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    for mod in list(sys.modules.values()):
        if mod is not None and getattr(mod, name, None) is real:
            monkeypatch.setattr(mod, name, spy)
    return calls


# ---------------------------------------------------------------------------------------------------- prediction
@pytest.fixture
def one_image(coco128_dir, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(sorted((coco128_dir / "images" / "train2017").glob("*.jpg"))[0], src / "a.jpg")
    return src


def test_every_predict_script_runs_the_one_predict_loop(shared_dir, one_image, tmp_path, monkeypatch):
    scripts = {name: importlib.import_module(name) for name in ("detect", "segment.predict", "classify.predict")}
    import utils.inference.predict as predict
    calls = _spy_everywhere(monkeypatch, predict, "predict_source")
    weights = {"detect": "yolov5n.pt", "segment.predict": "yolov5n-seg-coco128.pt",
               "classify.predict": "yolov5n-cls-coco128cls.pt"}
    for name, script in scripts.items():
        save_dir = script.run(weights=shared_dir / "weights" / weights[name], source=one_image, imgsz=(64, 64),
                              save_txt=True, project=tmp_path, name=name)
        assert (save_dir / "a.jpg").is_file(), name  # the task's writer wrote the drawn image
    writers = [type(args[2]).__name__ for args in calls]
    assert writers == ["DetectionWriter", "SegmentationWriter", "ClassificationWriter"]


# ---------------------------------------------------------------------------------------------------- validation
class _Detector(nn.Module):
    """Eval-mode detection layout: (decoded (b, 1, 5 + nc + extra) with one confident box, raw maps)."""

    def __init__(self, extra=0, nc=2):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))
        row = np.zeros((1, 5 + nc + extra), np.float32)
        row[0, :5], row[0, 5] = (16, 16, 8, 8, 0.9), 1.0
        self.row, self.names = from_numpy(row), {0: "cat", 1: "dog"}

    def forward(self, im, augment=False):
        out = self.row[None].repeat(im.shape[0], 1, 1) + self.weight
        return out, [out]


class _Segmenter(_Detector):
    """(decoded with 32 mask coefficients, prototypes (b, 32, 8, 8), raw maps), as a Segment head in eval mode: the
    box's mask is the whole box (its first coefficient large, the first prototype all ones)."""

    def __init__(self):
        super().__init__(extra=32)
        self.row[0, 7] = 10.0

    def forward(self, im, augment=False):
        out, raw = super().forward(im)
        protos = torch.zeros((im.shape[0], 32, 8, 8))
        protos[:, 0] = 1.0
        return out, protos + self.weight, raw


class _Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 6)
        self.names = {i: str(i) for i in range(6)}

    def forward(self, x):
        return self.fc(x.mean((2, 3)))


def _boxes_batch(bs=2):
    targets = from_numpy(np.array([[i, 0, 0.5, 0.5, 0.25, 0.25] for i in range(bs)], np.float32))
    return torch.full((bs, 3, 32, 32), 128, dtype=torch.uint8), targets, [f"{i}.jpg" for i in range(bs)], [SQUARE] * bs


def test_every_validation_runs_the_one_validation_loop(tmp_path, monkeypatch):
    val, seg_val, cls_val = (importlib.import_module(m) for m in ("val", "segment.val", "classify.val"))
    from utils.classify.evaluate import evaluate_classifier
    import utils.evaluation.loop as loop
    calls = _spy_everywhere(monkeypatch, loop, "validation_pass")
    data = {"nc": 2, "names": {0: "cat", 1: "dog"}}

    (_, _, map50, *_), _, _ = val.run(data=data, model=_Detector(), dataloader=[_boxes_batch()], plots=False,
                                      save_dir=tmp_path)
    assert map50 == pytest.approx(0.995)  # the box is each image's label

    im, targets, paths, shapes = _boxes_batch()
    masks = torch.zeros((2, 32, 32), dtype=torch.uint8)  # one per instance: the label's box
    masks[:, 12:20, 12:20] = 1
    results, _, _ = seg_val.run(data=data, model=_Segmenter(), dataloader=[(im, targets, paths, shapes, masks)],
                                plots=False, save_dir=tmp_path)
    assert results[2] == pytest.approx(0.995) and results[6] == pytest.approx(0.995)  # box and mask mAP50

    images, labels = torch.rand((4, 3, 8, 8)), torch.tensor([0, 1, 2, 3])
    cls_loader = _Loader([(images, labels)], root=tmp_path / "val")
    top1, top5, _ = cls_val.run(model=_Classifier(), dataloader=cls_loader)
    assert 0 <= top1 <= top5 <= 1
    (t1, t5, _), per_class = evaluate_classifier(_Classifier(), [((images * 255).to(torch.uint8), labels)])
    assert per_class.shape == (6,)

    steps = [type(args[2]).__name__ for args in calls]
    assert steps == ["DetectionSteps", "SegmentationSteps", "ClassificationSteps", "ClassificationSteps"]


class _Loader(list):
    """A list of batches with the .dataset.root that classify/val.py names its progress bar after."""

    def __init__(self, batches, root):
        super().__init__(batches)
        self.dataset = SimpleNamespace(root=root)
