"""The official dataset YAMLs and their conversions (utils/data/converters/), offline: each test writes a tiny copy
of one dataset's raw format (a few images, a few annotations), converts it, and checks the YOLO labels number by
number. The network half (fetch.download) never runs here: where a YAML's whole `download:` entry is exercised,
fetch.download is replaced by a function that lays the raw files down as the archives would."""
import csv
import io
import json
import random
import tarfile
import zipfile

import numpy as np
import pytest
import yaml
from PIL import Image

from utils.archive_extract import UnsafeArchive
from utils.data.converters import argoverse, fetch, globalwheat, imagenet, objects365, sku110k, visdrone, xview
from utils.data.converters.common import autosplit, read_labels
from utils.dataset_config import ALLOW_SCRIPTS_ENV, DownloadScriptRefused, check_dataset, find_yaml
from utils.paths import ROOT

pytestmark = pytest.mark.framework_free  # tested once, in the PyTorch suite (tests/conftest.py)


def _image(path, w, h, fmt=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (w, h), (90, 120, 150)).save(path, format=fmt)
    return path


def _close(path, expected):
    np.testing.assert_allclose(read_labels(path), np.array(expected, dtype=np.float64), atol=1e-6)


# ------------------------------------------------------------------------------------------------ VisDrone
def _visdrone_split(split):
    _image(split / "images" / "0000001.jpg", 200, 100)
    _image(split / "images" / "0000002.jpg", 400, 300)
    (split / "annotations").mkdir(parents=True)
    (split / "annotations" / "0000001.txt").write_text(
        "10,20,30,40,1,4,0,0\n"  # car (4) -> class 3
        "0,0,5,5,0,0,0,0\n"  # score 0: an ignored region
        "100,50,100,50,1,10,1,2\n")  # motor (10) -> class 9
    (split / "annotations" / "0000002.txt").write_text("40,30,80,60,1,1,0,0\n")  # pedestrian -> 0


def test_visdrone_txt_to_labels(tmp_path):
    split = tmp_path / "VisDrone2019-DET-val"
    _visdrone_split(split)
    assert visdrone.convert_split(split) == 2
    _close(split / "labels" / "0000001.txt", [[3, 25 / 200, 40 / 100, 30 / 200, 40 / 100],
                                              [9, 150 / 200, 75 / 100, 100 / 200, 50 / 100]])
    _close(split / "labels" / "0000002.txt", [[0, 80 / 400, 60 / 300, 80 / 400, 60 / 300]])


# ------------------------------------------------------------------------------------------------ xView
def _feature(image_id, box, type_id):
    return {"type": "Feature", "properties": {"image_id": image_id, "bounds_imcoords": box, "type_id": type_id}}


def test_xview_geojson_to_labels_and_split(tmp_path):
    _image(tmp_path / "train_images" / "10.tif", 300, 200, "TIFF")
    _image(tmp_path / "train_images" / "11.tif", 100, 100, "TIFF")
    _image(tmp_path / "val_images" / "20.tif", 100, 100, "TIFF")
    geo = tmp_path / "xView_train.geojson"
    geo.write_text(json.dumps({"type": "FeatureCollection", "features": [
        _feature("10.tif", "30,20,90,80", 11),  # type 11 -> class 0
        _feature("10.tif", "250,150,350,260", 94),  # type 94 -> class 59, clipped to 300x200
        _feature("10.tif", "0,0,10,10", 14),  # type 14 is not one of the 60 classes: skipped
        _feature("11.tif", "10,10,60,40", 73),  # -> class 48
        _feature("1395.tif", "1,1,5,5", 11),  # the release's missing image: skipped
        _feature("11.tif", "", 11)]}))  # no box
    assert xview.convert_labels(geo) == 2
    _close(tmp_path / "labels/train/10.txt", [[0, 60 / 300, 50 / 200, 60 / 300, 60 / 200],
                                              [59, 275 / 300, 175 / 200, 50 / 300, 50 / 200]])
    _close(tmp_path / "labels/train/11.txt", [[48, 35 / 100, 25 / 100, 50 / 100, 30 / 100]])
    counts = xview.arrange(tmp_path)
    assert (tmp_path / "images/train/10.tif").exists() and (tmp_path / "images/val/20.tif").exists()
    want = random.Random(0).choices([0, 1, 2], weights=(0.9, 0.1, 0.0), k=2)  # ultralytics' autosplit rule
    assert counts == tuple(want.count(i) for i in range(3))
    listed = []
    for name in ("autosplit_train.txt", "autosplit_val.txt"):
        f = tmp_path / "images" / name
        listed += f.read_text().split() if f.exists() else []
    assert sorted(listed) == ["./train/10.tif", "./train/11.tif"]


