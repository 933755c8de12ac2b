"""Segmentation and classification checkpoints both ways: the official files (../shared/weights, written by the
official trainer; SEG_CLS.md) are read as data and rebuilt, this project's are written in the official format.

What the official files pickle beyond detection is taken as data, never run: `getattr(models.yolo.Detect,
'forward')` (Segment.detect), torchvision Compose/Normalize and utils.augmentations CenterCrop/ToTensor (the
classifier's transforms), pathlib.PosixPath."""
import io
import os
import subprocess
from copy import deepcopy
from pathlib import Path

import numpy as np
import pytest

from utils.backend import from_numpy, to_numpy, torch
from utils.checkpoint import CheckpointError, Half, read_official_pt, save_checkpoint
from utils.checkpoint.pickle_values import StubAttribute
from utils.checkpoint.unpickler import RestrictedUnpickler

ROOT = Path(__file__).resolve().parents[2]
REF = Path(os.environ.get("YOLO_REF_DIR", ROOT.parent / "ref" / "yolov5"))
REF_PY = REF.parent / "venv" / "bin" / "python"
CLS_NAMES = ["bowl", "carrot", "chair", "cup", "donut", "elephant", "person", "potted_plant", "teddy_bear", "umbrella"]


@pytest.fixture(scope="module")
def seg_pt(shared_dir):
    return shared_dir / "weights" / "yolov5n-seg-coco128.pt"


@pytest.fixture(scope="module")
def cls_pt(shared_dir):
    return shared_dir / "weights" / "yolov5n-cls-coco128cls.pt"


def _load(path, fuse=True):
    from models.experimental import attempt_load
    return attempt_load(path, fuse=fuse)


def test_official_seg_file_read_as_data(seg_pt):
    ck = read_official_pt(seg_pt)
    rec = ck["model"]
    assert rec["class"] == "models.yolo.SegmentationModel" and ck["epoch"] == -1
    assert len(rec["state_dict"]) == 367 and rec["state_dict"]["model.24.proto.cv3.conv.weight"].dtype == np.float16
    assert len(rec["names"]) == 80 and rec["stride"].tolist() == [8, 16, 32]
    assert rec["yaml"]["head"][-1][2] == "Segment"


def test_official_cls_file_read_as_data(cls_pt):
    ck = read_official_pt(cls_pt)
    rec = ck["model"]
    assert rec["class"] == "models.yolo.ClassificationModel" and ck["epoch"] == 8
    assert rec["names"] == CLS_NAMES and rec["nc"] == 10 and len(rec["state_dict"]) == 194
    assert rec["module_tree"]["children"]["model"]["children"]["9"]["class"] == "models.common.Classify"
    assert isinstance(ck["opt"]["save_dir"], Path)  # pathlib.PosixPath


def test_segment_detect_attribute_is_a_name_not_code(seg_pt):
    from utils.checkpoint.torch_reader import read_pytorch_file
    head = vars(vars(vars(read_pytorch_file(seg_pt)["model"])["_modules"]["model"])["_modules"]["24"])
    assert isinstance(head["detect"], StubAttribute) and head["detect"].path == "models.yolo.Detect.forward"


@pytest.mark.parametrize("payload", [
    b"\x80\x02c__builtin__\ngetattr\nc__builtin__\nset\nX\x08\x00\x00\x00__init__\x86R.",  # getattr(set, '__init__')
    b"\x80\x02c__builtin__\ngetattr\ncmodels.yolo\nDetect\nX\x08\x00\x00\x00__dict__\x86R.",  # a private name
    b"\x80\x02ctorchvision.transforms.transforms\nLambda\n.",  # only Compose/Normalize are data
])
def test_getattr_and_transforms_stay_restricted(payload):
    with pytest.raises(CheckpointError, match="refusing"):
        RestrictedUnpickler(io.BytesIO(payload), None, "crafted.pt").load()


