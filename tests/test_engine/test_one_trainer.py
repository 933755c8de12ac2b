"""One trainer for the three tasks: train.py, segment/train.py and classify/train.py run the one main() of
utils/engine/run.py, which builds every task's run with the one build_training() (a task answers only through its
TrainerSteps); classification resumes through them. These fail if a task-specific skeleton (its own build, main or
resume path, or a namespace of another script's flags) comes back."""
import ast
import importlib
import importlib.util
from argparse import Namespace

import cv2
import numpy as np
import pytest

from tests.helpers.door_guard import guard_steps
from tests.helpers.train_helpers import ROOT
from utils import backend
from utils.distributed import DistContext

SCRIPTS = ("train.py", "segment/train.py", "classify/train.py")
# what a training script's own main()/resume skeleton would call; the engine's main() calls them for all three
SKELETON_NAMES = {"training_device", "process_group", "increment_path", "read_resumed_checkpoint",
                  "check_saved_options", "build_training", "TrainLoop", "SimpleNamespace", "DistContext"}


def _calls(path):
    """Names called or read in a file (bare names and the last part of dotted ones)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr


def test_no_task_keeps_a_skeleton_of_its_own():
    assert importlib.util.find_spec("utils.engine.classify_build") is None
    for script in SCRIPTS:
        own = SKELETON_NAMES & set(_calls(ROOT / script))
        assert not own, f"{script} builds or launches a run itself: {sorted(own)}"
    # the parts of a run are made in one place, and the loop is started in one place
    makers = {str(p.relative_to(ROOT)) for p in (ROOT / "utils").rglob("*.py")
              if "TrainingParts(" in p.read_text() and "class TrainingParts" not in p.read_text()}
    assert makers == {"utils/engine/build.py"}
    starters = {str(p.relative_to(ROOT)) for p in (ROOT / "utils").rglob("*.py") if "TrainLoop(parts" in p.read_text()}
    assert starters == {"utils/engine/run.py"}


def _script_kwargs(module, shared_dir, weights):
    if module == "classify.train":
        return {"model": str(weights), "data": str(shared_dir / "data" / "coco128-cls"), "imgsz": 32}
    data = "coco128-seg.yaml" if module == "segment.train" else "coco128.yaml"
    return {"weights": str(weights), "data": data, "imgsz": 64}


@pytest.mark.parametrize("module,task", [("train", "detect"), ("segment.train", "segment"),
                                         ("classify.train", "classify")])
def test_each_script_reaches_the_one_main_and_the_one_build(module, task, monkeypatch, tmp_path, shared_dir,
                                                            yolov5n_pt):
    import utils.engine.build
    import utils.engine.run as run
    assert run.build_training is utils.engine.build.build_training
    seen = {}

    class Built(Exception):
        pass

    def main(opt, script, callbacks=None):
        seen["script"] = script
        return real_main(opt, script, callbacks=callbacks)

    def build(opt, hyp, device, dist, task_plugin, options=None):
        seen["task"], seen["options"], seen["opt"] = task_plugin, options, opt
        raise Built

    real_main = run.main
    monkeypatch.setattr(run, "main", main)
    monkeypatch.setattr(run, "build_training", build)
    with pytest.raises(Built):
        importlib.import_module(module).run(**_script_kwargs(module, shared_dir, yolov5n_pt), epochs=1,
                                            device="cpu", workers=0, project=str(tmp_path / "runs"))
    assert isinstance(seen["script"], run.TrainScript) and seen["task"].name == task
    assert isinstance(seen["options"], run.RunOptions)
    opt = seen["opt"]
    if task == "classify":  # its own flags only: no detection flag was made up for the launch checks or the build
        assert seen["options"].patience == 0 and not hasattr(opt, "sync_bn") and not hasattr(opt, "image_weights")
        assert seen["task"].trainer.nominal_batch is None
    else:
        assert seen["options"] == run.RunOptions.from_opt(opt) and seen["task"].trainer.read_data is None


def _image_folder(root, classes=("dark", "bright"), n_train=4, n_val=2):
    rng = np.random.default_rng(0)
    for split, n in (("train", n_train), ("val", n_val)):
        for i, c in enumerate(classes):
            (root / split / c).mkdir(parents=True)
            for j in range(n):
                im = rng.integers(0, 100, (40, 40, 3)) + 150 * i
                cv2.imwrite(str(root / split / c / f"{j}.png"), im.astype(np.uint8))
    return root


def test_classification_resumes_through_the_one_build(tmp_path, monkeypatch):
    """Two epochs of a 4-layer classifier at 32 px, in process (4 s under PyTorch, 7 s under OneFlow)."""
    from classify import train as cls_train
    from utils.checkpoint import load_checkpoint
    from utils.engine.build import build_training
    from utils.engine.hooks import CheckpointHook, default_hooks
    from utils.engine.loop import HookBase, TrainLoop
    from utils.tasks.classify import CLASSIFY

    class StopAfterFirstEpoch(HookBase):
        def after_epoch(self):
            self.loop.request_stop()

    data = _image_folder(tmp_path / "data")
    opt = cls_train.parse_opt(True, args=["--model", "yolov5n.yaml", "--data", str(data), "--img", "32",
                                          "--epochs", "2", "--batch-size", "4", "--workers", "0", "--device", "cpu",
                                          "--seed", "1", "--cutoff", "4"])
    opt.weights, opt.save_dir = "", str(tmp_path / "exp")  # as main() settles a new run
    cpu = backend.device("cpu")
    called = []
    guard_steps(monkeypatch, called)  # no step sees the namespace: it gets the frozen ClassifierInputs
    parts = build_training(opt, None, cpu, DistContext(), CLASSIFY, options=cls_train.run_options(opt))
    assert len(called) == 7
    s = parts.schedule  # no warmup, one optimizer step per batch, the weight decay as given (official)
    assert (s.warmup_iters, s.nominal_batch, s.at(0, 0).accumulate) == (-1, 4, 1)
    assert parts.hyp == {"lr0": 0.001, "lrf": 0.01, "momentum": 0.9, "weight_decay": 5e-5, "label_smoothing": 0.1}
    assert parts.names == ["bright", "dark"] and parts.imgsz == 32 and "hyp" not in parts.recorded_opt
    TrainLoop(parts, [CheckpointHook(), StopAfterFirstEpoch()]).train()  # last.pt of epoch 0 of 2, unstripped
    parts.plots.close()
    last = tmp_path / "exp" / "weights" / "last.pt"

    ropt = cls_train.resume_opt(Namespace(resume=str(last)))  # the engine's one resume path
    assert (ropt.resume, ropt.weights, ropt.model, ropt.epochs) == (True, str(last), "yolov5n.yaml", 2)
    resumed = build_training(ropt, None, cpu, DistContext(), CLASSIFY, options=cls_train.run_options(ropt))
    ck = load_checkpoint(last, map_location="cpu", build_models=CLASSIFY.build_model)
    assert (resumed.state.start_epoch, resumed.state.resumed) == (1, True)
    assert [g["lr"] for g in resumed.optimizer.param_groups] == [g["lr"] for g in ck["optimizer"]["param_groups"]]
    saved = {k: backend.to_numpy(v) for k, v in ck["model"].state_dict().items()}
    for k, v in resumed.model.state_dict().items():  # the exact fp32 weights of epoch 0
        np.testing.assert_array_equal(backend.to_numpy(v), saved[k], err_msg=k)
    try:
        TrainLoop(resumed, default_hooks(resumed)).train()
    finally:
        resumed.plots.close()
    rows = (tmp_path / "exp" / "results.csv").read_text().splitlines()
    # the resumed epoch's row (the first phase ran without the results hook) under the official columns
    assert len(rows) == 2 and rows[0].replace(" ", "").startswith("epoch,train/loss,val/loss")
    assert rows[1].split(",")[0].strip() == "1"
    assert load_checkpoint(last, tensors=False, build_models=False)["epoch"] == -1  # finished: stripped
