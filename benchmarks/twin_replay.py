"""Is this project's training step the official one? Both trainers from one initial state on one set of batches.

    python benchmarks/twin_replay.py --ref ../yolov5-official [--ref-python ../venv/bin/python] [--epochs 3]

A learning study (benchmarks/learning_study.py) says whether the final mAPs agree over seeds; this says where two
runs part, iteration by iteration, with the data taken out of the question:

1. the official code builds yolov5n (6 classes, seed 0) and rounds it to fp16 values, as its train.py does to a new
   run; that file is the --weights of every run below (the same tensors on both sides);
2. the official train.py trains --epochs epochs on the offline shapes set (256 px, batch 4), recording every batch
   its loader yields (benchmarks/twin_replay_child.py) and every loss call;
3. the official train.py again, replaying those batches with lr0 nudged by one part in 10^7: how fast a difference
   at float rounding level grows in this training (its early warmup amplifies it by orders of magnitude within a few
   steps), the yardstick for step 4;
4. this project's train.py replaying the same batches (fp32, NCHW input: YOLO_CHANNELS_LAST=0, so its convolutions
   sum in the official order), logging every loss call too.

It reports the losses of the first iterations side by side, how far each run's loss is from the official one's per
iteration (relative; the nudged run gives the noise floor), and the results.csv columns per epoch (x/lr0-2 must be
equal: the schedule is a pure function of the iteration; the train losses within the noise). Results:
benchmarks/results/twin_replay_<time>.json. Without --ref it says so and exits 0. Takes about 3 x --epochs x 40 s
on a 2-core CPU. What it found first: the official detection trainer's lr step lags one epoch
(utils/engine/schedule.py, lagging_lr_step), which the x/lr columns showed from the first epoch after the warmup.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from benchmarks.learning_study import LAUNCH_VARS  # noqa: E402
from benchmarks.results_io import default_path, write_result  # noqa: E402

CHILD = ROOT / "benchmarks" / "twin_replay_child.py"
NUDGE = 1e-7  # relative change of lr0 in the yardstick run: a float rounding-sized difference
OWN_PYTHON = ROOT / ".venv-torch" / "bin" / "python"
LR_COLUMNS = ("x/lr0", "x/lr1", "x/lr2")
LOSS_COLUMNS = ("train/box_loss", "train/obj_loss", "train/cls_loss")
INIT = """
import sys, torch
sys.path.insert(0, {ref!r})
from models.yolo import Model
torch.manual_seed(0)
m = Model({cfg!r}, ch=3, nc=6)
m.half().float()  # what the official train.py does to a new run's model after AutoAnchor
torch.save({{'model': m, 'epoch': -1}}, {out!r})
"""


def parse_opt(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--ref", default="", help="official ultralytics/yolov5 checkout (nothing runs without it)")
    p.add_argument("--ref-python", default="", help="its Python (default: ../venv/bin/python beside it)")
    p.add_argument("--python", default=str(OWN_PYTHON if OWN_PYTHON.exists() else sys.executable))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=4, help="4: the 100 warmup iterations end in epoch 1, so the third "
                   "epoch already trains at the lr after the warmup")
    p.add_argument("--show", type=int, default=8, help="iterations printed side by side")
    p.add_argument("--json", default="", help="results file (default benchmarks/results/twin_replay_<time>.json)")
    return p.parse_args(argv)


def read_log(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def read_csv(path):
    rows = list(csv.reader(Path(path).read_text().splitlines()))
    head = [h.strip() for h in rows[0]]
    return [dict(zip(head, (float(x) for x in row))) for row in rows[1:]]


def relative_gaps(a, b):
    """|loss_b - loss_a| / |loss_a| per loss call both logs have."""
    return [abs(y["loss"] - x["loss"]) / max(abs(x["loss"]), 1e-12) for x, y in zip(a, b)]


def compare(official, nudged, project, official_csv, project_csv):
    """The figures the JSON keeps: per iteration gaps; the median over iterations of the project's gap over the
    nudged run's (about 1: the project is as far from the official run as a rounding-sized nudge takes it; chaos
    makes single iterations swing both ways); the first iteration where the project's gap exceeds ten times the
    largest nudged gap seen up to it (a discrete event, an objectness target or a clipped gradient flipping, can
    come a few iterations earlier on either side); and the per-epoch columns."""
    gap, floor = relative_gaps(official, project), relative_gaps(official, nudged)
    beyond = next((i for i in range(len(gap)) if gap[i] > 0 and gap[i] > 10 * max(floor[:i + 1] + [1e-7])), None)
    epochs = []
    for o, p in zip(official_csv, project_csv):
        epochs.append({"epoch": int(o["epoch"]), "lr_official": [o[c] for c in LR_COLUMNS],
                       "lr_project": [p[c] for c in LR_COLUMNS],
                       "train_loss_official": [o[c] for c in LOSS_COLUMNS],
                       "train_loss_project": [p[c] for c in LOSS_COLUMNS]})
    lr_equal = all(abs(a - b) <= 1e-9 for e in epochs for a, b in zip(e["lr_official"], e["lr_project"]))
    ratios = sorted(g / f for g, f in zip(gap, floor) if f > 0)
    median_ratio = ratios[len(ratios) // 2] if ratios else None
    return {"iterations": len(gap), "loss_gap_project": gap, "loss_gap_nudged": floor, "nudge": NUDGE,
            "median_gap_ratio": median_ratio,
            "first_iteration_beyond_10x_noise": beyond, "lr_equal": lr_equal, "epochs": epochs,
            "first_losses": [(x["loss"], y["loss"], z["loss"]) for x, y, z in zip(official, nudged, project)]}


def run(cmd, env, what):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"twin_replay: {what} failed (rc {p.returncode}): {p.stderr[-1500:]}")


def main(opt):
    ref = Path(opt.ref).resolve() if opt.ref else None
    if ref is None or not (ref / "train.py").is_file():
        print(f"twin_replay: skipped: no official checkout at {opt.ref or '(no --ref)'}; give --ref PATH of a clone "
              "of https://github.com/ultralytics/yolov5 with its own venv (../venv beside it, or --ref-python)")
        return None
    ref_python = opt.ref_python or str(ref.parent / "venv" / "bin" / "python")
    base = {k: v for k, v in os.environ.items()  # a launcher's or a test suite's variables stay out of both trainers
            if k not in LAUNCH_VARS + ("OMP_NUM_THREADS", "YOLO_CHANNELS_LAST")}
    with tempfile.TemporaryDirectory(prefix="twin_replay_") as tmp:
        tmp = Path(tmp)
        run([opt.python, str(ROOT / "data" / "scripts" / "make_shapes.py"), "--out", str(tmp / "shapes")], base,
            "making the shapes set")
        data = tmp / "shapes.yaml"
        names = ["red circle", "green square", "blue triangle", "yellow star", "magenta cross", "cyan hexagon"]
        data.write_text(json.dumps({"path": str(tmp / "shapes"), "train": "images/train", "val": "images/val",
                                    "names": names}))
        init, batches = tmp / "init.pt", tmp / "batches.pt"
        run([ref_python, "-c", INIT.format(ref=str(ref), cfg=str(ref / "models" / "yolov5n.yaml"), out=str(init))],
            base, "building the initial model with the official code")
        train_args = ["--data", str(data), "--weights", str(init), "--cfg", "yolov5n.yaml", "--img", "256",
                      "--batch-size", str(opt.batch), "--epochs", str(opt.epochs), "--workers", "2", "--seed", "0",
                      "--device", "cpu", "--noplots", "--exist-ok", "--project", str(tmp / "runs")]
        hyp = yaml.safe_load((ref / "data" / "hyps" / "hyp.scratch-low.yaml").read_text())
        nudged = tmp / "hyp_nudged.yaml"
        nudged.write_text(yaml.safe_dump({**hyp, "lr0": hyp["lr0"] * (1 + NUDGE)}))
        official_env = {**base, "YOLO_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE"}
        sides = [("official", ref_python, "record", official_env, "official", []),
                 ("nudged", ref_python, "replay", official_env, "official", ["--hyp", str(nudged)]),
                 ("project", opt.python, "replay", {**base, "YOLO_CHANNELS_LAST": "0"}, "project", ["--no-amp"])]
        for name, python, mode, env, side, extra in sides:
            print(f"twin_replay: {name} ({mode})", flush=True)
            run([python, str(CHILD), side, "--repo", str(ref if side == "official" else ROOT), "--mode", mode,
                 "--batches", str(batches), "--log", str(tmp / f"{name}.jsonl"), "--",
                 *train_args, "--name", name, *extra], env, name)
        logs = {name: read_log(tmp / f"{name}.jsonl") for name, *_ in sides}
        result = compare(logs["official"], logs["nudged"], logs["project"],
                         read_csv(tmp / "runs" / "official" / "results.csv"),
                         read_csv(tmp / "runs" / "project" / "results.csv"))
    result.update(epochs_run=opt.epochs, batch=opt.batch)
    print(f"{'iter':>5}{'official':>12}{'lr nudged':>12}{'project':>12}")
    for i, (a, b, c) in enumerate(result["first_losses"][:opt.show]):
        print(f"{i:>5}{a:>12.6f}{b:>12.6f}{c:>12.6f}")
    print(f"first iteration where the project's loss is more than 10x the nudged run's gap from the official one: "
          f"{result['first_iteration_beyond_10x_noise']}; median gap ratio project / nudged "
          f"{result['median_gap_ratio']}; per-epoch lrs equal: {result['lr_equal']}")
    print(f"wrote {write_result('twin_replay', result, path=opt.json or default_path('twin_replay'))}")
    return result


if __name__ == "__main__":
    main(parse_opt())
