"""Label checks and the label cache: every bad input gives its message and the rest of the data loads."""
import os
import shutil
import stat

import cv2
import numpy as np
import pytest

from utils.dataloaders import LoadImagesAndLabels, create_dataloader


def _img(path, h=64, w=80, value=None, gray=False):
    rng = np.random.default_rng(abs(hash(path.name)) % 2**32)
    im = rng.integers(0, 255, (h, w) if gray else (h, w, 3), dtype=np.uint8) if value is None else \
        np.full((h, w, 3), value, np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), im)
    return path


def _lbl(root, name, text):
    p = root / "labels" / "train" / (name.rsplit(".", 1)[0] + ".txt")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def make_bad_dataset(root):
    im = root / "images" / "train"
    good = "0 0.5 0.5 0.2 0.2\n1 0.3 0.3 0.1 0.1\n"
    _img(im / "good.jpg"); _lbl(root, "good.jpg", good)
    _img(im / "gray.jpg", gray=True); _lbl(root, "gray.jpg", good)
    _img(im / "pic.png"); _lbl(root, "pic.png", good)
    _img(im / "nolabel.jpg")  # no label file: a background image
    _img(im / "emptylabel.jpg"); _lbl(root, "emptylabel.jpg", "")
    _img(im / "dups.jpg"); _lbl(root, "dups.jpg", good + good + "0 0.5 0.5 0.2 0.2\n")
    _img(im / "poly.jpg"); _lbl(root, "poly.jpg", "2 0.1 0.1 0.5 0.1 0.5 0.4 0.1 0.4\n")
    _img(im / "fourcol.jpg"); _lbl(root, "fourcol.jpg", "0 0.5 0.5 0.2\n")
    _img(im / "negative.jpg"); _lbl(root, "negative.jpg", "0 -0.5 0.5 0.2 0.2\n")
    _img(im / "over1.jpg"); _lbl(root, "over1.jpg", "0 1.5 0.5 0.2 0.2\n")
    _img(im / "nan.jpg"); _lbl(root, "nan.jpg", "0 nan 0.5 0.2 0.2\n")
    _img(im / "tiny.jpg", h=8, w=8); _lbl(root, "tiny.jpg", good)
    (im / "zero.jpg").write_bytes(b""); _lbl(root, "zero.jpg", good)
    trunc = _img(im / "trunc.jpg", h=120, w=160)
    data = trunc.read_bytes()
    trunc.write_bytes(data[:-200])  # cut off the end (and the FFD9 marker)
    _lbl(root, "trunc.jpg", good)
    return im


def test_every_bad_input_has_its_message_and_the_rest_loads(tmp_path, log_lines):
    im_dir = make_bad_dataset(tmp_path)
    ds = LoadImagesAndLabels(str(im_dir), img_size=64, batch_size=4)
    names = {os.path.basename(f) for f in ds.im_files}
    assert names == {"good.jpg", "gray.jpg", "pic.png", "nolabel.jpg", "emptylabel.jpg", "dups.jpg", "poly.jpg",
                     "trunc.jpg"}
    text = "\n".join(log_lines)
    expect = {"fourcol.jpg": "labels require 5 columns, 4 columns detected",
              "negative.jpg": "negative label values",
              "over1.jpg": "non-normalized or out of bounds coordinates",
              "nan.jpg": "non-finite label values",
              "tiny.jpg": "<10 pixels",
              "zero.jpg": "ignoring corrupt image/label",
              "dups.jpg": "3 duplicate labels removed",
              "trunc.jpg": "corrupt JPEG restored and saved"}
    for name, reason in expect.items():
        lines = [x for x in log_lines if name in x and "WARNING" in x]
        assert len(lines) == 1, f"{name}: expected one warning line, got {lines}"
        assert reason in lines[0], lines[0]
    nf, nm, ne, nc, n = ds.scan_results
    assert (nm, ne, nc, n) == (1, 1, 6, 14)
    assert "8 images" not in text and f"{nf} images, 2 backgrounds, 6 corrupt" in text
    # the restored JPEG now ends with the EOI marker and decodes
    assert (im_dir / "trunc.jpg").read_bytes()[-2:] == b"\xff\xd9"

    by_name = {os.path.basename(f): i for i, f in enumerate(ds.im_files)}
    assert len(ds.labels[by_name["dups.jpg"]]) == 2
    assert len(ds.labels[by_name["nolabel.jpg"]]) == 0
    poly = ds.labels[by_name["poly.jpg"]]
    np.testing.assert_allclose(poly, [[2, 0.3, 0.25, 0.4, 0.3]], atol=1e-6)  # polygon -> box
    assert len(ds.segments[by_name["poly.jpg"]]) == 1  # segment kept for copy-paste

    loader, _ = create_dataloader(str(im_dir), 64, 4, 32, workers=0)
    seen, boxes = 0, 0
    for imgs, targets, paths, shapes in loader:
        assert imgs.shape[1:] == (3, 64, 64)
        seen += imgs.shape[0]
        boxes += targets.shape[0]
    assert seen == 8 and boxes == 2 * 5 + 1  # good, gray, png, dups, trunc: 2 each; poly: 1