def test_autosplit_matches_ultralytics_rule(tmp_path):
    for i in range(20):
        (tmp_path / "images").mkdir(exist_ok=True)
        (tmp_path / "images" / f"{i:02d}.jpg").write_bytes(b"x")
    autosplit(tmp_path / "images")
    which = random.Random(0).choices([0, 1, 2], weights=(0.9, 0.1, 0.0), k=20)
    train = [f"./images/{i:02d}.jpg" for i, w in enumerate(which) if w == 0]
    assert (tmp_path / "autosplit_train.txt").read_text().split() == train


# ------------------------------------------------------------------------------------------------ Argoverse
def test_argoverse_json_to_labels(tmp_path):
    ann_dir = tmp_path / "Argoverse-HD" / "annotations"
    ann_dir.mkdir(parents=True)
    (tmp_path / "Argoverse-1.1" / "tracking" / "train" / "log1" / "ring_front_center").mkdir(parents=True)
    a = {"images": [{"name": "ring_front_center_1.jpg", "sid": 0}, {"name": "ring_front_center_2.jpg", "sid": 1}],
         "seq_dirs": ["train/log1/ring_front_center", "train/log2/ring_front_center"],
         "annotations": [{"image_id": 0, "category_id": 2, "bbox": [960, 600, 192, 120]},
                         {"image_id": 0, "category_id": 7, "bbox": [0, 0, 96, 60]},
                         {"image_id": 1, "category_id": 0, "bbox": [100.5, 200.25, 50, 80]}]}
    (ann_dir / "train.json").write_text(json.dumps(a))
    argoverse.arrange(tmp_path)
    assert (tmp_path / "Argoverse-1.1" / "images" / "train" / "log1").is_dir()
    assert argoverse.convert(ann_dir / "train.json") == 2
    labels = tmp_path / "Argoverse-1.1" / "labels" / "train"
    _close(labels / "log1/ring_front_center/ring_front_center_1.txt",
           [[2, 1056 / 1920, 660 / 1200, 0.1, 0.1], [7, 48 / 1920, 30 / 1200, 0.05, 0.05]])
    _close(labels / "log2/ring_front_center/ring_front_center_2.txt",
           [[0, 125.5 / 1920, 240.25 / 1200, 50 / 1920, 80 / 1200]])


