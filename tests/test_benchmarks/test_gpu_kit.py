"""benchmarks/gpu_kit.py, the one command a remote GPU machine runs: its pure parts (ratio, the training table, the
repeated dataset, the pytest summary, the JSON's sections), the clock it puts on a trainer (benchmarks/
train_clock.py), and (slow) the CPU dry run of the kit's command, so that the kit cannot rot between runs on a
GPU."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from utils.backend import IS_TORCH

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from benchmarks import gpu_kit_tables as gpu_kit  # noqa: E402  (the kit's pure parts)

ROW_KEYS = ("model", "img", "batch", "flags", "official_img_s", "project_img_s", "ratio", "official_peak_mib",
            "project_peak_mib", "official_amp")


def test_ratio_is_project_over_official_and_none_when_missing():
    assert gpu_kit.ratio(100.0, 150.0) == 1.5
    assert gpu_kit.ratio(200.0, 100.0) == 0.5
    assert gpu_kit.ratio(None, 100.0) is None and gpu_kit.ratio(100.0, None) is None
    assert gpu_kit.ratio(0.0, 100.0) is None


def test_train_rows_pair_each_project_run_with_the_official_one():
    runs = [{"side": "official", "batch": 16, "flags": None, "img_s": 400.0, "peak_mib": 9000, "amp": True,
             "s_per_epoch": 2.5},
            {"side": "project", "batch": 16, "flags": False, "img_s": 500.0, "peak_mib": 8000, "amp": True},
            {"side": "project", "batch": 16, "flags": True, "img_s": 600.0, "peak_mib": 7000, "amp": True},
            {"side": "official", "batch": 64, "flags": None, "error": "ran past 60 s", "amp": False},
            {"side": "project", "batch": 64, "flags": True, "img_s": 900.0, "peak_mib": 20000, "amp": True}]
    rows = gpu_kit.train_rows(runs, "yolov5s.yaml", 640, [16, 64], [False, True])
    assert len(rows) == 4 and all(set(ROW_KEYS) <= set(r) for r in rows)
    by = {(r["batch"], r["flags"]): r for r in rows}
    on16 = by[(16, " ".join(gpu_kit.FLAGS_ON))]
    assert on16["model"] == "yolov5s" and on16["ratio"] == 1.5 and on16["official_peak_mib"] == 9000
    assert on16["project_peak_mib"] == 7000 and on16["official_amp"] is True and on16["official_s_epoch"] == 2.5
    assert by[(16, "")]["ratio"] == 1.25
    b64 = by[(64, " ".join(gpu_kit.FLAGS_ON))]
    assert b64["official_img_s"] is None and b64["ratio"] is None and b64["official_amp"] is False
    assert b64["errors"] == ["ran past 60 s"]
    assert by[(64, "")]["project_img_s"] is None  # not run


def test_repeated_dataset_has_distinct_paths_and_labels(coco128_dir, tmp_path):
    import yaml
    y = gpu_kit.make_repeated_dataset(coco128_dir, tmp_path / "d", 300, [f"c{i}" for i in range(80)], n_val=10)
    d = yaml.safe_load(y.read_text())
    lines = Path(d["train"]).read_text().split()
    assert len(lines) == 300 == len(set(lines)) and all(Path(x).is_file() for x in lines)
    assert d["names"][3] == "c3" and len(d["names"]) == 80  # a list: the official check wants integer keys
    labels = list((tmp_path / "d" / "labels" / "train").iterdir())
    with_labels = sum((coco128_dir / "labels" / "train2017" / f"{p.stem}.txt").exists()
                      for p in sorted((coco128_dir / "images" / "train2017").glob("*.jpg")))
    assert len(labels) == with_labels * 2 + sum(  # 300 = 2 full passes over 128 + 44
        (coco128_dir / "labels" / "train2017" / f"{p.stem}.txt").exists()
        for p in sorted((coco128_dir / "images" / "train2017").glob("*.jpg"))[:44])
    assert len(list(Path(d["val"]).iterdir())) == 10
    from utils.data.files import img2label_paths  # the trainers find each repeat's labels beside its image
    assert sum(Path(p).exists() for p in img2label_paths(lines)) == len(labels)
    with pytest.raises(FileNotFoundError, match="coco128"):
        gpu_kit.make_repeated_dataset(tmp_path, tmp_path / "e", 4, ["a"])


def test_pytest_summary_and_loader_verdict():
    text = ("FAILED tests/test_cuda/test_cuda_paths.py::test_nms_on_cuda_equals_the_cpu - AssertionError\n"
            "ERROR tests/test_cuda/test_cuda_runs.py::test_val - RuntimeError\n"
            "= 1 failed, 12 passed, 3 skipped, 530 deselected, 1 error in 40.1s =")
    counts, failures = gpu_kit.parse_pytest_summary(text)
    assert counts == {"passed": 12, "failed": 1, "skipped": 3, "errors": 1, "deselected": 530}
    assert failures == ["tests/test_cuda/test_cuda_paths.py::test_nms_on_cuda_equals_the_cpu",
                        "tests/test_cuda/test_cuda_runs.py::test_val"]
    rows = [{"formulation": "project", "img_s": 800.0}, {"formulation": "project", "img_s": 1000.0},
            {"formulation": "official", "img_s": 2000.0}]
    assert gpu_kit.loader_verdict(rows, 500.0) == (2.0, False)  # this project's best loader rate only
    assert gpu_kit.loader_verdict(rows, 950.0) == (1.053, True)
    assert gpu_kit.loader_verdict(rows, None) == (None, None)
    assert gpu_kit.official_check_amp("x\n\x1b[34m\x1b[1mAMP: \x1b[0mchecks passed ✅\n") == "passed"
    assert gpu_kit.official_check_amp("\x1b[34m\x1b[1mAMP: \x1b[0mchecks failed, disabling") == "failed"
    assert gpu_kit.official_check_amp("Starting training for 2 epochs...") == "not run"


def test_assembled_json_has_every_section():
    doc = gpu_kit.assemble({"device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130"},
                           {"train": {"status": "ok", "rows": []}})
    assert doc["device"] == "NVIDIA H100 80GB HBM3" and doc["torch"] == "2.11.0+cu130"
    assert all(name in doc for name in gpu_kit.SECTIONS)
    assert doc["profile"]["status"] == "skipped" and "not run" in doc["profile"]["reason"]


FAKE_TRAINER = '''
import sys, time, torch
class Data(torch.utils.data.Dataset):
    augment = True
    def __len__(self): return 10
    def __getitem__(self, i): return torch.zeros(3), i
val = torch.utils.data.DataLoader(type("V", (Data,), {"augment": False})(), batch_size=4)
loader = torch.utils.data.DataLoader(Data(), batch_size=4, num_workers=0)
amp = torch.amp.GradScaler("cpu", enabled=True)
for epoch in range(int(sys.argv[1])):
    for x, i in loader:
        time.sleep(0.01)
    for _ in val:
        pass
print("trained")
'''


@pytest.mark.skipif(not IS_TORCH, reason="the clock patches PyTorch's DataLoader")
def test_train_clock_times_the_epochs_after_the_warm_up(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(FAKE_TRAINER)
    out = tmp_path / "clock.json"
    env = {**os.environ, "GPU_KIT_CLOCK_OUT": str(out), "GPU_KIT_CLOCK_EPOCHS": "3"}
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "train_clock.py"), str(script), "3"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "trained" in p.stdout, p.stderr[-2000:]
    c = json.loads(out.read_text())
    # 10 images in batches of 4: 3 batches an epoch; the window runs from epoch 1's first batch to epoch 2's last,
    # so it holds the steps of batches 3..7 (the last step is outside): 4 + 4 + 2 + 4 + 4 images
    assert c["nb"] == 3 and c["batches"] == 9 and c["timed_steps"] == 5 and c["timed_images"] == 18
    assert c["done"] and c["img_s"] > 0 and c["s_per_epoch"] >= 3 * 0.01
    assert c["scaler_enabled"] is True and c["device"] == "cpu"
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "train_clock.py"), str(script)],
                         env={**env, "GPU_KIT_CLOCK_EPOCHS": "1"}, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "at least 2" in bad.stderr


@pytest.mark.slow
@pytest.mark.skipif(not IS_TORCH, reason="the GPU kit runs the PyTorch backend (the device has no OneFlow)")
def test_cpu_dry_run_of_the_acceptance_command(tmp_path, coco128_dir, yolov5n_pt):
    """The issue's acceptance command, exactly: exit 0 and gpu_kit.json with every section present."""
    data, weights = os.path.relpath(coco128_dir, ROOT), os.path.relpath(yolov5n_pt, ROOT)
    out = tmp_path / "kit"
    cmd = [sys.executable, "benchmarks/gpu_kit.py", "--device", "cpu", "--dry-run", "--out", str(out), "--data", data,
           "--weights", weights]
    env = {k: v for k, v in os.environ.items() if k not in ("YOLO_BACKEND", "GPU_KIT_TEST_DEVICE")}
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads((out / "gpu_kit.json").read_text())
    assert (out / "gpu_kit.log").stat().st_size > 0
    assert doc["device"] == "cpu" and doc["torch"]
    for name in gpu_kit.SECTIONS:
        assert doc[name]["status"] in ("ok", "failed", "skipped"), name
        if doc[name]["status"] != "ok":
            assert doc[name]["reason"], name
    t = doc["cuda_tests"]
    assert t["status"] == "ok" and t["failed"] == 0 and t["passed"] > 0, t  # the tier's logic, swapped to the CPU
    rows = doc["train"]["rows"]
    assert rows and all(set(ROW_KEYS) <= set(r) for r in rows)
    assert any(r["project_img_s"] for r in rows)
    assert all(r["official_img_s"] is None for r in rows) and "no --ref" in doc["train"]["official"]
    assert doc["profile"]["rows"] and doc["profile"]["rows"][0]["host_ms"] > 0
    assert any(r["img_s"] for r in doc["loader"]["rows"])
    assert any(r.get("step_ms") for r in doc["candidates"]["rows"])
