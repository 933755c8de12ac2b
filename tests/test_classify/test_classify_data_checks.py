"""Classification data is checked, never silently wrong: the splits share one class list (labels by folder name,
hidden folders never classes), --cache disk files are keyed by the image's name, mtime and size and checked when
read, never written beside read-only images, and a bad image stops with one short line naming it, also when a
DataLoader worker meets it. Tiny ImageFolders are made in tmp_path (32x32 images written with cv2)."""
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from utils.classify.dataset import (ClassificationDataError, ClassificationDataset, create_classification_dataloader,
                                    find_classes, image_folder_samples)
from utils.errors import worker_original_message as original_message
from utils.errors import one_line

CLASSES = ["ant", "bee", "cat"]
LOG = "yolov5"


def _write(path, value, ext=None):
    """A 32x32 image of one grey value (lossless formats keep it exactly)."""
    path = Path(path) if ext is None else Path(path).with_suffix(ext)
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), np.full((32, 32, 3), value, np.uint8))
    return path


@pytest.fixture
def folder(tmp_path):
    """root/{train,val}/{ant,bee,cat}/ with two PNGs per class; class k's pixels are 40 * (k + 1)."""
    root = tmp_path / "data"
    for split in ("train", "val"):
        for k, c in enumerate(CLASSES):
            for j in range(2):
                _write(root / split / c / f"{c}{j}.png", 40 * (k + 1))
    return root


def _labels_by_folder(dataset):
    return {Path(f).parent.name: j for f, j in dataset.samples}


# ------------------------------------------------------------------------------------------------ one class list
def test_val_missing_a_class_folder_keeps_the_training_indices(folder, caplog):
    shutil.rmtree(folder / "val" / "bee")
    train = find_classes(folder / "train")
    with caplog.at_level("WARNING", logger=LOG):
        ds = ClassificationDataset(folder / "val", imgsz=32, classes=train, source="train/")
    assert _labels_by_folder(ds) == {"ant": 0, "cat": 2}  # not cat -> 1, which the folder's own order would give
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "'bee'" in warning and "no images" in warning
    assert int(ds[len(ds) - 1][1]) == 2


def test_hidden_folders_are_never_classes_nor_samples(folder):
    for split in ("train", "val"):
        _write(folder / split / ".ipynb_checkpoints" / "x.png", 7)
        _write(folder / split / "bee" / ".thumbs" / "y.png", 7)  # hidden inside a class folder: not walked
    assert find_classes(folder / "train") == CLASSES
    ds = ClassificationDataset(folder / "val", imgsz=32, classes=find_classes(folder / "train"))
    assert len(ds) == 6 and not any("/." in f for f, _ in ds.samples)
    assert _labels_by_folder(ds) == {"ant": 0, "bee": 1, "cat": 2}


def test_extra_val_folder_is_one_line_naming_it(folder):
    _write(folder / "val" / "dog" / "d.png", 9)
    with pytest.raises(ClassificationDataError) as e:
        ClassificationDataset(folder / "val", classes=CLASSES, source="train/")
    msg = str(e.value)
    assert "\n" not in msg and "'dog'" in msg and str(folder / "val") in msg


def test_trainer_checks_the_splits_before_the_run_folder(folder, tmp_path):
    from classify import train
    from utils.classify.training import split_classes
    from utils.engine.errors import TrainingError
    assert split_classes(folder / "train", folder / "val")[0] == CLASSES
    _write(folder / "val" / "dog" / "d.png", 9)
    project = tmp_path / "runs"
    with pytest.raises(TrainingError, match="'dog'"):
        train.run(data=str(folder), model="yolov5n.yaml", project=str(project), epochs=1, imgsz=32)
    assert not project.exists()


def test_resume_refuses_changed_classes():
    from utils.classify.training import check_resumed_classes
    from utils.engine.errors import TrainingError
    check_resumed_classes(SimpleNamespace(names={0: "ant", 1: "bee"}), ["ant", "bee"], "last.pt")
    with pytest.raises(TrainingError, match="new: 'cat'"):
        check_resumed_classes(SimpleNamespace(names=["ant", "bee"]), ["ant", "bee", "cat"], "last.pt")
    with pytest.raises(TrainingError, match="another order"):
        check_resumed_classes(SimpleNamespace(names=["bee", "ant"]), ["ant", "bee"], "last.pt")