def test_grayscale_coco_image_loads_as_3_channels(coco128_dir, tmp_path):
    src = coco128_dir / "images" / "train2017" / "000000000086.jpg"
    im0 = cv2.imread(str(src), cv2.IMREAD_UNCHANGED)
    assert im0.ndim == 2 or im0.shape[2] == 1, "000000000086.jpg is expected to be grayscale"
    (tmp_path / "images").mkdir()
    shutil.copy(src, tmp_path / "images" / src.name)
    (tmp_path / "labels").mkdir()
    shutil.copy(coco128_dir / "labels" / "train2017" / "000000000086.txt", tmp_path / "labels" / "000000000086.txt")
    ds = LoadImagesAndLabels(str(tmp_path / "images"), img_size=128, batch_size=1)
    im, labels, path, shapes = ds[0]
    assert im.shape == (3, 128, 128) and im.dtype == np.uint8
    assert len(labels) == len(ds.labels[0]) > 0
    assert (im[0] == im[1]).all() and (im[1] == im[2]).all()  # grey in, grey out


def test_class_out_of_range_stops_naming_file_and_line(tmp_path):
    _img(tmp_path / "images" / "train" / "a.jpg")
    lb = _lbl(tmp_path, "a.jpg", "0 0.5 0.5 0.2 0.2\n7 0.5 0.5 0.1 0.1\n")
    with pytest.raises(ValueError) as e:
        create_dataloader(str(tmp_path / "images" / "train"), 64, 2, 32, workers=0, nc=3)
    msg = str(e.value)
    assert str(lb) in msg and "line 2" in msg and "nc=3" in msg


def test_label_cache_reused_and_rebuilt_when_a_file_changes(tmp_path, coco128_dir, log_lines):
    src = coco128_dir / "images" / "train2017"
    names = ["000000000009", "000000000025", "000000000030"]
    for d in ("images", "labels"):
        (tmp_path / d).mkdir()
    for n in names:
        shutil.copy(src / f"{n}.jpg", tmp_path / "images")
        shutil.copy(coco128_dir / "labels" / "train2017" / f"{n}.txt", tmp_path / "labels")
    ds1 = LoadImagesAndLabels(str(tmp_path / "images"), img_size=64, batch_size=2)
    cache = tmp_path / "labels.cache"
    assert cache.is_file() and not ds1.cache_hit
    ds2 = LoadImagesAndLabels(str(tmp_path / "images"), img_size=64, batch_size=2)
    assert ds2.cache_hit
    for a, b in zip(ds1.labels, ds2.labels):
        np.testing.assert_array_equal(a, b)
    # a label file changes (new size): the cache is stale and rebuilt, with the new row
    with open(tmp_path / "labels" / f"{names[0]}.txt", "a") as f:
        f.write("5 0.5 0.5 0.25 0.25\n")
    ds3 = LoadImagesAndLabels(str(tmp_path / "images"), img_size=64, batch_size=2)
    assert not ds3.cache_hit
    assert len(ds3.labels[0]) == len(ds1.labels[0]) + 1
    assert LoadImagesAndLabels(str(tmp_path / "images"), img_size=64, batch_size=2).cache_hit
    # an image is added: rebuilt too
    shutil.copy(src / "000000000034.jpg", tmp_path / "images")
    ds4 = LoadImagesAndLabels(str(tmp_path / "images"), img_size=64, batch_size=2)
    assert not ds4.cache_hit and len(ds4) == 4


