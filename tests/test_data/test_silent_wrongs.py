"""Nothing wrong is silent in detection and segmentation training data: a box row in a polygon label file is a box,
degenerate labels are dropped with one warning naming the file, AutoAnchor never installs a NaN or 0-pixel anchor,
--cache disk deletes only its own files and survives a damaged one in the mosaic path, and --resume refuses a
changed class list in one line and takes the official trainer's own saved options."""
import logging
import random
import shutil
import socket
import types
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from tests.helpers.train_helpers import ROOT, run_train
from utils import backend
from utils.data.labels import verify_image_label


def _pair(tmp_path, rows, name="a", w=200, h=100):
    im, lb = tmp_path / f"{name}.jpg", tmp_path / f"{name}.txt"
    cv2.imwrite(str(im), np.full((h, w, 3), 100, np.uint8))
    lb.write_text("".join(r + "\n" for r in rows))
    return str(im), str(lb)


# ---- label rows ------------------------------------------------------------------------------------------------
def test_box_row_in_a_polygon_file_is_its_rectangle_not_a_two_point_polygon(tmp_path):
    """Official reads every row of a polygon file as a polygon: '1 0.5 0.5 0.2 0.4' becomes the 2-point polygon
    (0.5, 0.5)-(0.2, 0.4), whose box is x 0.35 y 0.45 w 0.3 h 0.1. Here the row keeps its box and gets its rectangle
    as polygon, and the file is named in one warning."""
    im, lb = _pair(tmp_path, ["0 0.1 0.1 0.5 0.1 0.5 0.4 0.1 0.4", "1 0.5 0.5 0.2 0.4"])
    im_file, labels, _, segments, *_, msg = verify_image_label((im, lb, "train: "))
    assert im_file == im
    np.testing.assert_allclose(labels, [[0, 0.3, 0.25, 0.4, 0.3], [1, 0.5, 0.5, 0.2, 0.4]], atol=1e-6)
    assert [len(s) for s in segments] == [4, 4]
    np.testing.assert_allclose(segments[1], [[0.4, 0.3], [0.6, 0.3], [0.6, 0.7], [0.4, 0.7]], atol=1e-6)
    assert im in msg and "1 box row in a polygon label file" in msg and "\n" not in msg


def test_degenerate_labels_dropped_with_one_warning_per_file(tmp_path, log_lines):
    """A zero-height box, a zero-width box, a collinear polygon and a one-point polygon are dropped before anything
    (AutoAnchor included) sees them; each file is named in one warning line, and the good labels stay."""
    from utils.data.dataset import LoadImagesAndLabels
    for d in ("images", "labels"):
        (tmp_path / d).mkdir()
    rows = {"boxes": ["0 0.5 0.5 0.3 0.0", "0 0.5 0.5 0.0 0.3", "1 0.4 0.4 0.2 0.2"],
            "polys": ["0 0.1 0.1 0.2 0.2 0.3 0.3 0.4 0.4", "1 0.2 0.5 0.6 0.5 0.9 0.5", "2 0.5 0.5",
                      "3 0.1 0.1 0.5 0.1 0.5 0.4"],
            "allbad": ["0 0.5 0.5 0.3 0.0"]}
    for name, r in rows.items():
        cv2.imwrite(str(tmp_path / "images" / f"{name}.jpg"), np.full((64, 80, 3), 90, np.uint8))
        (tmp_path / "labels" / f"{name}.txt").write_text("\n".join(r) + "\n")
    ds = LoadImagesAndLabels(str(tmp_path / "images"), img_size=64, batch_size=2)
    by_name = {Path(f).stem: i for i, f in enumerate(ds.im_files)}
    assert set(by_name) == {"boxes", "polys", "allbad"}
    np.testing.assert_allclose(ds.labels[by_name["boxes"]], [[1, 0.4, 0.4, 0.2, 0.2]], atol=1e-6)
    assert ds.labels[by_name["polys"]][:, 0].tolist() == [3] and len(ds.segments[by_name["polys"]]) == 1
    assert len(ds.labels[by_name["allbad"]]) == 0  # a background image now, counted as one
    for name, n in (("boxes", 2), ("polys", 3), ("allbad", 1)):
        lines = [x for x in log_lines if f"{name}.jpg" in x]
        assert len(lines) == 1 and f"{n} degenerate labels" in lines[0], (name, lines)
    assert ds.scan_results[2] == 1  # nf, nm, ne: 'allbad' is empty


