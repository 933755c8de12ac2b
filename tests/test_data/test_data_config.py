"""Dataset YAMLs (check_dataset), the shipped data/hyp YAMLs, and the offline shapes generator."""
import numpy as np
import pytest
import yaml

from utils.dataloaders import LoadImagesAndLabels
from utils.dataset_config import DatasetError, check_dataset
from utils.general import ROOT


def test_shipped_yamls_parse():
    for name, nc in (("coco128.yaml", 80), ("coco.yaml", 80), ("VOC.yaml", 20), ("shapes.yaml", 6)):
        with open(ROOT / "data" / name) as f:
            d = yaml.safe_load(f)
        assert len(d["names"]) == nc and d.get("download") and d["path"].startswith("../datasets/")
    with open(ROOT / "data" / "coco128.yaml") as f:
        d = yaml.safe_load(f)
    assert d["names"][0] == "person" and d["names"][79] == "toothbrush" and d["train"] == "images/train2017"


@pytest.mark.parametrize("name", ["low", "med", "high"])
def test_hyps_have_ultralytics_keys(name):
    with open(ROOT / "data" / "hyps" / f"hyp.scratch-{name}.yaml") as f:
        h = yaml.safe_load(f)
    keys = {"lr0", "lrf", "momentum", "weight_decay", "warmup_epochs", "warmup_momentum", "warmup_bias_lr", "box",
            "cls", "cls_pw", "obj", "obj_pw", "iou_t", "anchor_t", "fl_gamma", "hsv_h", "hsv_s", "hsv_v", "degrees",
            "translate", "scale", "shear", "perspective", "flipud", "fliplr", "mosaic", "mixup", "copy_paste"}
    assert set(h) == keys
    expect = {"low": dict(lrf=0.01, cls=0.5, obj=1.0, scale=0.5, mixup=0.0, copy_paste=0.0),
              "med": dict(lrf=0.1, cls=0.3, obj=0.7, scale=0.9, mixup=0.1, copy_paste=0.0),
              "high": dict(lrf=0.1, cls=0.3, obj=0.7, scale=0.9, mixup=0.1, copy_paste=0.1)}[name]
    assert {k: h[k] for k in expect} == expect
    assert (h["lr0"], h["hsv_s"], h["translate"], h["fliplr"], h["mosaic"]) == (0.01, 0.7, 0.1, 0.5, 1.0)


def test_check_dataset_paths_names_and_lists(tmp_path, coco128_dir):
    y = tmp_path / "d.yaml"
    y.write_text(yaml.safe_dump({"path": str(coco128_dir), "train": "images/train2017",
                                 "val": ["images/train2017"], "names": ["a", "b"]}))
    d = check_dataset(str(y))
    assert d["names"] == {0: "a", 1: "b"} and d["nc"] == 2
    assert d["train"] == str(coco128_dir / "images" / "train2017") and d["val"] == [d["train"]]
    d = check_dataset({"path": str(coco128_dir), "train": "images/train2017", "val": "images/train2017",
                       "names": {0: "x", 1: "y", 2: "z"}, "nc": 3})
    assert d["nc"] == 3 and d["names"][2] == "z"
    with pytest.raises(DatasetError, match="nc=4"):
        check_dataset({"path": str(coco128_dir), "train": "a", "val": "images/train2017", "names": ["a"], "nc": 4})
    with pytest.raises(DatasetError, match="'val:' key missing"):
        check_dataset({"train": "a", "names": ["a"]})
    with pytest.raises(DatasetError, match="It has 'trian:': a misspelling of 'train:'"):
        check_dataset({"trian": "a", "val": "b", "names": ["a"]})


