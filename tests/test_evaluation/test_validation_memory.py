"""Validation within the memory it has: the chunking decision as a pure function of the headroom, the activation
probe, chunked forward passes giving the batch's own outputs, detections and figures (a real yolov5n on coco128
images), and the plot helpers forked before the first batch grows the heap."""
import math

import numpy as np
import pytest

from utils.backend import nn, torch
from utils.evaluation import batch_memory, evaluator_for_dataset, run_validation
from utils.evaluation.batch_memory import (ForwardBudget, activation_bytes_per_pixel, forward_chunk_size,
                                           forward_in_chunks)
from utils.memory_limits import MemoryLimit
from utils.nms import non_max_suppression
from utils.plot_jobs import PlotJobs

MB = 1 << 20


def test_chunk_size_is_the_batch_while_memory_is_plentiful_or_unknown():
    assert forward_chunk_size(32, 60 * MB, 20_000 * MB) == 32
    assert forward_chunk_size(32, 60 * MB, None) == 32
    assert forward_chunk_size(32, 0, 100 * MB) == 32  # nothing measured: nothing to decide on
    assert forward_chunk_size(32, 60 * MB, 2 * 32 * 60 * MB) == 32  # exactly fits half the headroom


def test_chunk_size_shrinks_with_the_headroom_down_to_one_image():
    assert forward_chunk_size(32, 60 * MB, 2 * 32 * 60 * MB - 1) == 31
    assert forward_chunk_size(32, 100 * MB, 1600 * MB) == 8  # half of 1.6 GB at 100 MB an image
    assert forward_chunk_size(32, 100 * MB, 1600 * MB, share=0.25) == 4
    assert forward_chunk_size(32, 100 * MB, 10 * MB) == 1  # never 0: the batch still runs, one image at a time
    sizes = [forward_chunk_size(16, 50 * MB, a * MB) for a in range(0, 2000, 50)]
    assert sizes == sorted(sizes) and all(1 <= s <= 16 for s in sizes)  # more headroom never gives smaller chunks


def test_probe_counts_each_leaf_output_per_pixel():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.SiLU(), nn.Conv2d(8, 4, 1))
    # 64x64 probe: conv 8x32x32, SiLU 8x32x32, conv 4x32x32 float32 values
    expected = (8 + 8 + 4) * 32 * 32 * 4 / (64 * 64)
    assert activation_bytes_per_pixel(model) == pytest.approx(expected)
    x = torch.zeros((1, 3, 64, 64))
    model(x)  # the hooks are gone: a later forward counts nothing
    assert activation_bytes_per_pixel(model) == pytest.approx(expected)


def test_budget_probes_once_and_asks_the_headroom_each_batch():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1))
    calls = []
    # unknown, plenty (no probe needed), enough for the probed need, room for 2 images at half the headroom
    headroom = iter([None, 10**12, 2 * 8 * 64 * 64 * 32, 8 * 64 * 64 * 4 * 4])

    def available():
        calls.append(1)
        a = next(headroom)
        return None if a is None else MemoryLimit(a, "test")

    budget = ForwardBudget(model, available)
    im = torch.zeros((8, 3, 64, 64))
    assert budget.chunk_size(im) == 8 and budget.bytes_per_pixel is None  # no headroom figure: no probe
    assert budget.chunk_size(im) == 8 and budget.bytes_per_pixel is None  # room for any model: no probe
    assert budget.chunk_size(im) == 8 and budget.bytes_per_pixel == 32.0  # 8 channels x 4 bytes
    assert budget.chunk_size(im) == 2
    assert len(calls) == 4
    assert budget.chunk_size(im[:1]) == 1  # one image: nothing to decide, no headroom read
    assert len(calls) == 4


def test_forward_in_chunks_assembles_nested_outputs_in_order():
    class TwoOutputs(nn.Module):
        def forward(self, x):
            return x * 2, [x + 1, x.sum((1, 2, 3))], None

    im = torch.arange(5 * 3 * 2 * 2, dtype=torch.float32).reshape(5, 3, 2, 2)
    whole = TwoOutputs()(im)
    for chunk in (1, 2, 3, 5):
        part = forward_in_chunks(TwoOutputs(), im, chunk)
        assert torch.equal(part[0], whole[0]) and part[2] is None
        assert all(torch.equal(a, b) for a, b in zip(part[1], whole[1]))
        kept = forward_in_chunks(TwoOutputs(), im, chunk, keep=1)
        assert len(kept) == 1 and torch.equal(kept[0], whole[0])


@pytest.fixture(scope="module")
def yolov5n_and_batch(yolov5n_pt, coco128_dir):
    """The official yolov5n (fused, eval) and 6 coco128 images letterboxed to 192x256 with their labels."""
    from utils.backend import select_device
    from utils.data.loader import create_dataloader
    from utils.inference import load_model
    model, _ = load_model(str(yolov5n_pt), device=select_device("cpu"), imgsz=256)
    model.eval()
    loader = create_dataloader(str(coco128_dir / "images" / "train2017"), 256, 6, model.stride, pad=0.5, rect=True,
                               workers=0)[0]
    return model, next(iter(loader))


def _nms(prediction, *args, **kwargs):  # no time limit: a loaded machine must not cut images from one side only
    return non_max_suppression(prediction, *args, time_limit=math.inf, **kwargs)


def _validate(model, batch, chunk_headroom, tmp_path, monkeypatch):
    monkeypatch.setattr(batch_memory, "memory_available", lambda: chunk_headroom)
    data = {"nc": 80, "names": {i: str(i) for i in range(80)}}
    ev = evaluator_for_dataset(data, model.names, tmp_path, plots=False)
    return run_validation(model, [batch], ev, postprocess=_nms)[:2]