def test_label_rows_property(tmp_path):
    """Any mix of box rows, polygon rows and degenerate rows: either the file is refused with one line, or every
    kept label has a box of positive width and height that bounds its polygon (of at least 3 points and positive
    area), and the warning says what was changed. Seeded."""
    from hypothesis import HealthCheck, given, settings, strategies as st
    from utils.data.labels import _polygon_area

    coord = st.floats(0.0, 1.0, allow_nan=False, width=32)
    box = st.tuples(st.integers(0, 3), coord, coord, st.sampled_from([0.0, 0.1, 0.3]),
                    st.sampled_from([0.0, 0.2])).map(lambda r: " ".join(map(str, r)))
    polygon = st.tuples(st.integers(0, 3), st.lists(st.tuples(coord, coord), min_size=1, max_size=6)).map(
        lambda r: " ".join([str(r[0])] + [f"{x} {y}" for x, y in r[1]]))
    line = st.sampled_from([0.1, 0.5]).map(lambda y: f"1 0.1 {y} 0.4 {y} 0.9 {y}")  # collinear: zero area
    im_path = str(_pair(tmp_path, [], w=160, h=120)[0])
    lb_path = tmp_path / "rows.txt"

    @settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.one_of(box, polygon, line), min_size=1, max_size=6))
    def check(rows):
        lb_path.write_text("\n".join(rows) + "\n")
        im_file, labels, shape, segments, *_, msg = verify_image_label((im_path, str(lb_path), ""))
        if im_file is None:
            assert "ignoring corrupt image/label" in msg and "\n" not in msg
            return
        assert (labels[:, 3] > 0).all() and (labels[:, 4] > 0).all()
        if segments:
            assert len(segments) == len(labels)
            for s, b in zip(segments, labels):
                assert len(s) >= 3 and _polygon_area(s * (160, 120)) >= 0.5
                lo, hi = s.min(0), s.max(0)
                np.testing.assert_allclose([(lo + hi) / 2, hi - lo], [b[1:3], b[3:5]], atol=1e-5)
        n_in = len(rows)
        if len(labels) < n_in:
            assert "degenerate labels" in msg or "duplicate labels" in msg

    check()


# ---- AutoAnchor ------------------------------------------------------------------------------------------------
def _placeholder_model():
    from models.yolo import DetectionModel, load_model_yaml
    cfg = load_model_yaml("yolov5n.yaml")
    cfg["anchors"] = 3  # placeholders, replaced by AutoAnchor as official does
    log = logging.getLogger("yolov5")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        return DetectionModel(cfg)
    finally:
        log.setLevel(level)


@pytest.mark.parametrize("zero_height", [1, 10])
def test_autoanchor_never_installs_a_nan_or_zero_anchor(zero_height):
    """Boxes of zero height reaching AutoAnchor (a dataset object built by hand): before, the ratio metric was 0/0,
    the fitness NaN and anchors such as 95x0 px were installed, and the loss was NaN at the first step."""
    from utils.autoanchor import check_anchors
    rng = np.random.RandomState(0)
    wh = rng.uniform(0.05, 0.5, (20, 2))
    wh[:zero_height, 1] = 0
    ds = types.SimpleNamespace(shapes=np.array([[640, 480]], np.float64),
                               labels=[np.concatenate([np.zeros((20, 1)), np.full((20, 2), 0.5), wh], 1)
                                       .astype(np.float32)])
    model = _placeholder_model()
    random.seed(0)
    np.random.seed(0)
    check_anchors(ds, model, thr=4.0, imgsz=320)
    det = model.model[-1]
    px = backend.to_numpy(det.anchors) * backend.to_numpy(det.stride).reshape(-1, 1, 1)
    assert np.isfinite(px).all() and (px > 0).all(), px.reshape(-1, 2).tolist()


