"""benchmarks/compare_train.py: skips cleanly without the official checkout, reads val.py's summary row, and (slow,
with the checkout) runs both trainers alternately on their own coco128 copies and reports medians and a ratio."""
import json
import os
from pathlib import Path

import pytest

from tests.helpers.process_helpers import run_benchmark

ROOT = Path(__file__).resolve().parents[2]
REF = Path(os.environ.get("YOLO_REF_DIR", ROOT.parent / "ref" / "yolov5"))


def _run(args, timeout=120):
    return run_benchmark("compare_train", args, timeout)


def test_skips_cleanly_without_the_official_checkout(tmp_path):
    p = _run(["--ref", str(tmp_path / "nowhere"), "--json", str(tmp_path / "c.json")])
    assert p.returncode == 0 and "skipped: no official checkout" in p.stdout
    assert "git clone https://github.com/ultralytics/yolov5" in p.stdout and "venv" in p.stdout
    assert not (tmp_path / "c.json").exists()


def test_reads_the_all_row_and_copies_the_dataset(tmp_path, coco128_dir):
    from benchmarks.compare_train import dataset_copy, parse_all_line
    text = "Class Images Instances P R mAP50 mAP50-95\n                   all        128        929      0.634 " \
           "     0.48      0.544       0.35\n      person        128        254      0.8      0.6   0.7   0.4\n"
    assert parse_all_line(text) == [0.634, 0.48, 0.544, 0.35]
    assert parse_all_line("no table") is None
    y = dataset_copy(coco128_dir, tmp_path / "c128")
    import yaml
    d = yaml.safe_load(y.read_text())
    assert d["path"] == str(tmp_path / "c128") and len(d["names"]) == 80
    assert len(list((tmp_path / "c128" / "images" / "train2017").iterdir())) == 128
    assert not list((tmp_path / "c128").rglob("*.cache"))
    from utils.data.files import is_writeable  # the project's own test (mode bits too): each trainer caches labels
    assert is_writeable(tmp_path / "c128" / "labels" / "train2017")


@pytest.mark.slow
@pytest.mark.skipif(not (REF / "train.py").is_file() or not (REF.parent / "venv" / "bin" / "python").exists(),
                    reason=f"no official checkout and venv at {REF}")
def test_both_trainers_run_alternately(tmp_path):
    out = tmp_path / "c.json"
    p = _run(["--ref", str(REF), "--configs", "n320", "--img", "64", "--epochs", "1", "--runs", "1",
              "--workers", "1", "--no-val", "--json", str(out)], timeout=1800)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    r = json.loads(out.read_text())["train"]["n320"]
    assert r["official"]["failed"] == 0 and r["project"]["failed"] == 0, p.stdout[-3000:]
    assert r["official"]["median_s"] > 0 and r["project"]["median_s"] > 0 and r["ratio_official_over_project"] > 0
    assert r["official"]["peak_mib"] > 100 and r["project"]["peak_mib"] > 100
    assert r["official"]["median_cpu_s"] > 1 and r["project"]["median_cpu_s"] > 1  # trainers and their workers
    assert "ratio" in p.stdout