@pytest.mark.oneflow_covered_by(
    "tests/test_evaluation/test_validation_memory.py::test_segmentation_validation_chunks_with_the_same_figures")
def test_chunked_validation_gives_the_whole_batch_detections_and_figures(yolov5n_and_batch, tmp_path, monkeypatch):
    model, (im, targets, paths, shapes) = yolov5n_and_batch
    x = im.float() / 255
    with torch.no_grad():
        whole = _nms(model(x), 0.001, 0.6, multi_label=True)
        assert sum(len(a) for a in whole) > 100
        for chunk in (1, 4):
            part = _nms(forward_in_chunks(model, x, chunk, keep=1), 0.001, 0.6, multi_label=True)
            for a, b in zip(whole, part):
                a, b = a.numpy(), b.numpy()
                assert a.shape == b.shape
                np.testing.assert_array_equal(a[:, 5], b[:, 5])  # the same classes in the same order
                np.testing.assert_allclose(a[:, :5], b[:, :5], rtol=1e-5, atol=1e-4)  # boxes, conf: float rounding

    plenty = _validate(model, (im, targets, paths, shapes), None, tmp_path, monkeypatch)
    budget_calls = []
    original = ForwardBudget.chunk_size

    def spy(self, batch_im):
        budget_calls.append(original(self, batch_im))
        return budget_calls[-1]

    monkeypatch.setattr(ForwardBudget, "chunk_size", spy)
    tight = _validate(model, (im, targets, paths, shapes), MemoryLimit(1 * MB, "test"), tmp_path, monkeypatch)
    assert budget_calls == [1]  # 1 MB of headroom: one image at a time
    assert plenty[0][2] > 0.1  # a real validation (yolov5n finds things in coco128 at 256)
    # The convolution kernels may differ with the batch size (1e-8 relative), so the figures agree to rounding:
    # P and R are read at a confidence, which moves by that much; mAPs count matches, which do not move.
    np.testing.assert_allclose(np.asarray(plenty[0]), np.asarray(tight[0]), rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(np.asarray(plenty[0])[2:4], np.asarray(tight[0])[2:4])  # mAP50, mAP50-95
    np.testing.assert_allclose(plenty[1], tight[1], rtol=1e-6, atol=1e-9)  # per-class mAPs


def test_plot_helpers_start_before_the_first_batch(monkeypatch, tmp_path):
    started = []
    real_start = PlotJobs.start

    def start(self):
        started.append(self.processes)
        real_start(self)

    monkeypatch.setattr(PlotJobs, "start", start)

    class Probe(nn.Module):  # records whether the helpers were started when the first batch ran
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(1))  # where run_validation reads the device from

        def forward(self, x):
            assert started, "the plot helpers were not started before the model ran"
            return torch.zeros((x.shape[0], 0, 85)), None

    data = {"nc": 80, "names": {i: str(i) for i in range(80)}}
    ev = evaluator_for_dataset(data, {}, tmp_path, plots=True)
    batch = (torch.zeros((2, 3, 64, 64), dtype=torch.uint8), torch.zeros((0, 6)), ["a.jpg", "b.jpg"],
             [((64, 64), ((1.0, 1.0), (0.0, 0.0)))] * 2)
    run_validation(Probe(), [batch], ev)
    assert started


def test_segmentation_validation_chunks_with_the_same_figures(shared_dir, tmp_path, monkeypatch):
    """segment/val.py's loop runs the batch in chunks when the headroom is small (1 MB here: one image at a time),
    with the whole batch's box and mask figures (to float rounding; mAPs exact)."""
    import importlib
    seg_val = importlib.import_module("segment.val")
    seg = shared_dir / "data" / "coco128-seg"
    images = sorted((seg / "images" / "train2017").glob("*.jpg"))[:6]
    (tmp_path / "val.txt").write_text("".join(f"{p}\n" for p in images))
    names = {i: str(i) for i in range(80)}
    (tmp_path / "seg.yaml").write_text(f"train: {tmp_path / 'val.txt'}\nval: {tmp_path / 'val.txt'}\nnames: {names}\n")
    monkeypatch.setattr("utils.segment.validation.non_max_suppression",
                        lambda *a, **k: non_max_suppression(*a, **{**k, "time_limit": math.inf}))

    def validate(headroom, name):
        monkeypatch.setattr(batch_memory, "memory_available", lambda: headroom)
        return seg_val.run(data=str(tmp_path / "seg.yaml"), weights=str(shared_dir / "weights" /
                                                                         "yolov5n-seg-coco128.pt"),
                           batch_size=6, imgsz=160, device="cpu", workers=0, plots=False, project=tmp_path, name=name)

    chunks = []
    original = ForwardBudget.chunk_size
    monkeypatch.setattr(ForwardBudget, "chunk_size", lambda self, im: chunks.append(original(self, im)) or chunks[-1])
    plenty = validate(None, "plenty")
    tight = validate(MemoryLimit(1 * MB, "test"), "tight")
    assert chunks == [6, 1]  # the whole batch, then one image at a time
    assert plenty[0][2] > 0.05 and plenty[0][6] > 0.05  # box and mask mAP50: a real validation
    np.testing.assert_allclose(np.asarray(plenty[0][:8]), np.asarray(tight[0][:8]), rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(np.asarray(plenty[0])[[2, 3, 6, 7]], np.asarray(tight[0])[[2, 3, 6, 7]])
