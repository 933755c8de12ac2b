"""train.py flags and outputs on a tiny synthetic set (64 px, a few images): each run combines several flags and
checks what they must change. Faults (non-finite loss, Ctrl-C, full disk, unwritable folder) run in-process."""
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.helpers.train_helpers import make_tiny_dataset, run_train
from utils import backend
from utils.checkpoint.run_options import OFFICIAL_OPT_DEFAULTS


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_tiny_dataset(tmp_path_factory.mktemp("tiny"), n_train=8, n_val=4, size=96)


def _base(data, project, epochs=2, batch=4):
    return ["--data", data, "--cfg", "yolov5n.yaml", "--weights", "", "--img", "64", "--batch-size", batch,
            "--epochs", epochs, "--device", "cpu", "--project", project, "--name", "exp"]


def _ok(r):
    assert r.returncode == 0, (r.stdout[-2000:] + r.stderr[-4000:])
    return r


def _load(path):
    from utils.checkpoint import load_checkpoint
    return load_checkpoint(path, tensors=False, build_models=False)


def _rows(csv):
    from utils.loggers import read_results_csv
    return read_results_csv(csv)


@pytest.mark.slow
def test_flag_set_one(data, tmp_path):
    """--cos-lr --label-smoothing --optimizer AdamW --freeze --save-period --single-cls --multi-scale
    --image-weights --cache ram --noautoanchor --seed --bbox_iou_optim --multi_tensor_optimizer --workers 0."""
    _ok(run_train(_base(data, tmp_path) + [
        "--cos-lr", "--label-smoothing", "0.1", "--optimizer", "AdamW", "--freeze", "3", "--save-period", "1",
        "--single-cls", "--multi-scale", "--image-weights", "--cache", "ram", "--noautoanchor", "--seed", "5",
        "--bbox_iou_optim", "--multi_tensor_optimizer", "--workers", "0", "--noplots"]))
    d = tmp_path / "exp"
    opt = yaml.safe_load((d / "opt.yaml").read_text())
    assert opt["bbox_iou_optim"] is True and opt["multi_tensor_optimizer"] is True
    assert opt["optimizer"] == "AdamW" and opt["cos_lr"] is True and opt["freeze"] == [3] and opt["seed"] == 5
    assert (d / "weights" / "epoch0.pt").is_file() and (d / "weights" / "epoch1.pt").is_file()
    e0, last = _load(d / "weights" / "epoch0.pt"), _load(d / "weights" / "last.pt")
    assert e0["nc"] == 1 and e0["model"]["yaml"]["nc"] == 1 and e0["hyp"]["label_smoothing"] == 0.1
    assert e0["optimizer"] is not None and len(e0["optimizer"]["param_groups"]) == 3
    sd0, sd1 = e0["ema"]["state_dict"], last["model"]["state_dict"]
    init = _load(d / "weights" / "epoch0.pt")["model"]["state_dict"]  # frozen layers never move from init
    for k in ("model.0.conv.weight", "model.2.cv1.conv.weight"):  # layers 0-2 frozen
        np.testing.assert_allclose(sd1[k].astype(np.float32), init[k], atol=1e-3, err_msg=k)
        np.testing.assert_allclose(sd0[k], init[k], rtol=1e-6, atol=1e-7, err_msg=k)
    assert not np.allclose(sd0["model.24.m.0.weight"], sd1["model.24.m.0.weight"].astype(np.float32), atol=0)
    assert not (d / "labels.jpg").exists()  # --noplots


