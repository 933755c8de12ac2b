"""Steady-state training images/s of this project against the official ultralytics/yolov5 on the CPU, alternating.

    python benchmarks/steady_state.py --ref ../yolov5-official --ref-python ../yolov5-official/.venv/bin/python \
        --pairs 3 [--configs n320 s640] [--images 512] [--epochs 3]

compare_train.py times whole runs (start-up, validation and plots included); this times the training steps alone:
each trainer runs under benchmarks/train_clock.py, which counts the batches its augmenting loader hands out and
clocks the epochs after a warm-up epoch from outside either codebase. The runs alternate (official first in odd
pairs, this project first in even ones) on coco128 repeated to --images distinct paths (so an epoch is long enough to
time), batch 16, --workers 2, --noval --noplots, as child processes on the CPU; this project in its default precision
(bf16 autocast on a CPU with native bf16, else fp32: the clock records which autocast it entered). Each pair's
ratio is this project's images/s over the official's (above 1: this project is faster). Writes
benchmarks/results/train_clock_<time>.json (or --json), one document per configuration in `configs`, each rendered
as its own table. Without --ref it says so and exits 0.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import cpu_hold  # noqa: E402
from benchmarks.compare_train import CONFIGS, HOW_TO, OWN_PYTHON, SHARED, _cpu_name, _environments, _load  # noqa: E402
from benchmarks.gpu_kit_tables import coco128_names, make_repeated_dataset, ratio  # noqa: E402
from benchmarks.results_io import command_line, write_result  # noqa: E402

CLOCK = ROOT / "benchmarks" / "train_clock.py"


def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ref", default=None, help="official ultralytics/yolov5 checkout (skipped without it)")
    p.add_argument("--ref-python", default=None, help="its Python (default: ../venv/bin/python beside it)")
    p.add_argument("--python", default=str(OWN_PYTHON if OWN_PYTHON.exists() else sys.executable))
    p.add_argument("--configs", nargs="+", default=["n320"], choices=list(CONFIGS))
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--images", type=int, default=512, help="training images per epoch (coco128 repeated)")
    p.add_argument("--epochs", type=int, default=3, help="the first is the warm-up; the rest are timed")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--data", default=str(SHARED / "data" / "coco128"))
    p.add_argument("--weights", default=str(SHARED / "weights" / "yolov5n.pt"), help="for configs that start from it")
    p.add_argument("--project-env", nargs="*", default=[], help="KEY=VALUE for this project's runs")
    p.add_argument("--ref-env", nargs="*", default=[], help="KEY=VALUE for the official runs")
    cpu_hold.add_argument(p)
    p.add_argument("--timeout", type=int, default=3600, help="seconds per run")
    p.add_argument("--json", default=None, help="results file (default: a new one in benchmarks/results/)")
    return p.parse_args(argv)


def clocked_run(python, repo, data_yaml, cfg, img, weights, opt, env, out, project, name):
    """One train.py under the clock; returns the clock's record (plus rc and wall seconds)."""
    cmd = [python, str(CLOCK), str(repo / "train.py"), "--data", str(data_yaml), "--cfg", str(repo / "models" / cfg),
           "--weights", weights, "--img", str(img), "--batch-size", str(opt.batch), "--epochs", str(opt.epochs),
           "--workers", str(opt.workers), "--noval", "--noplots", "--device", "cpu", "--project", str(project),
           "--name", name, "--exist-ok"]
    env = {**env, "GPU_KIT_CLOCK_OUT": str(out), "GPU_KIT_CLOCK_EPOCHS": str(opt.epochs)}
    t0 = time.time()
    p = subprocess.run(cmd, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace", timeout=opt.timeout)
    rec = json.loads(Path(out).read_text()) if Path(out).exists() else {}
    rec.update(rc=p.returncode, wall_s=round(time.time() - t0, 1))
    if p.returncode != 0 or not rec.get("img_s"):
        rec["error"] = p.stdout[-800:]
    return rec


def measure(opt, key, sides, data_yaml, tmp):
    cfg, img, start = CONFIGS[key]
    weights = opt.weights if start else ""
    pairs = []
    for k in range(opt.pairs):
        rates = {}
        for side in (("official", "project") if k % 2 == 0 else ("project", "official")):
            python, repo, env = sides[side]
            load = _load()
            rec = clocked_run(python, repo, data_yaml, cfg, img, weights, opt, env, tmp / f"clock_{key}_{side}_{k}.json",
                              tmp / f"runs_{side}", f"{key}_{k}")
            rates[side] = rec
            print(f"  {key} pair {k + 1}/{opt.pairs} {side:<9} {rec.get('img_s')} img/s  warm-up epoch "
                  f"{rec.get('warmup_epoch_s')} s  autocast {rec.get('autocast') or 'none (fp32)'}  load {load}"
                  f"{'  FAILED: ' + rec['error'] if rec.get('error') else ''}", flush=True)
        o, n = rates["official"].get("img_s"), rates["project"].get("img_s")
        pairs.append({"official_img_s": o, "project_img_s": n, "ratio": ratio(o, n),
                      "project_autocast": rates["project"].get("autocast") or [],
                      "official_autocast": rates["official"].get("autocast") or [],
                      "timed_steps": rates["project"].get("timed_steps")})
    ratios = [p["ratio"] for p in pairs if p["ratio"]]
    return {"cfg": cfg, "img": img, "weights": Path(weights).name if weights else "(scratch)", "batch": opt.batch,
            "workers": opt.workers, "images": opt.images, "epochs": opt.epochs,
            "window": f"epochs 1-{opt.epochs - 1} after a warm-up epoch", "cpu": _cpu_name(), "pairs": pairs,
            "median_ratio": statistics.median(ratios) if ratios else None}


def main(opt):
    if not opt.ref or not (Path(opt.ref) / "train.py").is_file():
        print(f"steady_state: skipped: no official checkout (--ref {opt.ref!r}). To make one:\n{HOW_TO}")
        return 0
    ref = Path(opt.ref).absolute()
    ref_python = str(Path(opt.ref_python or ref.parent / "venv" / "bin" / "python").absolute())
    if not Path(ref_python).exists():
        print(f"steady_state: skipped: no Python for the official checkout at {ref_python} (--ref-python).")
        return 0
    if opt.epochs < 2:
        raise SystemExit("steady_state: --epochs must be at least 2 (a warm-up epoch, then timed ones)")
    opt.weights = str(Path(opt.weights).absolute())
    cpu_hold.apply(opt.hold)  # before the environments are copied and the results file records the caps
    ref_env, own_env = _environments(opt)
    sides = {"official": (ref_python, ref, ref_env), "project": (opt.python, ROOT, own_env)}
    written = []
    with tempfile.TemporaryDirectory(prefix="steady_state_") as tmp:
        tmp = Path(tmp)
        data_yaml = make_repeated_dataset(opt.data, tmp / "data", opt.images, coco128_names())
        for key in opt.configs:
            doc = measure(opt, key, sides, data_yaml, tmp)
            doc.update(command=command_line(), ref_env=opt.ref_env, project_env=opt.project_env)
            path = opt.json if opt.json and len(opt.configs) == 1 else None
            written.append(write_result("train_clock", doc, path=path, tag=key))
            print(f"{key}: median ratio {doc['median_ratio']} (project / official images/s) -> {written[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(parse_opt()))