def test_official_seg_checkpoint_rebuilt(seg_pt):
    model = _load(seg_pt)
    assert type(model).__name__ == "SegmentationModel" and len(model.names) == 80
    assert sum(p.numel() for p in model.parameters()) == 1986637  # fused, as SEG_CLS.md's val summary
    with torch.no_grad():
        pred, protos, _ = model(torch.zeros(1, 3, 64, 96))
    assert tuple(pred.shape) == (1, 3 * (96 + 24 + 6), 117) and tuple(protos.shape) == (1, 32, 16, 24)


def test_official_cls_checkpoint_rebuilt(cls_pt):
    model = _load(cls_pt)
    assert type(model).__name__ == "ClassificationModel"
    assert list(model.names.values()) == CLS_NAMES and model.nc == 10
    assert sum(p.numel() for p in model.parameters()) == 1221274  # fused, as SEG_CLS.md's val summary
    with torch.no_grad():
        assert tuple(model(torch.zeros(2, 3, 64, 64)).shape) == (2, 10)


def _write_ours(tmp_path, shared_dir):
    from models.experimental import attempt_load
    from models.tasks import ClassificationModel, SegmentationModel
    torch.manual_seed(0)
    seg = SegmentationModel("yolov5n-seg.yaml", nc=3)
    seg.names = {0: "a", 1: "b", 2: "c"}
    cls = ClassificationModel(model=attempt_load(shared_dir / "weights" / "yolov5n.pt", fuse=False),
                              nc=4, cutoff=10)
    cls.names = ["w", "x", "y", "z"]
    x = from_numpy(np.random.default_rng(1).random((2, 3, 96, 64), dtype=np.float32))
    outs = {}
    for name, m in (("seg", seg), ("cls", cls)):
        m.eval()
        save_checkpoint({"epoch": -1, "best_fitness": None, "model": Half(deepcopy(m)), "ema": None, "updates": None,
                         "optimizer": None, "opt": {}, "date": None}, tmp_path / f"{name}.pt")
        with torch.no_grad():
            y = m.half().float()(x)  # the weights as the fp16 file holds them
        outs[name] = to_numpy(y[0] if name == "seg" else y)
    np.savez(tmp_path / "ours.npz", **outs)
    return x, outs


def test_own_seg_cls_checkpoints_round_trip(tmp_path, shared_dir):
    x, outs = _write_ours(tmp_path, shared_dir)
    for name in ("seg", "cls"):
        m = _load(tmp_path / f"{name}.pt")
        assert type(m).__name__ == {"seg": "SegmentationModel", "cls": "ClassificationModel"}[name]
        with torch.no_grad():
            y = m(x)
        y = to_numpy(y[0] if name == "seg" else y)
        assert np.abs(y - outs[name]).max() <= 1e-3 * max(1.0, np.abs(outs[name]).max())


_OFFICIAL_READER = """
import sys, numpy as np, torch
sys.path.insert(0, '.')
from models.experimental import attempt_load
d = sys.argv[1]
x = torch.from_numpy(np.random.default_rng(1).random((2, 3, 96, 64), dtype=np.float32))
ours = np.load(d + '/ours.npz')
for name in ('seg', 'cls'):
    m = attempt_load(d + '/' + name + '.pt', device='cpu')
    with torch.no_grad():
        y = m(x)
    y = (y[0] if name == 'seg' else y).numpy()
    print('RESULT', name, type(m).__name__, float(np.abs(y - ours[name]).max() / max(1.0, np.abs(ours[name]).max())))
"""


@pytest.mark.slow
def test_official_code_reads_own_seg_cls_checkpoints(tmp_path, shared_dir):
    if not (REF / "models" / "yolo.py").is_file() or not REF_PY.is_file():
        pytest.skip(f"no official checkout and venv at {REF}")
    _write_ours(tmp_path, shared_dir)
    p = subprocess.run([str(REF_PY), "-c", _OFFICIAL_READER, str(tmp_path)], cwd=REF, capture_output=True,
                       text=True, timeout=300)
    lines = [ln.split() for ln in p.stdout.splitlines() if ln.startswith("RESULT")]
    assert len(lines) == 2, p.stdout + p.stderr
    assert [ln[2] for ln in lines] == ["SegmentationModel", "ClassificationModel"]
    assert all(float(ln[3]) < 1e-4 for ln in lines), lines