@pytest.mark.slow
def test_flag_set_two(data, tmp_path):
    """--rect --quad --nosave --noval --optimizer Adam --cache disk --hyp --exist-ok --patience."""
    hyp = Path(__file__).resolve().parents[2] / "data/hyps/hyp.scratch-high.yaml"
    args = _base(data, tmp_path, batch=8) + ["--rect", "--quad", "--nosave", "--noval", "--optimizer", "Adam",
                                             "--cache", "disk", "--hyp", hyp, "--patience", "5", "--workers", "0",
                                             "--noplots", "--exist-ok"]
    _ok(run_train(args))
    d = tmp_path / "exp"
    rows = _rows(d / "results.csv")
    assert rows[0]["val/box_loss"] == 0 and rows[0]["metrics/mAP_0.5"] == 0  # --noval: no validation at epoch 0
    assert rows[1]["val/box_loss"] > 0  # the final epoch is always validated
    assert not list((d / "weights").glob("epoch*.pt"))
    h = yaml.safe_load((d / "hyp.yaml").read_text())
    assert h["mixup"] == yaml.safe_load(hyp.read_text())["mixup"]
    assert yaml.safe_load((d / "opt.yaml").read_text())["rect"] is True
    _ok(run_train(args[:args.index("--epochs") + 1] + ["1"] + args[args.index("--epochs") + 2:]))
    assert not (tmp_path / "exp2").exists()  # --exist-ok reuses exp
    assert len(_rows(d / "results.csv")) == 1  # a new run, not appended


@pytest.mark.oneflow_covered_by(
    "tests/test_scripts/test_train_flags.py::test_evolve_trains_the_population_then_mutants")
@pytest.mark.slow
def test_evolve(data, tmp_path):
    _ok(run_train(_base(data, tmp_path, epochs=1) + ["--evolve", "2", "--noplots", "--workers", "0"]))
    d = tmp_path / "exp"
    lines = (d / "evolve.csv").read_text().splitlines()
    assert len(lines) == 3 and lines[0].split(",")[0].strip() == "metrics/precision"
    assert "lr0" in yaml.safe_load((d / "hyp_evolve.yaml").read_text())


def test_pretrained_transfer(yolov5n_pt, data, tmp_path):
    """--weights yolov5n.pt --cfg yolov5n.yaml with 2 classes: every tensor but the class-dependent Detect convs
    and the anchors (the yaml's are kept) comes from the checkpoint."""
    from utils.checkpoint import load_any
    from utils.dataset_config import check_dataset
    from utils.engine.initial_model import initial_model
    model = initial_model(str(yolov5n_pt), "yolov5n.yaml", [0], {"lr0": 0.01}, int(check_dataset(str(data))["nc"]),
                          backend.device("cpu"))
    ck = load_any(yolov5n_pt)["model"]["state_dict"]
    sd = {k: backend.to_numpy(v) for k, v in model.state_dict().items()}
    np.testing.assert_allclose(sd["model.0.conv.weight"], ck["model.0.conv.weight"].astype(np.float32))
    np.testing.assert_allclose(sd["model.23.cv3.bn.running_var"], ck["model.23.cv3.bn.running_var"].astype(np.float32))
    assert sd["model.24.m.0.weight"].shape[0] == 3 * 7 != ck["model.24.m.0.weight"].shape[0]


def test_unwritable_run_folder(data, tmp_path):
    import train
    from utils.engine.errors import TrainingError
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(TrainingError, match="not writable"):
        train.run(data=str(data), cfg="yolov5n.yaml", weights="", imgsz=64, epochs=1, device="cpu",
                  project=str(blocker), noplots=True)
    r = run_train(_base(data, blocker, epochs=1))
    assert r.returncode == 1 and "not writable" in r.stderr and "Traceback" not in r.stderr


# ----------------------------------------------------------------------------------------------------------------
# Every official flag, with the official default
# the official train.py's flags and defaults, as utils/checkpoint/run_options.py records them (ultralytics/yolov5
# 5081342f, vars(parse_opt()) run from its root with no arguments; save_dir is set by the run, not a flag); its paths
# are relative to its root, ours absolute: compared relative to the repository root.
OFFICIAL_TRAIN_DEFAULTS = {k: v for k, v in OFFICIAL_OPT_DEFAULTS.items() if k != "save_dir"}