def test_val_py_labels_folders_by_the_models_names(folder, caplog):
    from classify.val import model_classes
    classes, source = model_classes({0: "cat", 1: "ant", 2: "bee", 3: "eel"}, "m.pt")
    ds = ClassificationDataset(folder / "val", imgsz=32, classes=classes, source=source)
    assert _labels_by_folder(ds) == {"cat": 0, "ant": 1, "bee": 2}  # 'eel' has no folder: a warning
    with caplog.at_level("WARNING", logger=LOG):
        assert model_classes({i: f"class{i}" for i in range(999)}, "m.onnx") == (None, None)  # no names: folders
    assert "no class names" in caplog.text
    with pytest.raises(ClassificationDataError, match="'bee'.*m.pt"):  # a folder the model does not know
        ClassificationDataset(folder / "val", classes=["ant", "cat"], source=source)
    with pytest.raises(ClassificationDataError, match="unique"):
        ClassificationDataset(folder / "val", classes=["ant", "ant", "bee", "cat"], source="m.pt")


def test_classify_val_with_a_missing_folder_scores_by_name(shared_dir, tmp_path):
    """The official coco128-cls checkpoint (top-1 0.642 over the 53 val images) on val/ without bowl/ (4 images, 3
    right): by name 31 of 49 stay right; with the folders' own order the labels shift and top-1 falls near 0.08."""
    from classify.val import run
    data = tmp_path / "cls"
    shutil.copytree(shared_dir / "data" / "coco128-cls" / "val", data / "val")
    shutil.rmtree(data / "val" / "bowl")
    shutil.copytree(data / "val" / "cup", data / "val" / ".ipynb_checkpoints")
    top1, _, _ = run(data=data, weights=shared_dir / "weights" / "yolov5n-cls-coco128cls.pt", imgsz=128,
                     batch_size=64, workers=0, verbose=False, project=tmp_path / "runs")
    assert abs(top1 - 31 / 49) <= 0.025, top1
    (data / "val" / "zebra").mkdir()
    shutil.copy(next((data / "val" / "cup").iterdir()), data / "val" / "zebra")
    with pytest.raises(ClassificationDataError, match="'zebra'"):
        run(data=data, weights=shared_dir / "weights" / "yolov5n-cls-coco128cls.pt", imgsz=128, workers=0,
            verbose=False, project=tmp_path / "runs")


def test_non_regular_files_are_skipped_with_a_warning(folder, caplog):
    os.mkfifo(folder / "val" / "ant" / "pipe.jpg")  # a reader would block on it for good
    with caplog.at_level("WARNING", logger=LOG):
        samples = image_folder_samples(folder / "val", CLASSES)
    assert len(samples) == 6 and "pipe.jpg" in caplog.text


# ------------------------------------------------------------------------------------------------ --cache disk
def _disk_dataset(root, **kw):
    return ClassificationDataset(root, imgsz=32, cache="disk", raw=True, **kw)


def _npys(folder):
    return sorted(p.name for p in Path(folder).rglob("*.npy"))