# ------------------------------------------------------------------------------------------------ SKU-110K
def _sku_csv(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


def _sku_raw(dir):
    _sku_csv(dir / "annotations" / "annotations_train.csv", [
        ["train_1.jpg", 10, 20, 110, 220, "object", 1000, 500],
        ["train_0.jpg", 0, 0, 500, 250, "object", 1000, 500],
        ["train_1.jpg", 500, 100, 600, 300, "object", 1000, 500]])
    _sku_csv(dir / "annotations" / "annotations_val.csv", [["val_0.jpg", 30, 40, 130, 140, "object", 200, 400]])
    for name, (w, h) in (("train_0.jpg", (1000, 500)), ("train_1.jpg", (1000, 500)), ("val_0.jpg", (200, 400))):
        _image(dir / "images" / name, w, h)


def test_sku110k_csv_to_labels(tmp_path):
    _sku_raw(tmp_path)
    assert sku110k.convert(tmp_path) == {"train.txt": 2, "val.txt": 1}
    assert (tmp_path / "train.txt").read_text().split() == ["./images/train_0.jpg", "./images/train_1.jpg"]
    assert (tmp_path / "val.txt").read_text().split() == ["./images/val_0.jpg"]
    _close(tmp_path / "labels/train_1.txt", [[0, 0.06, 0.24, 0.1, 0.4], [0, 0.55, 0.4, 0.1, 0.4]])
    _close(tmp_path / "labels/train_0.txt", [[0, 0.25, 0.25, 0.5, 0.5]])
    _close(tmp_path / "labels/val_0.txt", [[0, 0.4, 0.225, 0.5, 0.25]])
    assert (tmp_path / "labels/train_1.txt").read_text().splitlines()[0] == "0 0.06000 0.24000 0.10000 0.40000"


# ------------------------------------------------------------------------------------------------ Objects365
def test_objects365_coco_json_to_labels(tmp_path):
    a = {"categories": [{"id": 7, "name": "Person"}, {"id": 3, "name": "Sneakers"}],  # listed order -> 0, 1
         "images": [{"id": 1, "file_name": "images/v1/patch0/objects365_v1_00000001.jpg", "width": 400, "height": 200},
                    {"id": 2, "file_name": "images/v2/patch16/objects365_v2_00000002.jpg", "width": 100,
                     "height": 100}],
         "annotations": [{"image_id": 1, "category_id": 3, "bbox": [0, 0, 40, 20], "iscrowd": 0},
                         {"image_id": 1, "category_id": 7, "bbox": [380, 150, 40, 100], "iscrowd": 0},  # clipped
                         {"image_id": 1, "category_id": 7, "bbox": [10, 10, 10, 10], "iscrowd": 1},  # crowd: out
                         {"image_id": 2, "category_id": 7, "bbox": [25, 25, 50, 50], "iscrowd": 0}]}
    js = tmp_path / "zhiyuan_objv2_val.json"
    js.write_text(json.dumps(a))
    assert objects365.convert(js, tmp_path / "labels" / "val") == 2
    _close(tmp_path / "labels/val/objects365_v1_00000001.txt", [[0, 390 / 400, 175 / 200, 20 / 400, 50 / 200],
                                                               [1, 20 / 400, 10 / 200, 40 / 400, 20 / 200]])
    _close(tmp_path / "labels/val/objects365_v2_00000002.txt", [[0, 0.5, 0.5, 0.5, 0.5]])
    _image(tmp_path / "images/val/v1/patch0/objects365_v1_00000001.jpg", 8, 8)
    assert objects365.flatten_images(tmp_path / "images/val") == 1
    assert (tmp_path / "images/val/objects365_v1_00000001.jpg").exists()


# ------------------------------------------------------------------------------------------------ ImageNet
def _tar_with(path, members):
    with tarfile.open(path, "w") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def test_imagenet_train_tars_and_val_folders(tmp_path):
    train = tmp_path / "train"
    train.mkdir()
    for wnid in ("n01440764", "n01443537"):
        _tar_with(train / f"{wnid}.tar", {f"{wnid}_{i}.JPEG": b"jpeg" for i in range(3)})
    assert imagenet.unpack_class_tars(train) == 2
    assert sorted(p.name for p in train.iterdir()) == ["n01440764", "n01443537"]
    assert len(list((train / "n01443537").glob("*.JPEG"))) == 3
    val = tmp_path / "val"
    val.mkdir()
    for i in (1, 2, 3):
        (val / f"ILSVRC2012_val_0000000{i}.JPEG").write_bytes(b"jpeg")
    moves = imagenet.parse_valprep("mkdir -p n01751748\nmkdir -p n09193705\n"
                                   "mv ILSVRC2012_val_00000001.JPEG n01751748/\n"
                                   "mv ILSVRC2012_val_00000002.JPEG n09193705/\n"
                                   "mv ILSVRC2012_val_00000003.JPEG n01751748/\nrm -rf /\n")
    assert moves == {"ILSVRC2012_val_00000001.JPEG": "n01751748", "ILSVRC2012_val_00000002.JPEG": "n09193705",
                     "ILSVRC2012_val_00000003.JPEG": "n01751748"}
    assert imagenet.sort_val(val, moves) == 3
    assert sorted(p.name for p in (val / "n01751748").iterdir()) == ["ILSVRC2012_val_00000001.JPEG",
                                                                     "ILSVRC2012_val_00000003.JPEG"]
    with pytest.raises(ValueError, match="not a plain file"):
        imagenet.sort_val(val, {"x.JPEG": "../escape"})


# ------------------------------------------------------------------------------------------------ GlobalWheat
def test_globalwheat_arrange(tmp_path):
    for d in ("arvalis_1", "ethz_1", "uq_1"):
        _image(tmp_path / d / f"{d}_a.png", 16, 16)
    (tmp_path / "arvalis_1.json").write_text("{}")
    (tmp_path / "labels" / "arvalis_1").mkdir(parents=True)
    (tmp_path / "labels" / "arvalis_1" / "arvalis_1_a.txt").write_text("0 0.5 0.5 0.1 0.1\n")
    assert globalwheat.arrange(tmp_path) == ["arvalis_1", "ethz_1", "uq_1"]
    assert (tmp_path / "images/arvalis_1/arvalis_1_a.png").exists()
    assert (tmp_path / "annotations/arvalis_1.json").exists()
    d = check_dataset({"path": str(tmp_path), "train": ["images/arvalis_1"], "val": ["images/ethz_1"],
                       "names": {0: "wheat_head"}})
    assert d["train"] == [str(tmp_path / "images/arvalis_1")]


# ------------------------------------------------------------------------------------------------ fetch
def test_unpack_refuses_members_outside_the_folder(tmp_path):
    z = tmp_path / "evil.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("../outside.txt", "x")
    with pytest.raises(UnsafeArchive, match="leaves the dataset folder"):
        fetch.unpack_archive(z, tmp_path / "dest")
    t = tmp_path / "evil.tar"
    _tar_with(t, {"ok.txt": b"x", "../outside.txt": b"x"})
    with pytest.raises(UnsafeArchive, match="outside"):
        fetch.unpack_archive(t, tmp_path / "dest")
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "dest" / "ok.txt").exists()
    good = tmp_path / "good.tar.gz"
    with tarfile.open(good, "w:gz") as f:
        info = tarfile.TarInfo("sub/a.txt")
        info.size = 3
        f.addfile(info, io.BytesIO(b"abc"))
    assert fetch.unpack_archive(good, tmp_path / "dest") and (tmp_path / "dest/sub/a.txt").read_text() == "abc"
    assert not fetch.unpack_archive(tmp_path / "dest/sub/a.txt", tmp_path / "dest")  # not an archive