def test_every_official_flag_with_its_default(root_dir):
    import train
    ours = vars(train.parse_opt(args=[]))
    for k, official in OFFICIAL_TRAIN_DEFAULTS.items():
        assert k in ours, f"--{k} missing"
        v = ours[k]
        if isinstance(official, str) and official and str(v).startswith(str(root_dir)):
            v = str(Path(v).relative_to(root_dir))
        assert v == official, f"--{k}: {v!r} != official {official!r}"
    # flags of older official versions, accepted too
    assert ours["artifact_alias"] == "latest" and ours["ndjson_console"] is False and ours["ndjson_file"] is False
    o = train.parse_opt(args=["--upload_dataset", "--batch", "-1", "--bbox_interval", "3", "--entity", "me",
                              "--evolve_population", "x", "--resume_evolve", "e.csv", "--bucket", "b"])
    assert (o.upload_dataset, o.batch_size, o.bbox_interval, o.entity) == (True, -1, 3, "me")
    assert train.parse_opt(args=["--upload_dataset", "val"]).upload_dataset == "val"


def test_cloud_flags_say_in_one_line_that_they_do_nothing(tmp_path):
    import logging
    from utils.loggers import Loggers
    from utils.loggers.options import LogOptions
    seen = []
    handler = logging.Handler()
    handler.emit = seen.append
    log = logging.getLogger("yolov5")
    log.addHandler(handler)
    try:
        Loggers(tmp_path, LogOptions.of({"entity": None, "upload_dataset": False, "bbox_interval": -1,
                                         "artifact_alias": "latest"}), include=("csv",))
        assert not [r for r in seen if "doing nothing" in r.getMessage()]  # defaults: silent
        Loggers(tmp_path, LogOptions.of({"entity": "team", "upload_dataset": "val", "bbox_interval": 2,
                                         "artifact_alias": "latest"}), include=("csv",))
    finally:
        log.removeHandler(handler)
    lines = [r.getMessage() for r in seen if "doing nothing" in r.getMessage()]
    assert len(lines) == 1 and "--entity team" in lines[0] and "--upload_dataset val" in lines[0] \
        and "--bbox_interval 2" in lines[0] and "artifact_alias" not in lines[0]


def test_ndjson_console_and_file(tmp_path, capsys):
    import json
    from utils.loggers import KEYS, Loggers
    from utils.loggers.options import LogOptions
    lg = Loggers(tmp_path, LogOptions(ndjson_console=True, ndjson_file=True), include=("csv",))
    for e in range(3):
        lg.on_fit_epoch_end([0.1 * e] * len(KEYS), e)
    printed = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    stored = [json.loads(x) for x in (tmp_path / "results.ndjson").read_text().splitlines()]
    assert printed == stored and [r["epoch"] for r in stored] == [0, 1, 2]
    assert list(stored[2]) == ["epoch", *KEYS] and stored[2]["metrics/mAP_0.5"] == pytest.approx(0.2)
    lg.truncate_csv(1)  # a resumed run drops the rows of epochs its checkpoint does not have
    assert len((tmp_path / "results.ndjson").read_text().splitlines()) == 1


# ----------------------------------------------------------------------------------------------------------------
# --hyp and --data names, AutoBatch
def test_bare_hyp_name_resolves_in_data_hyps(root_dir):
    from utils.general import RepoFileNotFound
    from utils.engine.hyp import load_hyp
    want = yaml.safe_load((root_dir / "data/hyps/hyp.scratch-high.yaml").read_text())
    assert load_hyp("hyp.scratch-high.yaml") == want
    assert load_hyp("data/hyps/hyp.scratch-high.yaml") == want
    with pytest.raises(RepoFileNotFound, match="hyp.nope.yaml.*not found"):
        load_hyp("hyp.nope.yaml")


def test_bare_data_name_resolves_under_data(root_dir, tmp_path, monkeypatch):
    from utils.dataset_config import DatasetError, find_yaml
    monkeypatch.chdir(tmp_path)  # nothing of that name in the working folder
    assert find_yaml("coco128.yaml") == root_dir / "data" / "coco128.yaml"
    assert find_yaml("hyp.scratch-med.yaml").resolve() == (root_dir / "data/hyps/hyp.scratch-med.yaml").resolve()
    with pytest.raises(DatasetError, match="nope128.yaml"):
        find_yaml("nope128.yaml")