def test_read_only_labels_warn_once_and_load(tmp_path, log_lines):
    _img(tmp_path / "images" / "train" / "a.jpg")
    _lbl(tmp_path, "a.jpg", "0 0.5 0.5 0.2 0.2\n")
    lbl_parent = tmp_path / "labels"
    os.chmod(lbl_parent, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    try:
        ds = LoadImagesAndLabels(str(tmp_path / "images" / "train"), img_size=64, batch_size=1)
        assert len(ds) == 1 and len(ds.labels[0]) == 1
        assert not (lbl_parent / "train.cache").exists()
        warn = [x for x in log_lines if "not writeable" in x]
        assert len(warn) == 1
    finally:
        os.chmod(lbl_parent, 0o755)


def test_shared_coco128_is_never_written(coco128_dir):
    before = sorted(os.listdir(coco128_dir / "labels"))
    ds = LoadImagesAndLabels(str(coco128_dir / "images" / "train2017"), img_size=64, batch_size=8)
    assert len(ds) == 128 and sum(len(x) for x in ds.labels) == 929
    assert sorted(os.listdir(coco128_dir / "labels")) == before


def test_every_label_file_empty_is_one_user_error_line(tmp_path):
    from utils.errors import UserError
    for name in ("a.jpg", "b.jpg"):
        _img(tmp_path / "images" / "train" / name)
        _lbl(tmp_path, name, "")
    with pytest.raises(UserError) as e:
        create_dataloader(str(tmp_path / "images" / "train"), 64, 2, 32, workers=0, augment=True, prefix="train: ")
    msg = str(e.value)
    assert "\n" not in msg and str(tmp_path / "images" / "train") in msg and str(tmp_path / "labels") in msg
    # validation of unlabelled images is allowed (ultralytics too): background images only
    assert len(create_dataloader(str(tmp_path / "images" / "train"), 64, 2, 32, workers=0)[1]) == 2


def _tiny_train_set(root, label_text="0 0.5 0.5 0.2 0.2\n", names=("a", "b", "c")):
    for i in range(2):
        _img(root / "images" / "train" / f"{i}.jpg")
        _lbl(root, f"{i}.jpg", label_text)
    y = root / "data.yaml"
    y.write_text(f"path: {root}\ntrain: images/train\nval: images/train\nnames: {list(names)}\n")
    return y


@pytest.mark.slow
def test_train_reports_label_errors_in_one_line(tmp_path):
    """train.py: a class id >= nc names the label file and its line; every label empty names the dataset."""
    import subprocess
    import sys
    from utils.general import ROOT
    env = {**os.environ, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
    base = ["--cfg", "yolov5n.yaml", "--weights", "", "--img", "64", "--batch", "2", "--epochs", "1", "--workers",
            "0", "--device", "cpu", "--noplots", "--project", str(tmp_path / "runs")]
    bad_class = _tiny_train_set(tmp_path / "c", "0 0.5 0.5 0.2 0.2\n7 0.5 0.5 0.1 0.1\n")
    empty = _tiny_train_set(tmp_path / "e", "")
    bad_val = _tiny_train_set(tmp_path / "v")  # good training labels; the validation set has a class 5
    _img(tmp_path / "v" / "images" / "val" / "0.jpg")
    (tmp_path / "v" / "labels" / "val").mkdir(parents=True)
    (tmp_path / "v" / "labels" / "val" / "0.txt").write_text("1 0.5 0.5 0.2 0.2\n2 0.4 0.4 0.1 0.1\n"
                                                             "5 0.5 0.5 0.1 0.1\n")
    bad_val.write_text(bad_val.read_text().replace("val: images/train", "val: images/val"))
    for data, expect in ((bad_class, ["exceeds nc=3", str(tmp_path / "c" / "labels" / "train" / "0.txt"), "line 2"]),
                         (empty, ["no labels", str(tmp_path / "e" / "images" / "train")]),
                         (bad_val, ["exceeds nc=3", str(tmp_path / "v" / "labels" / "val" / "0.txt"), "line 3"])):
        p = subprocess.run([sys.executable, "train.py", "--data", str(data), *base], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 1, p.stderr[-3000:]
        assert "Traceback" not in p.stderr, p.stderr[-3000:]
        err = [x for x in p.stderr.splitlines() if expect[0] in x]
        assert len(err) == 1 and all(s in err[0] for s in expect), p.stderr[-3000:]