def test_autoanchor_refuses_non_finite_anchors(monkeypatch, log_lines):
    """Whatever kmean_anchors returns, a NaN or 0 anchor is refused: the model's anchors stay, with a warning."""
    import utils.autoanchor as aa
    monkeypatch.setattr(aa, "kmean_anchors", lambda *a, **k: np.array([[np.nan, 3]] + [[5, 0]] * 8, np.float32))
    model = _placeholder_model()
    before = backend.to_numpy(model.model[-1].anchors).copy()
    ds = types.SimpleNamespace(shapes=np.array([[640, 640]], np.float64),
                               labels=[np.array([[0, 0.5, 0.5, 0.3, 0.2]] * 12, np.float32)])
    bpr, replaced = aa.check_anchors(ds, model, thr=4.0, imgsz=320)
    assert not replaced
    np.testing.assert_array_equal(backend.to_numpy(model.model[-1].anchors), before)
    assert any("not all finite and above 0 pixels" in x for x in log_lines)
    assert any("placeholders" in x for x in log_lines)  # the kept ones are 'anchors: 3' zeros: said too


# ---- --cache disk ------------------------------------------------------------------------------------------------
@pytest.fixture
def four_images(tmp_path, coco128_dir):
    for d in ("images", "labels"):
        (tmp_path / d).mkdir()
    for n in ("000000000009", "000000000025", "000000000030", "000000000034"):
        shutil.copy(coco128_dir / "images" / "train2017" / f"{n}.jpg", tmp_path / "images")
        shutil.copy(coco128_dir / "labels" / "train2017" / f"{n}.txt", tmp_path / "labels")
    return tmp_path / "images"


def test_disk_cache_deletes_only_its_own_names(four_images):
    """Beside 000000000009.jpg the user keeps a depth map and other .npy files, and a temporary file of their own:
    they stay. A cache file of an earlier version of the image (this project's exact name shape) and a temporary
    file of this project's shape from a dead writer go."""
    from utils.atomic_files import TEMP_MARK
    from utils.data.dataset import LoadImagesAndLabels
    from utils.data.image_cache import npy_path
    stem = "000000000009"
    users = [f"{stem}.depth.npy", f"{stem}.npy", f"{stem}.160.npy", f"{stem}.160.0123456789.npy.bak",
             f"{stem}.160.0123456789abc.npy", f"{stem}.x.160.0123456789.npy", f"{stem}.notes.3.tmp"]
    for name in users:
        np.save(four_images / name, np.arange(3)) if name.endswith(".npy") else (four_images / name).write_text("x")
    ours_old = four_images / f"{stem}.160.0123456789.npy"
    np.save(ours_old, np.zeros(3))
    host = socket.gethostname().replace(".", "-") or "host"  # as utils.atomic_files names this machine
    dead_temp = four_images / f"{stem}.96.abcdef0123.npy.{host}.999999999.{TEMP_MARK}.npy"  # pid 999999999: gone
    dead_temp.write_bytes(b"partial")
    LoadImagesAndLabels(str(four_images), img_size=160, batch_size=2, cache_images="disk")
    for name in users:
        assert (four_images / name).exists(), f"a file of the user's was deleted: {name}"
    assert not ours_old.exists() and not dead_temp.exists()
    assert npy_path(four_images / f"{stem}.jpg", 160).exists()


def test_damaged_disk_cache_in_the_mosaic_is_decoded_again(four_images, log_lines):
    """Regression: the fused mosaic read --cache disk files with a bare np.load, so a file cut short by a full disk
    or a kill crashed training (ValueError: Failed to read all data). Now it goes through the checked reader: one
    warning naming it, the image decoded again and the cache rewritten."""
    from utils.data.dataset import LoadImagesAndLabels
    with open(ROOT / "data" / "hyps" / "hyp.scratch-low.yaml") as f:
        hyp = yaml.safe_load(f)
    hyp["mosaic"] = 1.0
    ds = LoadImagesAndLabels(str(four_images), img_size=160, batch_size=2, augment=True, hyp=hyp,
                             cache_images="disk")
    good = [Path(f).read_bytes() for f in ds.npy_files]
    for f in ds.npy_files:
        Path(f).write_bytes(Path(f).read_bytes()[:300])
    for i in range(len(ds)):
        random.seed(i)
        im, labels, _, _ = ds[i]
        assert im.shape == (3, 160, 160)
    warned = [x for x in log_lines if "damaged --cache disk file" in x]
    assert warned and all(any(Path(f).name in x for x in warned) for f in ds.npy_files if f)
    assert [Path(f).read_bytes() for f in ds.npy_files] == good  # rewritten from the images