def test_autobatch_on_cpu_falls_back_to_16():
    import logging
    from models.yolo import DetectionModel
    from utils.autobatch import check_train_batch_size
    seen = []
    handler = logging.Handler()
    handler.emit = seen.append
    log = logging.getLogger("yolov5")
    log.addHandler(handler)
    try:
        b = check_train_batch_size(DetectionModel("yolov5n.yaml"), imgsz=64, amp=True)
    finally:
        log.removeHandler(handler)
    text = [r.getMessage() for r in seen]
    assert b == 16
    assert any("Computing optimal batch size for --imgsz 64" in t for t in text)
    assert any("CUDA not detected, using default CPU batch-size 16" in t for t in text)


def test_autobatch_fits_a_line_to_the_profiled_memory():
    """The official estimate on made-up measurements: memory = 0.5 + 0.25 * batch GB on an 80 GiB device with
    1 GiB reserved and 0.5 allocated: batch = int((78.5 * 0.8 - 0.5) / 0.25) = 249, predicted use
    (0.5 + 0.25 * 249 + 1.5) / 80 = 80.3%."""
    from utils.autobatch import fit_batch_size
    mem = [0.5 + 0.25 * b for b in (1, 2, 4, 8, 16)]
    b, used = fit_batch_size(mem, 80.0, 1.0, 0.5)
    assert b == 249 and used == pytest.approx(64.25 / 80)
    # sizes 8 and 16 ran out of memory: the line from 1, 2, 4 still says 249, above the first failure -> 4
    assert fit_batch_size(mem[:3] + [None, None], 80.0, 1.0, 0.5)[0] == 4
    # a line that falls with the batch size is nonsense: the default
    assert fit_batch_size([5.0, 4.0, 3.0, 2.0, 1.0], 80.0, 1.0, 0.5, batch_size=16)[0] == 16
    assert fit_batch_size([None] * 5, 80.0, 1.0, 0.5, batch_size=8)[0] == 8


@pytest.mark.oneflow_covered_by("tests/test_scripts/test_train_flags.py::test_flag_set_one")
@pytest.mark.slow
def test_autobatch_bare_hyp_and_logger_flags_in_a_run(data, tmp_path):
    """One training run with the official day-one flags: AutoBatch on CPU (batch 16), a bare --hyp name, the cloud
    flags (one line, nothing else) and the NDJSON sinks."""
    args = _base(data, tmp_path, epochs=1, batch=-1) + [
        "--hyp", "hyp.scratch-high.yaml", "--entity", "team", "--bbox_interval", "1", "--upload_dataset",
        "--ndjson-console", "--ndjson-file", "--noplots", "--workers", "0"]
    r = _ok(run_train(args))
    out = r.stdout + r.stderr
    assert "AutoBatch: CUDA not detected, using default CPU batch-size 16" in out.replace("\x1b[34m\x1b[1m", "") \
        .replace("\x1b[0m", "")
    assert sum("doing nothing" in line for line in out.splitlines()) == 1
    d = tmp_path / "exp"
    h = yaml.safe_load((d / "hyp.yaml").read_text())
    high = yaml.safe_load((Path(__file__).resolve().parents[2] / "data/hyps/hyp.scratch-high.yaml").read_text())
    assert h["mixup"] == high["mixup"] == 0.1 and h["scale"] == high["scale"]
    assert yaml.safe_load((d / "opt.yaml").read_text())["batch_size"] == -1  # re-estimated on --resume
    assert len((d / "results.ndjson").read_text().splitlines()) == 1 and '{"epoch": 0' in r.stdout


# ----------------------------------------------------------------------------------------------------------------
# --evolve_population, --resume_evolve
def _hyp(root_dir):
    return yaml.safe_load((root_dir / "data/hyps/hyp.scratch-low.yaml").read_text())