@pytest.mark.framework_free  # stops before any model runs: the message is the same under both backends
@pytest.mark.slow
def test_entry_scripts_report_bad_input_in_one_line(tmp_path):
    """A bad --data or --weights ends the command with exit 1 and a message naming the file, not a traceback."""
    import os
    import subprocess
    import sys
    bad = tmp_path / "bad.yaml"
    bad.write_text("path: /nonexistent\ntrian: images\nval: images\nnames: [a]\n")
    env = {**os.environ, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
    for cmd, expect in (
            (["val.py", "--data", str(bad), "--weights", str(tmp_path / "none.pt"), "--project", str(tmp_path)],
             "none.pt"),
            (["val.py", "--data", str(bad), "--weights", str(bad), "--project", str(tmp_path)],
             "neither a checkpoint"),  # a foreign file
            (["train.py", "--data", str(bad), "--cfg", "yolov5n.yaml", "--weights", "", "--project", str(tmp_path)],
             "'trian:': a misspelling")):
        p = subprocess.run([sys.executable, *cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 1, p.stderr[-2000:]
        assert expect in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]


def test_missing_data_names_the_folder_and_download_runs_only_when_missing(tmp_path):
    root = tmp_path / "ds"
    with pytest.raises(DatasetError) as e:
        check_dataset({"path": str(root), "train": "images", "val": "images", "names": ["a"]})
    assert str(root) in str(e.value)
    # offline: a URL that cannot be fetched says where to put the data
    with pytest.raises(DatasetError) as e:
        check_dataset({"path": str(root), "train": "images", "val": "images", "names": ["a"],
                       "download": "https://127.0.0.1:9/none.zip"}, allow_scripts=True)
    assert "download failed" in str(e.value) and str(root) in str(e.value)
    # Python download code (allowed here) runs once, when the data is missing
    code = ("from pathlib import Path\n(Path(yaml['path']) / 'images').mkdir(parents=True)\n"
            "(Path(yaml['path']) / 'ran.txt').write_text('x' + ((Path(yaml['path']) / 'ran.txt').read_text() "
            "if (Path(yaml['path']) / 'ran.txt').exists() else ''))\n")
    spec = {"path": str(root), "train": "images", "val": "images", "names": ["a"], "download": code}
    check_dataset(spec, allow_scripts=True)
    check_dataset(spec, allow_scripts=True)  # data present now: not run again (mkdir would fail)
    assert (root / "ran.txt").read_text() == "x"


def test_shapes_yaml_generates_offline_and_is_learnable_shape(tmp_path):
    """The shapes YAML's download entry generates a dataset in the images/labels layout (small copy here)."""
    with open(ROOT / "data" / "shapes.yaml") as f:
        spec = yaml.safe_load(f)
    spec["path"] = str(tmp_path / "shapes")
    spec["download"] = spec["download"].replace("n_train=300, n_val=60", "n_train=16, n_val=4")
    # Python code: runs only with consent (tests/test_data/test_data_download.py)
    d = check_dataset(spec, allow_scripts=True)
    assert d["nc"] == 6
    ds = LoadImagesAndLabels(d["train"], img_size=128, batch_size=4)
    assert len(ds) == 16 and ds.scan_results[3] == 0  # nothing corrupt
    labels = np.concatenate(ds.labels)
    assert len(labels) >= 16 and set(labels[:, 0].astype(int)) <= set(range(6))
    assert labels[:, 3:].min() > 0.03 and labels[:, 3:].max() < 0.6  # objects neither tiny nor huge
    # deterministic: the same seed makes the same files
    import importlib.util
    s = importlib.util.spec_from_file_location("make_shapes", ROOT / "data" / "scripts" / "make_shapes.py")
    gen = importlib.util.module_from_spec(s)
    s.loader.exec_module(gen)
    gen.make_shapes(tmp_path / "again", n_train=16, n_val=4)
    a = (tmp_path / "shapes" / "labels" / "train" / "train_00003.txt").read_text()
    assert a == (tmp_path / "again" / "labels" / "train" / "train_00003.txt").read_text()


def test_yaml_with_python_tags_is_refused_in_one_line(tmp_path):
    """!!python/object tags would build objects (or run code) under yaml.load; safe_load refuses them, and that
    refusal names the file instead of ending in a traceback."""
    marker = tmp_path / "pwned"
    y = tmp_path / "evil.yaml"
    y.write_text(f"path: {tmp_path}\ntrain: images\nval: images\n"
                 f"names: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(DatasetError) as e:
        check_dataset(str(y))
    msg = str(e.value)
    assert str(y) in msg and "\n" not in msg and "!!python" in msg
    assert not marker.exists()


@pytest.mark.framework_free  # stops before any model runs: the message is the same under both backends
@pytest.mark.slow
def test_entry_scripts_refuse_python_tags_in_one_line(tmp_path):
    import os
    import subprocess
    import sys
    marker = tmp_path / "pwned"
    y = tmp_path / "evil.yaml"
    y.write_text(f"path: {tmp_path}\ntrain: !!python/object/apply:os.system ['touch {marker}']\nval: images\n"
                 "names: [a]\n")
    env = {**os.environ, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
    for cmd in (["train.py", "--cfg", "yolov5n.yaml", "--weights", "", "--project", str(tmp_path)],
                ["val.py", "--weights", str(ROOT.parent / "shared" / "weights" / "yolov5n.pt"), "--project",
                 str(tmp_path)]):
        p = subprocess.run([sys.executable, *cmd, "--data", str(y), "--device", "cpu"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
        assert str(y) in p.stderr and not marker.exists(), p.stderr[-3000:]