def test_task_defaults_and_commands():
    """--task picks each task's scripts, dataset, weights and defaults; detect's commands stay as they were."""
    from benchmarks.compare_train import TASKS, parse_opt, train_cmd, val_cmd
    opt = parse_opt([])
    assert opt.task == "detect" and opt.configs == ["n320", "s640"] and (opt.batch, opt.val_img) == (16, 640)
    assert opt.data.endswith("data/coco128") and opt.weights == opt.val_weights and opt.weights.endswith("yolov5n.pt")
    cmd = train_cmd("py", "/R", "/d.yaml", "yolov5n.yaml", 320, "w.pt", opt, "/p", "n")
    assert cmd == ["py", "/R/train.py", "--data", "/d.yaml", "--cfg", "/R/models/yolov5n.yaml", "--weights", "w.pt",
                   "--img", "320", "--batch-size", "16", "--epochs", "2", "--workers", "2", "--noval", "--device",
                   "cpu", "--project", "/p", "--name", "n", "--exist-ok"]
    assert val_cmd("py", "/R", "/d.yaml", "w.pt", opt, "/p", "v")[:10] == [
        "py", "/R/val.py", "--data", "/d.yaml", "--weights", "w.pt", "--img", "640", "--batch-size", "32"]

    opt = parse_opt(["--task", "segment"])
    seg = TASKS["segment"]
    assert opt.configs == ["n320seg"] and (opt.batch, opt.val_img, opt.val_batch) == (16, 320, 32)
    assert opt.data.endswith("data/coco128-seg") and opt.weights.endswith("yolov5n-seg-coco128.pt")
    assert opt.val_weights == opt.weights
    cfg, img, w = seg.configs["n320seg"]
    cmd = train_cmd("py", "/R", "/d.yaml", cfg, img, "w.pt", opt, "/p", "n", task=seg)
    assert cmd[1] == "/R/segment/train.py" and cmd[cmd.index("--cfg") + 1] == "/R/models/segment/yolov5n-seg.yaml"
    assert "--noval" in cmd and cmd[cmd.index("--img") + 1] == "320"
    assert val_cmd("py", "/R", "/d.yaml", "w.pt", opt, "/p", "v", task=seg)[1] == "/R/segment/val.py"

    opt = parse_opt(["--task", "classify", "--epochs", "3"])
    cls = TASKS["classify"]
    assert opt.configs == ["n128cls"] and (opt.batch, opt.val_img, opt.val_batch) == (64, 128, 64)
    assert opt.data.endswith("data/coco128-cls") and opt.weights.endswith("yolov5n.pt")
    assert opt.val_weights.endswith("yolov5n-cls-coco128cls.pt")
    cfg, img, w = cls.configs["n128cls"]
    cmd = train_cmd("py", "/R", "/cls", cfg, img, "w.pt", opt, "/p", "n", task=cls)
    assert cmd[:6] == ["py", "/R/classify/train.py", "--model", "w.pt", "--data", "/cls"]
    assert "--cfg" not in cmd and "--noval" not in cmd and cmd[cmd.index("--epochs") + 1] == "3"
    assert cmd[cmd.index("--batch-size") + 1] == "64" and cmd[cmd.index("--img") + 1] == "128"
    v = val_cmd("py", "/R", "/cls", "c.pt", opt, "/p", "v", task=cls)
    assert v[1] == "/R/classify/val.py" and v[v.index("--img") + 1] == "128"


def test_task_rejects_another_tasks_config(capsys):
    from benchmarks.compare_train import parse_opt
    with pytest.raises(SystemExit) as e:
        parse_opt(["--task", "segment", "--configs", "n320"])
    assert e.value.code == 2 and "not --task segment configs" in capsys.readouterr().err


def test_reads_the_segment_and_classify_rows_and_the_official_augmentations(tmp_path):
    from benchmarks.compare_train import TASKS, dataset_copy, parse_all_line, ref_augmentations
    seg = "  Class Images Instances Box(P R mAP50 mAP50-95) Mask(P R mAP50 mAP50-95)\n" \
          "    all   128   929   0.317  0.0477  0.0419  0.0242   0.314  0.0383  0.0324  0.0153\n"
    assert parse_all_line(seg, *TASKS["segment"].row) == [0.317, 0.0477, 0.0419, 0.0242, 0.314, 0.0383, 0.0324,
                                                          0.0153]
    cls = "   Class  Images  top1_acc  top5_acc\n     all      53     0.642     0.906\n  bowl   4   0.5   1\n"
    assert parse_all_line(cls, *TASKS["classify"].row) == [0.642, 0.906]
    assert parse_all_line(cls) is None  # detection's row needs more columns
    assert ref_augmentations("\x1b[34m\x1b[1malbumentations: \x1b[0mnot found, install with ...").startswith("none")
    assert ref_augmentations("albumentations: RandomResizedCrop(...)") == "albumentations"
    assert ref_augmentations("nothing said") is None
    src = tmp_path / "src" / "train" / "cat"
    src.mkdir(parents=True)
    (src / "a.jpg").write_bytes(b"x")
    d = dataset_copy(tmp_path / "src", tmp_path / "copy", image_folder=True)
    assert d == tmp_path / "copy" and (d / "train" / "cat" / "a.jpg").read_bytes() == b"x"
    assert not list(tmp_path.glob("*.yaml"))