# ------------------------------------------------------------------------------------------------ the YAMLs
OFFICIAL = {  # file: (class count, a few official names, official path)
    "VisDrone.yaml": (10, {0: "pedestrian", 7: "awning-tricycle", 9: "motor"}, "../datasets/VisDrone"),
    "xView.yaml": (60, {0: "Fixed-wing Aircraft", 59: "Tower"}, "../datasets/xView"),
    "Argoverse.yaml": (8, {6: "traffic_light", 7: "stop_sign"}, "../datasets/Argoverse"),
    "GlobalWheat2020.yaml": (1, {0: "wheat_head"}, "../datasets/GlobalWheat2020"),
    "SKU-110K.yaml": (1, {0: "object"}, "../datasets/SKU-110K"),
    "Objects365.yaml": (365, {0: "Person", 364: "Table Tennis"}, "../datasets/Objects365"),
    "ImageNet.yaml": (1000, {0: "tench", 986: "yellow lady's slipper", 999: "toilet paper"}, "../datasets/imagenet"),
    "ImageNet10.yaml": (10, {9: "ostrich"}, "../datasets/imagenet10"),
    "ImageNet100.yaml": (100, {0: "tench"}, "../datasets/imagenet100"),
    "ImageNet1000.yaml": (1000, {999: "toilet paper"}, "../datasets/imagenet1000"),
    "coco128-seg.yaml": (80, {0: "person", 79: "toothbrush"}, "../datasets/coco128-seg"),
}


@pytest.mark.parametrize("name", sorted(OFFICIAL))
def test_official_yaml_found_by_name_with_official_facts(name):
    f = find_yaml(name)
    assert f == ROOT / "data" / name
    d = yaml.safe_load(f.read_text())
    n, some, path = OFFICIAL[name]
    assert len(d["names"]) == n and sorted(d["names"]) == list(range(n))
    assert all(d["names"][k] == v for k, v in some.items())
    assert d["path"] == path


@pytest.mark.parametrize("name", sorted(set(OFFICIAL) - {"coco128-seg.yaml"}))
def test_download_entries_are_consented_python_calling_a_converter(name, monkeypatch):
    monkeypatch.delenv(ALLOW_SCRIPTS_ENV, raising=False)
    entry = yaml.safe_load((ROOT / "data" / name).read_text())["download"]
    assert entry.startswith("from utils.data.converters import ")
    with pytest.raises(DownloadScriptRefused, match=str(ROOT / "data" / name)):
        check_dataset(name)  # `train.py --data VisDrone.yaml` finds it, and stops in one line: data missing


def _from_yaml(name, root):
    """The official YAML with its path pointed at root (absolute), as a dict for check_dataset."""
    d = yaml.safe_load((ROOT / "data" / name).read_text())
    d["path"] = str(root)
    return d


