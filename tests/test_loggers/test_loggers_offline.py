"""W&B, Comet, ClearML and MLflow, each through its own offline mode (or a local file store): a fake two-epoch run is
driven through Loggers, then the files the package wrote are read back and checked (project and run names, the
options and hyperparameters, the per-epoch values, the images and the final model). Each test skips when its package
is not installed (the PyTorch environment installs them; tests/test_loggers_guard.py covers the calls without them)."""
import glob
import json
import struct
import time
import zipfile

import cv2
import numpy as np
import pytest
import yaml

from utils.loggers import KEYS, RESULT_IMAGES, Loggers
from utils.loggers.options import LogOptions

HYP = {"lr0": 0.01, "momentum": 0.937, "anchor_t": 4.0}
ROWS = [np.round(np.arange(13) * 0.01 + 0.1 * e, 5) for e in range(2)]  # epoch 1 is the best


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    """Whatever a package writes into the working directory (wandb/, .cometml-runs/) stays out of the checkout."""
    monkeypatch.chdir(tmp_path)
    # comet_ml, once imported, also turns MLflow runs into Comet experiments unless told not to
    monkeypatch.setenv("COMET_DISABLE_AUTO_LOGGING", "1")


def run_opt(save_dir, **kw):
    o = dict(project=str(save_dir.parent), name=save_dir.name, entity=None, upload_dataset=False, bbox_interval=-1,
             artifact_alias="latest", epochs=2, save_period=-1, exist_ok=False, resume=False, evolve=False,
             noplots=False, sync_bn=False, data=str(save_dir / "tiny.yaml"), imgsz=64, batch_size=2)
    o.update(kw)
    return LogOptions.of(o)  # the loggers' options of a run with these flags


def fake_run(tmp_path, include, **opt_kw):
    """A run folder with what a real run has on disk at each point, driven through Loggers' calls in order."""
    save_dir = tmp_path / "runs" / "exp7"
    (save_dir / "weights").mkdir(parents=True)
    (save_dir / "tiny.yaml").write_text(yaml.safe_dump({"path": str(tmp_path), "train": "images", "val": "images",
                                                        "nc": 2, "names": {0: "a", 1: "b"}}))
    (save_dir / "opt.yaml").write_text("epochs: 2\n")
    (save_dir / "hyp.yaml").write_text(yaml.safe_dump(HYP))
    opt = run_opt(save_dir, **opt_kw)
    lg = Loggers(save_dir, opt, HYP, include=("csv", *include))
    lg.on_pretrain_routine_end({"path": str(tmp_path), "train": None, "val": None, "nc": 2})
    for epoch, vals in enumerate(ROWS):
        lg.on_fit_epoch_end(list(vals), epoch, best_fitness=0.5, fi=0.5 if epoch == 1 else 0.1)
    for name in ("labels.jpg", "train_batch0.jpg", "val_batch0_labels.jpg", *RESULT_IMAGES):
        cv2.imwrite(str(save_dir / name), np.full((16, 24, 3), 100, np.uint8))
    (save_dir / "weights" / "best.pt").write_bytes(b"best checkpoint")
    lg.on_run_end(save_dir / "weights" / "last.pt", save_dir / "weights" / "best.pt", 1, list(ROWS[1][3:10]))
    return save_dir, lg


# ---------------------------------------------------------------------------------------------------------- W&B
def wandb_records(path):
    """Records of a .wandb transaction log: a 7-byte header (':W&B', magic, version), then 32 KiB blocks of chunks
    with a 7-byte header each (crc32c, length, type: 1 full, 2 first, 3 middle, 4 last), as leveldb's log."""
    from wandb.proto import wandb_internal_pb2 as pb
    data, pos, buf, out = open(path, "rb").read(), 7, b"", []
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        space = 32768 - pos % 32768
        if space < 7:
            pos += space
            continue
        _, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0 and n == 0:  # padding to the block's end
            pos += space
            continue
        chunk, pos = data[pos + 7:pos + 7 + n], pos + 7 + n
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(buf)
            out.append(rec)
    return out


def test_wandb_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    save_dir, lg = fake_run(tmp_path, ["wandb"], entity="team", name="exp7")
    assert lg.cloud["wandb"]  # still on: no call failed
    files = glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "run-*.wandb"))
    assert len(files) == 1
    for _ in range(100):  # the service process (wandb-core) may still be writing the log when finish() returns
        recs = wandb_records(files[0])
        if any(r.WhichOneof("record_type") == "exit" for r in recs):
            break
        time.sleep(0.1)
    run = next(r.run for r in recs if r.WhichOneof("record_type") == "run")
    assert (run.project, run.display_name, run.entity) == ("runs", "exp7", "team")  # --project's folder name
    config = {u.key: json.loads(u.value_json) for u in run.config.update}
    assert config["hyp"] == HYP and config["epochs"] == 2
    history = [{i.nested_key[0] if i.nested_key else i.key: i.value_json for i in r.history.item}
               for r in recs if r.WhichOneof("record_type") == "history"]
    epochs = [h for h in history if "metrics/mAP_0.5" in h]
    assert [round(float(h["metrics/mAP_0.5"]), 5) for h in epochs[:2]] == [ROWS[0][5], ROWS[1][5]]
    assert all(k in epochs[0] for k in KEYS)
    media = {k for h in history for k in h}
    assert {"Labels", "Mosaics", "Validation", "Results"} <= media
    summary = {}
    for r in recs:
        if r.WhichOneof("record_type") == "summary":
            summary.update({(u.nested_key[0] if u.nested_key else u.key): u.value_json for u in r.summary.update})
    assert json.loads(summary["best/epoch"]) == 1
    arts = [r.artifact for r in recs if r.WhichOneof("record_type") == "artifact"]
    assert any(a.type == "model" and a.name.startswith("run_") for a in arts)