def test_disk_cache_is_keyed_by_name_and_follows_an_edited_image(tmp_path):
    im = _write(tmp_path / "d" / "a" / "x.png", 10)
    ds = _disk_dataset(tmp_path / "d")
    assert ds.load_image(0)[0, 0, 0] == 10
    first = _npys(tmp_path / "d")
    assert len(first) == 1 and first[0].startswith("x.png.cls.")
    _write(im, 200)  # same name, same size: the key must still change (mtime_ns)
    st = os.stat(im)
    os.utime(im, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert ClassificationDataset(tmp_path / "d", imgsz=32, cache="disk").load_image(0)[0, 0, 0] == 200
    second = _npys(tmp_path / "d")
    assert len(second) == 1 and second != first  # the stale key is gone, the new one written


def test_same_stem_different_extensions_get_their_own_caches(tmp_path):
    _write(tmp_path / "d" / "a" / "x.png", 30)
    _write(tmp_path / "d" / "a" / "x.bmp", 90)
    ds = _disk_dataset(tmp_path / "d")
    values = {Path(ds.samples[i][0]).suffix: int(ds.load_image(i)[0, 0, 0]) for i in range(2)}
    again = _disk_dataset(tmp_path / "d")  # served from the caches now
    assert {Path(again.samples[i][0]).suffix: int(again.load_image(i)[0, 0, 0]) for i in range(2)} == values
    assert values == {".png": 30, ".bmp": 90}
    assert [n.split(".cls.")[0] for n in _npys(tmp_path / "d")] == ["x.bmp", "x.png"]


def test_user_files_beside_the_images_are_never_touched(tmp_path):
    _write(tmp_path / "d" / "a" / "x.png", 30)
    mine = {tmp_path / "d" / "a" / n: b"user" for n in ("x.npy", "x.depth.npy", "x.png.notes.3.tmp")}
    for p, data in mine.items():
        p.write_bytes(data)
    _disk_dataset(tmp_path / "d").load_image(0)
    assert all(p.read_bytes() == data for p, data in mine.items())


def test_read_only_image_folder_caches_in_the_user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO_CACHE_DIR", str(tmp_path / "cache"))
    _write(tmp_path / "d" / "a" / "x.png", 50)
    before = sorted(p.name for p in (tmp_path / "d" / "a").iterdir())
    os.chmod(tmp_path / "d" / "a", 0o555)  # is_writeable reads the mode bits (root passes os.access)
    try:
        ds = _disk_dataset(tmp_path / "d")
        assert ds.load_image(0)[0, 0, 0] == 50 and _disk_dataset(tmp_path / "d").load_image(0)[0, 0, 0] == 50
        assert sorted(p.name for p in (tmp_path / "d" / "a").iterdir()) == before
        cached = list((tmp_path / "cache").rglob("x.png.cls.*.npy"))
        assert len(cached) == 1
    finally:
        os.chmod(tmp_path / "d" / "a", 0o755)


def test_damaged_cache_is_decoded_again_with_a_warning(tmp_path, caplog):
    _write(tmp_path / "d" / "a" / "x.png", 70)
    _disk_dataset(tmp_path / "d").load_image(0)
    npy = next((tmp_path / "d").rglob("*.npy"))
    good = npy.read_bytes()
    for damage in (good[:200], good[:128] + b"\0" * 10, b"\x93NUMPY\x01\x00" + b"{'descr': '<f8'" + b" " * 200):
        npy.write_bytes(damage)
        with caplog.at_level("WARNING", logger=LOG):
            caplog.clear()
            assert _disk_dataset(tmp_path / "d").load_image(0)[0, 0, 0] == 70
        assert "damaged" in caplog.text and str(npy) in caplog.text
        assert npy.read_bytes() == good  # rewritten whole


def test_unknown_cache_choice_is_one_line(folder):
    with pytest.raises(ClassificationDataError, match="--cache Disk"):
        ClassificationDataset(folder / "val", cache="Disk")


# ------------------------------------------------------------------------------------------------ bad images
@pytest.mark.parametrize("content", [b"", b"this is no image" * 8])
def test_bad_image_is_one_short_line_naming_it(folder, content):
    bad = folder / "val" / "bee" / "broken.jpg"
    bad.write_bytes(content)
    ds = ClassificationDataset(folder / "val", imgsz=32)
    i = next(k for k, (f, _) in enumerate(ds.samples) if f == str(bad))
    with pytest.raises(ClassificationDataError) as e:
        ds[i]
    assert str(bad) in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 300


def test_bad_image_in_a_loader_worker_is_one_short_line(folder):
    """The framework rebuilds a worker's exception from its whole traceback; the message stays the original."""
    bad = folder / "val" / "cat" / "empty.png"
    bad.write_bytes(b"")
    loader = create_classification_dataloader(folder / "val", imgsz=32, batch_size=2, workers=1)
    assert loader.num_workers == 1
    with pytest.raises(ClassificationDataError) as e:
        for _ in loader:
            pass
    line = one_line(e.value, "train")
    assert str(bad) in line and "0 bytes" in line and len(line) < 300, line
    assert "Traceback" not in line


def test_original_message_from_a_rebuilt_worker_error():
    text = ("Caught ClassificationDataError in DataLoader worker process 3.\nOriginal Traceback (most recent call "
            "last):\n  File \"w.py\", line 1, in loop\n    data = fetch()\n"
            "utils.classify.errors.ClassificationDataError: /d/a/x.jpg: empty file (0 bytes)\n")
    assert original_message(text) == "/d/a/x.jpg: empty file (0 bytes)"
    assert str(ClassificationDataError(text)) == "/d/a/x.jpg: empty file (0 bytes)"
    assert original_message("plain: text") == "plain: text"
