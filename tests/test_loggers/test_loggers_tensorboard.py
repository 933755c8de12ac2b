"""TensorBoard as official YOLOv5 writes it: the 13 scalars per epoch, the model graph traced once, the six result
images at the end. Driven in-process through Loggers with the real yolov5n model and a fake run folder; the event
file is read back with tensorboard's own EventAccumulator."""
import logging

import cv2
import numpy as np
import pytest

from utils.backend import BACKEND

pytest.importorskip("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from utils.loggers import KEYS, RESULT_IMAGES, Loggers  # noqa: E402
from utils.loggers.options import LogOptions  # noqa: E402


def run_opt(**kw):
    o = dict(project="runs/train", name="exp", entity=None, upload_dataset=False, bbox_interval=-1,
             artifact_alias="latest", epochs=2, save_period=-1, exist_ok=False, resume=False, evolve=False,
             noplots=False, sync_bn=False, data="data/coco128.yaml")
    o.update(kw)
    return LogOptions.of(o)  # the loggers' options of a run with these flags


def read_events(folder):
    ea = EventAccumulator(str(folder), size_guidance={"images": 0, "scalars": 0})
    ea.Reload()
    return ea


def fake_results(save_dir):
    """The six plots official's on_train_end sends to TensorBoard, as files of distinct sizes."""
    for i, name in enumerate(RESULT_IMAGES):
        cv2.imwrite(str(save_dir / name), np.full((20 + i, 30, 3), 40 * i, np.uint8))


def test_scalars_graph_and_result_images(tmp_path, caplog):
    from models.yolo import Model
    lg = Loggers(tmp_path, run_opt(), {"lr0": 0.01}, include=("csv", "tb"))
    model = Model("models/yolov5n.yaml", nc=3).train()
    bn = next(m for m in model.modules() if "BatchNorm" in type(m).__name__)
    mean_before = bn.running_mean.clone()
    with caplog.at_level(logging.INFO, logger="yolov5"):
        lg.on_train_start(model, 64)
    assert model.training and bool((bn.running_mean == mean_before).all())  # traced without touching the model
    rows = [np.arange(13) * 0.1 + epoch for epoch in range(2)]
    for epoch, vals in enumerate(rows):
        lg.on_fit_epoch_end(list(vals), epoch, best_fitness=0.5, fi=0.5)
    fake_results(tmp_path)
    lg.on_run_end(tmp_path / "weights" / "last.pt", tmp_path / "weights" / "best.pt", 1, [0.1] * 7)

    ea = read_events(tmp_path)
    tags = ea.Tags()
    assert sorted(tags["scalars"]) == sorted(KEYS)
    for i, k in enumerate(KEYS):
        assert [(s.step, round(s.value, 5)) for s in ea.Scalars(k)] == [(e, round(rows[e][i], 5)) for e in range(2)]
    assert sorted(tags["images"]) == sorted(n[:-4] for n in RESULT_IMAGES)  # by file stem, as official
    img = ea.Images("confusion_matrix")[0]
    assert (img.width, img.height, img.step) == (30, 21, 1)
    if BACKEND == "torch":
        assert tags["graph"]
        ops = {n.op for n in ea.Graph().node}
        assert any("conv" in op.lower() for op in ops) and len(ea.Graph().node) > 100
    else:  # OneFlow has no tracer: one line says so, the rest is written
        assert not tags["graph"]
        assert sum("no model graph" in r.getMessage() for r in caplog.records) == 1


def test_record_checksums_in_c_give_tensorboards_values():
    """The C checksums (google-crc32c, when installed with its C implementation) replace tensorboard's pure-Python
    ones in the record writer: the same masked CRC32C for every length (the reader checks each record's two)."""
    google_crc32c = pytest.importorskip("google_crc32c")
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as pure_python
    from tensorboard.summary.writer import record_writer

    from utils.loggers.tensorboard import _c_record_checksums
    assert _c_record_checksums() == (google_crc32c.implementation == "c")
    if google_crc32c.implementation == "c":
        assert record_writer.masked_crc32c is not pure_python
    rng = np.random.default_rng(0)
    for data in (b"", b"a", bytes(range(256)) * 41, rng.bytes(100_003), (12345).to_bytes(8, "little")):
        assert record_writer.masked_crc32c(data) == pure_python(data)


def test_noplots_and_sync_bn_skip_the_graph(tmp_path):
    from tests.helpers.engine_helpers import tiny_model
    for i, opt in enumerate((run_opt(sync_bn=True), run_opt(noplots=True))):
        d = tmp_path / str(i)
        d.mkdir()
        lg = Loggers(d, opt, {}, include=("csv", "tb"))
        lg.on_train_start(tiny_model(), 8, plots=not opt.flags["noplots"])
        lg.on_fit_epoch_end([0.0] * 13, 0)
        lg.close()
        tags = read_events(d).Tags()
        assert not tags["graph"] and len(tags["scalars"]) == 13


def test_without_tensorboard_one_line_and_the_csv(tmp_path, monkeypatch, caplog):
    from utils.loggers import tensorboard
    monkeypatch.setattr(tensorboard, "available", lambda: False)
    with caplog.at_level(logging.INFO, logger="yolov5"):
        lg = Loggers(tmp_path, run_opt(), {}, include=("csv", "tb"))
        lg.on_fit_epoch_end([0.0] * 13, 0)
        lg.on_run_end(tmp_path / "last.pt", tmp_path / "best.pt", 0, [0.0] * 7)
    assert [r.getMessage() for r in caplog.records if "pip install tensorboard" in r.getMessage()]
    assert not list(tmp_path.glob("events.out.tfevents*")) and (tmp_path / "results.csv").exists()


def test_evolve_writes_no_events(tmp_path):
    Loggers(tmp_path, run_opt(evolve=True), {}, include=("csv", "tb")).close()
    assert not list(tmp_path.glob("events.out.tfevents*"))


def test_image_files_keep_their_pixels(tmp_path):
    """A PNG (RGB or RGBA, as matplotlib writes) is stored as its own bytes with its size and channels; a JPEG is
    decoded and stored as PNG; a file that is neither is refused."""
    from utils.loggers.tensorboard import EventWriter
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 255, (21, 30, 3), dtype=np.uint8)
    rgba = np.dstack([rgb, np.full((21, 30), 255, np.uint8)])
    cv2.imwrite(str(tmp_path / "rgb.png"), rgb)
    cv2.imwrite(str(tmp_path / "rgba.png"), rgba)
    cv2.imwrite(str(tmp_path / "photo.jpg"), rgb)
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)
    w = EventWriter(tmp_path / "tb")
    for name in ("rgb.png", "rgba.png", "photo.jpg"):
        w.add_image_file(tmp_path / name, 0)
    with pytest.raises(ValueError, match="broken.png"):
        w.add_image_file(tmp_path / "broken.png", 0)
    w.close()
    ea = read_events(tmp_path / "tb")
    for stem, channels in (("rgb", 3), ("rgba", 4), ("photo", 3)):
        img = ea.Images(stem)[0]
        assert (img.width, img.height) == (30, 21)
        decoded = cv2.imdecode(np.frombuffer(img.encoded_image_string, np.uint8), cv2.IMREAD_UNCHANGED)
        assert decoded.shape[2] == channels
        if stem != "photo":
            assert img.encoded_image_string == (tmp_path / f"{stem}.png").read_bytes()
            assert np.array_equal(decoded[..., :3], rgb)