# ---- --resume ----------------------------------------------------------------------------------------------------
@pytest.fixture
def official_run(tmp_path, shared_dir):
    """The official trainer's interrupted run (relative data: data/coco128.yaml) copied into tmp_path, with a
    data/coco128.yaml there (the working folder of the resume) naming the shared coco128."""
    run = tmp_path / "exp-int"
    shutil.copytree(shared_dir / "runs" / "official-interrupted", run)
    for p in [run, *run.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    data = yaml.safe_load((ROOT / "data" / "coco128.yaml").read_text())
    data.update(path=str(shared_dir / "data" / "coco128"))
    data.pop("download", None)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "coco128.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return run


def test_official_interrupted_run_passes_option_checks(official_run):
    """Regression: the official trainer saves evolve_population=PosixPath('data/hyps') (its parser's default is a
    Path); --resume refused it as 'edited or damaged'."""
    import train
    last = official_run / "weights" / "last.pt"
    opt = train.resume_opt(train.parse_opt(True, args=["--resume", str(last)]))
    assert opt.resume is True and opt.weights == str(last) and opt.save_dir == str(official_run)
    assert opt.evolve_population == "data/hyps" and opt.epochs == 5 and opt.imgsz == 64
    assert opt.data == "data/coco128.yaml"  # relative, as the official run saved it: read from the working folder


@pytest.fixture(scope="module")
def official_ckpt(shared_dir):
    from models.from_record import build_model
    from utils.engine.resume import read_resume_checkpoint
    return read_resume_checkpoint(shared_dir / "runs" / "official-interrupted" / "weights" / "last.pt", build_model)


def test_resume_class_check(official_ckpt):
    from utils.engine.errors import TrainingError
    from utils.engine.resume import check_resumed_classes
    names = dict(official_ckpt["model"].names)
    check_resumed_classes(official_ckpt, 80, names, "coco128.yaml")  # the same classes: no word
    check_resumed_classes(official_ckpt, 80, list(names.values()), "coco128.yaml")  # a list or a dict alike
    renamed = {**names, 3: "motorbike"}
    with pytest.raises(TrainingError, match=r"80 classes and the data d.yaml now has 80 \(class 3 is 'motorcycle' "
                                            r"there and 'motorbike' here\)") as e:
        check_resumed_classes(official_ckpt, 80, renamed, "d.yaml", name="x/last.pt")
    assert "\n" not in str(e.value) and "--weights x/last.pt" in str(e.value)
    with pytest.raises(TrainingError, match=r"trained for 80 classes and the data d.yaml now has 81 \(class 80 "
                                            r"\('kite2'\) is only here\)"):
        check_resumed_classes(official_ckpt, 81, {**names, 80: "kite2"}, "d.yaml")
    with pytest.raises(TrainingError, match="now has 2"):
        check_resumed_classes(official_ckpt, 2, {0: "person", 1: "bicycle"}, "d.yaml")


@pytest.mark.slow
def test_resume_after_the_class_list_changed_stops_in_one_line(official_run):
    """A class was added to the data YAML after the run started (every label still valid, so no label check
    objects): train.py --resume stops with one line naming the checkpoint, the data and the new class, exit 1,
    before anything is trained; last.pt is left as it was. Before, it trained the 80-class head on."""
    data_yaml = official_run.parent / "data" / "coco128.yaml"
    data = yaml.safe_load(data_yaml.read_text())
    data["names"][80] = "scooter"
    data_yaml.write_text(yaml.safe_dump(data, sort_keys=False))
    last = official_run / "weights" / "last.pt"
    before = last.read_bytes()
    res = run_train(["--resume", last], cwd=official_run.parent, timeout=300)
    assert res.returncode == 1, res.stderr[-2000:]
    err = [x for x in res.stderr.splitlines() if "class" in x and "--resume" in x]
    assert len(err) == 1 and str(last) in err[0], res.stderr[-2000:]
    assert "data/coco128.yaml now has 81 (class 80 ('scooter') is only here)" in err[0], err[0]
    assert "Traceback" not in res.stderr
    assert last.read_bytes() == before and not (official_run / "weights" / "best.pt").exists()