# -------------------------------------------------------------------------------------------------------- Comet
def test_comet_offline(tmp_path, monkeypatch):
    pytest.importorskip("comet_ml")
    monkeypatch.setenv("COMET_MODE", "offline")
    monkeypatch.setenv("COMET_OFFLINE_DIRECTORY", str(tmp_path / "comet"))
    monkeypatch.setenv("COMET_PROJECT_NAME", "yolov5-test")
    monkeypatch.setenv("COMET_LOG_BATCH_METRICS", "true")
    monkeypatch.delenv("COMET_API_KEY", raising=False)
    save_dir, lg = fake_run(tmp_path, ["comet"])
    assert lg.cloud["comet"]
    archives = glob.glob(str(tmp_path / "comet" / "*.zip"))
    assert len(archives) == 1
    with zipfile.ZipFile(archives[0]) as z:
        messages = [json.loads(line) for line in z.read("messages.json").decode().splitlines() if line.strip()]
        experiment = json.loads(z.read("experiment.json"))
    assert experiment["project_name"] == "yolov5-test"
    others = {m["payload"]["key"]: m["payload"]["value"] for m in messages if m["type"] == "log_other"}
    assert others["Name"] == "exp7" and others["Created from"] == "YOLOv5"
    params = {m["payload"]["param"]["paramName"]: m["payload"]["param"]["paramValue"]
              for m in messages if m["type"] == "parameter_msg"}
    assert params["lr0"] == 0.01 and params["epochs"] == 2
    metrics = [m["payload"]["metric"] for m in messages if m["type"] == "metric_msg"]
    maps = [(m["epoch"], round(float(m["metricValue"]), 5)) for m in metrics if m["metricName"] == "metrics/mAP_0.5"]
    assert maps == [(0, ROWS[0][5]), (1, ROWS[1][5])]
    uploads = {m["payload"]["additional_params"]["fileName"] for m in messages if m["type"] == "file_upload"}
    assert {"hyperparameters.json", "opt.yaml", "tiny.yaml", "results.csv", "labels.jpg", *RESULT_IMAGES} <= uploads


# ------------------------------------------------------------------------------------------------------ ClearML
def test_clearml_offline(tmp_path, monkeypatch):
    import signal
    import sys
    pytest.importorskip("clearml")
    monkeypatch.setenv("CLEARML_OFFLINE_MODE", "1")
    monkeypatch.setenv("CLEARML_CACHE_DIR", str(tmp_path / "clearml"))
    hooks = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.excepthook)
    save_dir, lg = fake_run(tmp_path, ["clearml"], name="exp")
    assert lg.cloud["clearml"]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.excepthook) == hooks  # put back
    sessions = [p for p in glob.glob(str(tmp_path / "clearml" / "offline" / "offline-*")) if not p.endswith(".zip")]
    assert len(sessions) == 1
    task = json.load(open(f"{sessions[0]}/task.json"))
    assert task["name"] == "Training" and "YOLOv5" in task["tags"]  # exp -> "Training", as official
    assert task["project_name"] == str(tmp_path / "runs")  # --project outside runs/: its own name
    hyper = task["hyperparams"]["Hyperparameters"]
    assert {k.split("/")[-1] for k in hyper} >= set(HYP)
    events = [e for line in open(f"{sessions[0]}/metrics.jsonl") for e in json.loads(line)]
    scalars = [(e["iter"], round(e["value"], 5)) for e in events
               if e["type"] == "training_stats_scalar" and e["metric"] == "metrics" and e["variant"] == "mAP_0.5"]
    assert scalars == [(0, ROWS[0][5]), (1, ROWS[1][5])]
    singles = {e["variant"] for e in events if e["type"] == "training_stats_scalar" and e["metric"] == "Summary"}
    assert "metrics/mAP_0.5:0.95" in singles
    images = {(e["metric"], e["variant"]) for e in events if e["type"] == "training_debug_image"}
    assert ("results", "results.png") in images and ("Mosaics", "train.jpg") in images
    models = {a["key"]: a["uri"] for a in task["execution"]["artifacts"]}
    assert open(models["Best Model"], "rb").read() == b"best checkpoint"


# ------------------------------------------------------------------------------------------------------- MLflow
def test_mlflow_local_file_store(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"file:{store}")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    save_dir, lg = fake_run(tmp_path, ["mlflow"])
    assert lg.cloud["mlflow"]
    runs = [p for p in store.glob("*/*") if (p / "meta.yaml").is_file()]
    assert len(runs) == 1
    run = runs[0]
    experiment = yaml.safe_load((run.parent / "meta.yaml").read_text())
    assert experiment["name"] == "runs"  # the --project folder's name
    assert (run / "tags" / "mlflow.runName").read_text() == "exp7"
    assert yaml.safe_load((run / "meta.yaml").read_text())["status"] == 3  # FINISHED: ended by the run's last call
    assert (run / "params" / "hyp" / "lr0").read_text() == "0.01"
    lines = (run / "metrics" / "metrics" / "mAP_0.5:0.95").read_text().split("\n")
    assert [(int(s), round(float(v), 5)) for _, v, s in (x.split() for x in lines if x)] == \
        [(0, ROWS[0][6]), (1, ROWS[1][6])]
    assert (run / "artifacts" / "weights" / "best.pt").read_bytes() == b"best checkpoint"
    assert {p.name for p in (run / "artifacts" / "results").iterdir()} == set(RESULT_IMAGES)
    assert (run / "artifacts" / "results.csv").is_file()