def test_initial_population_from_a_folder_of_hyps(root_dir, tmp_path):
    from utils.evolve import initial_population
    hyp = _hyp(root_dir)
    (tmp_path / "a.yaml").write_text(yaml.safe_dump({**hyp}))  # the same genes as hyp: not trained twice
    (tmp_path / "b.yaml").write_text(yaml.safe_dump({"lr0": 0.02, "mosaic": 0.5, "not_a_gene": 3}))
    (tmp_path / "c.txt").write_text("lr0: 0.5")  # not a yaml: ignored
    pop = initial_population(hyp, folder=str(tmp_path))
    assert len(pop) == 2 and pop[0] == hyp
    assert pop[1] == {**hyp, "lr0": 0.02, "mosaic": 0.5}
    # the default folder holds the official six: low (= hyp), med, high, Objects365, VOC, no-augmentation
    stock = initial_population(hyp, folder=str(root_dir / "data/hyps"))
    assert len(stock) == 6 and {p["mixup"] for p in stock} == {0.0, 0.1, 0.04266}
    assert sorted(p["lr0"] for p in stock) == [0.00258, 0.00334, 0.01, 0.01, 0.01, 0.01]


def test_resume_evolve_from_csv_or_population_yaml(root_dir, tmp_path):
    from utils.evolve import EvolveError, initial_population, record
    hyp = _hyp(root_dir)
    old = tmp_path / "old"
    old.mkdir()
    record([0.5, 0.4, 0.3, 0.2, 0.01, 0.02, 0.03], hyp, old)
    csv = tmp_path / "new" / "evolve.csv"
    csv.parent.mkdir()
    assert initial_population(hyp, resume=str(old / "evolve.csv"), csv=csv) == []
    assert csv.read_text() == (old / "evolve.csv").read_text()
    pop_yaml = tmp_path / "evolve_population.yaml"  # the official file: {genNnumberI: {gene: value}}
    pop_yaml.write_text(yaml.safe_dump({"gen1number0": {"lr0": 0.03}, "gen1number1": {"lr0": 0.04}}))
    pop = initial_population(hyp, resume=str(pop_yaml))
    assert [p["lr0"] for p in pop] == [0.03, 0.04] and pop[0]["momentum"] == hyp["momentum"]
    with pytest.raises(EvolveError, match="nope.csv: not found"):
        initial_population(hyp, resume=str(tmp_path / "nope.csv"))
    with pytest.raises(EvolveError, match="not found"):
        initial_population(hyp, folder=str(tmp_path / "no_such_folder"))


def test_evolve_trains_the_population_then_mutants(root_dir, tmp_path):
    """evolve() with a stand-in for training: generations 0 and 1 are --hyp and the folder's other hyp, then
    mutants of the fittest; a second search resumed from that evolve.csv trains only mutants."""
    import argparse
    from utils.evolve import evolve, read_evolve_csv
    hyp = _hyp(root_dir)
    pop = tmp_path / "pop"
    pop.mkdir()
    (pop / "x.yaml").write_text(yaml.safe_dump({"lr0": 0.05}))
    trained = []

    def fake_train(h, opt, device):
        trained.append(dict(h))
        return (0.5, 0.5, h["lr0"], h["lr0"], 0.1, 0.1, 0.1)  # fitter with a larger lr0

    opt = argparse.Namespace(evolve=4, save_dir=str(tmp_path / "run"), evolve_population=str(pop),
                             resume_evolve=None, bucket="")
    evolve(dict(hyp), opt, None, fake_train)
    assert trained[0] == hyp and trained[1] == {**hyp, "lr0": 0.05}
    assert all(t != hyp and t != trained[1] for t in trained[2:])  # mutants
    keys, x = read_evolve_csv(tmp_path / "run" / "evolve.csv")
    assert len(x) == 4 and x[1, keys.index("lr0")] == pytest.approx(0.05)
    trained.clear()
    opt2 = argparse.Namespace(evolve=2, save_dir=str(tmp_path / "run2"), evolve_population=str(pop),
                              resume_evolve=str(tmp_path / "run" / "evolve.csv"), bucket="")
    evolve(dict(hyp), opt2, None, fake_train)
    assert len(trained) == 2 and hyp not in trained and {**hyp, "lr0": 0.05} not in trained
    assert len(read_evolve_csv(tmp_path / "run2" / "evolve.csv")[1]) == 6  # the 4 resumed rows + 2 new ones