def test_visdrone_yaml_download_entry_end_to_end(tmp_path, monkeypatch):
    """The YAML's whole `download:` entry with consent, fetch replaced by laying the unzipped splits down."""
    fetched = []

    def fake_download(urls, dir, **kw):
        fetched.extend(urls)
        for s in visdrone.SPLITS:
            _visdrone_split(dir / s)

    monkeypatch.setattr(fetch, "download", fake_download)
    d = check_dataset(_from_yaml("VisDrone.yaml", tmp_path / "VisDrone"), allow_scripts=True)
    assert [u.rsplit("/", 1)[1] for u in fetched] == [f"{s}.zip" for s in visdrone.SPLITS]
    assert d["val"] == str(tmp_path / "VisDrone" / "VisDrone2019-DET-val" / "images")
    _close(tmp_path / "VisDrone/VisDrone2019-DET-train/labels/0000002.txt", [[0, 0.2, 0.2, 0.2, 0.2]])


def test_sku110k_yaml_download_entry_end_to_end(tmp_path, monkeypatch):
    def fake_download(url, dir, **kw):
        _sku_raw(dir / "SKU110K_fixed")

    monkeypatch.setattr(fetch, "download", fake_download)
    d = check_dataset(_from_yaml("SKU-110K.yaml", tmp_path / "SKU-110K"), allow_scripts=True)
    assert d["val"] == str(tmp_path / "SKU-110K" / "val.txt")
    _close(tmp_path / "SKU-110K/labels/val_0.txt", [[0, 0.4, 0.225, 0.5, 0.25]])


def test_xview_yaml_download_entry_needs_the_manual_archives(tmp_path):
    with pytest.raises(Exception, match="challenge.xviewdataset.org"):
        check_dataset(_from_yaml("xView.yaml", tmp_path / "xView"), allow_scripts=True)


def test_hyp_files_found_by_name():
    from utils.engine.hyp import load_hyp
    h = load_hyp("hyp.no-augmentation.yaml")
    aug = ("hsv_h", "hsv_s", "hsv_v", "degrees", "translate", "scale", "shear", "perspective", "flipud", "fliplr",
           "mosaic", "mixup", "copy_paste")
    assert all(h[k] == 0 for k in aug) and h["lr0"] == 0.01 and h["lrf"] == 0.1 and h["obj"] == 0.7
    assert load_hyp("hyp.VOC.yaml")["anchors"] == 3.412 and load_hyp("hyp.VOC.yaml")["mosaic"] == 0.85834
    assert load_hyp("hyp.Objects365.yaml")["anchors"] == 3.2 and load_hyp("hyp.Objects365.yaml")["lr0"] == 0.00258
    base = set(load_hyp("hyp.scratch-low.yaml"))
    for name in ("hyp.no-augmentation.yaml", "hyp.VOC.yaml", "hyp.Objects365.yaml"):
        assert base <= set(load_hyp(name)) | {"anchors"}, name


@pytest.mark.slow
def test_train_finds_official_data_and_hyp_files_by_name(tmp_path):
    """`train.py --data VisDrone.yaml` finds data/VisDrone.yaml (and, the data missing, stops in one line at its
    consented download); `--hyp hyp.no-augmentation.yaml` is read from data/hyps/ and trains."""
    from tests.helpers.train_helpers import make_tiny_dataset, run_train
    if (ROOT.parent / "datasets" / "VisDrone").exists():
        pytest.skip("a VisDrone copy is there: the run would train on it")
    r = run_train(["--data", "VisDrone.yaml", "--cfg", "yolov5n.yaml", "--weights", "", "--epochs", "1",
                   "--project", tmp_path / "runs"])
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert str(ROOT / "data" / "VisDrone.yaml") in last and ALLOW_SCRIPTS_ENV in last
    assert not (ROOT.parent / "datasets" / "VisDrone").exists()
    data = make_tiny_dataset(tmp_path / "tiny", n_train=4, n_val=2, size=64)
    r = run_train(["--data", data, "--cfg", "yolov5n.yaml", "--weights", "", "--img", "64", "--batch", "2",
                   "--epochs", "1", "--hyp", "hyp.no-augmentation.yaml", "--project", tmp_path / "runs", "--name",
                   "noaug", "--noplots", "--device", "cpu"])
    assert r.returncode == 0, r.stderr[-3000:]
    saved = yaml.safe_load((tmp_path / "runs" / "noaug" / "hyp.yaml").read_text())
    assert saved["mosaic"] == 0 and saved["fliplr"] == 0 and saved["lrf"] == 0.1 and saved["obj"] == 0.7
