"""End-to-end wall time of train.py (and val.py) against the official ultralytics/yolov5, side by side.

    python benchmarks/compare_train.py --ref ../yolov5-official --ref-python ../yolov5-official/.venv/bin/python \
        --runs 3 --json runs/benchmarks/compare_train.json

For each configuration (default: yolov5n at 320 px from yolov5n.pt, yolov5s at 640 px from scratch; batch 16,
--workers 2, --noval, 2 epochs, on coco128) the official train.py and this project's train.py run alternately
(official first in odd rounds, this project first in even ones), --runs times each, as child processes of this one,
on the CPU. It prints the median wall time of each, the ratio official / project (above 1: this project is faster)
and the peak memory of each run's process tree (resident set size summed over the trainer and its loader
workers, sampled every 0.2 s from kernel counters that cost the runs nothing; pages a worker shares with the trainer
count in both; results files without a "memory" key hold PSS, whose sampling slowed the runs), and for each of this
project's training runs what it trained in, read from its log (bf16 where it autocast in bfloat16: its default on a
CPU with native bf16; else fp32). Then val.py on coco128 at 640 px (batch 32) the same way. --json writes every
run's figures.

Each codebase trains on its own writable copy of coco128 (made in a temporary folder from ../shared/data/coco128 or
--data), so neither reads the other's label cache and nothing is written under ../shared.

A checkout of ultralytics/yolov5 and its own virtual environment (not part of this project; the script skips
cleanly without them), e.g. beside this project:
    git clone https://github.com/ultralytics/yolov5 ../yolov5-official      # commit 5081342f was measured
    python3 -m venv ../yolov5-official/.venv
    ../yolov5-official/.venv/bin/pip install -r ../yolov5-official/requirements.txt
(both sides get the weights as a local path, ../shared/weights/yolov5n.pt, so nothing is downloaded).
Options for this project's runs: --project-args '--amp' (extra train.py flags), --project-env OMP_NUM_THREADS=1;
for the official runs: --ref-env OMP_WAIT_POLICY=PASSIVE (this project's own default on CPU machines), and
--ref-env PYTHONPATH=DIR with TensorBoard installed in DIR, so that the official trainers write TensorBoard as
this project's do (the official requirements.txt leaves it out; this project's set-up installs it).
--hold avx2 holds both sides' oneDNN, ATen, MKL, OpenCV and NumPy to AVX2 (benchmarks/cpu_hold.py): an AVX2-only CPU's
kernels measured on an AVX-512 machine, recorded in the results file as a variant.

--task segment times segment/train.py (yolov5n-seg at 320 from ../shared/weights/yolov5n-seg-coco128.pt, the same
batch, workers, --noval and epochs) and segment/val.py (that checkpoint at 320, batch 32) on copies of
../shared/data/coco128-seg. --task classify times classify/train.py (--model ../shared/weights/yolov5n.pt cut at
layer 10, 128 px, batch 64; both trainers validate every epoch, the official one has no --noval) and classify/val.py
(yolov5n-cls-coco128cls.pt at 128) on copies of ../shared/data/coco128-cls. The official classifier trains with its
albumentations pipeline only where albumentations is installed; without it (its requirements.txt leaves it
commented out) it trains on the eval transform (resize and centre crop, no random crop, flip or colour jitter),
which is less loader work than this project's augmentations, always on; the output says which one ran.
"""
import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import cpu_hold  # noqa: E402
from benchmarks.results_io import command_line, write_result  # noqa: E402
SHARED = ROOT.parent / "shared"
OWN_PYTHON = ROOT / ".venv-torch" / "bin" / "python"
HOW_TO = """    git clone https://github.com/ultralytics/yolov5 ../yolov5-official
    python3 -m venv ../yolov5-official/.venv
    ../yolov5-official/.venv/bin/pip install -r ../yolov5-official/requirements.txt
then: python benchmarks/compare_train.py --ref ../yolov5-official --ref-python ../yolov5-official/.venv/bin/python"""
CONFIGS = {  # name: (model yaml, image size, pretrained weights or '' for from scratch)
    "n320": ("yolov5n.yaml", 320, "yolov5n.pt"),
    "s640": ("yolov5s.yaml", 640, ""),
}
SEG_CONFIGS = {"n320seg": ("segment/yolov5n-seg.yaml", 320, "yolov5n-seg-coco128.pt")}
CLS_CONFIGS = {"n128cls": (None, 128, "yolov5n.pt")}  # classify/train.py: --model is the checkpoint, cut at 10


class Task:
    """What differs between the tasks: scripts, dataset, configurations, defaults and the summary row val prints."""

    def __init__(self, name, folder, data, configs, batch, val_img, val_batch, val_weights, figures, row):
        self.name, self.folder, self.data, self.configs, self.batch = name, folder, data, configs, batch
        self.val_img, self.val_batch, self.val_weights, self.figures, self.row = val_img, val_batch, val_weights, \
            figures, row

    def script(self, repo, kind):  # kind: "train" or "val"
        return str(Path(repo) / self.folder / f"{kind}.py")


TASKS = {
    "detect": Task("detect", "", "coco128", CONFIGS, 16, 640, 32, "yolov5n.pt", "P_R_mAP50_mAP50-95", (3, 4)),
    "segment": Task("segment", "segment", "coco128-seg", SEG_CONFIGS, 16, 320, 32, "yolov5n-seg-coco128.pt",
                    "box_P_R_mAP50_mAP50-95_mask_P_R_mAP50_mAP50-95", (3, 8)),
    "classify": Task("classify", "classify", "coco128-cls", CLS_CONFIGS, 64, 128, 64, "yolov5n-cls-coco128cls.pt",
                     "top1_top5", (2, 2)),
}


# ----------------------------------------------------------------------------------------------------------------
# process-tree memory
def _tree_pids(root_pid):
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d))
    pids, stack = [], [root_pid]
    while stack:
        p = stack.pop()
        pids.append(p)
        stack += children.get(p, [])
    return pids


_PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024 if hasattr(os, "sysconf") else 4
# What the peak memory figure is (kept in the results file; files without it measured PSS, see _rss_kib)
MEMORY_METRIC = "peak RSS summed over the process tree (/proc/<pid>/statm every 0.2 s)"


def _rss_kib(pid):
    """Resident set size of pid in KiB, from /proc/<pid>/statm: kernel counters, read without walking the page
    tables. (PSS from smaps_rollup walks them under the process's mmap lock: sampled every 0.2 s it slowed a
    yolov5s 640 training run from 124 s to 154-159 s, so the runs timed were not the runs users make.) Pages a
    loader worker shares with the trainer count in both, so the sum is an upper bound, taken alike on both sides."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE_KIB
    except (OSError, ValueError, IndexError):
        return 0


def precision_used(log, codebase):
    """What a training run trained in, from its log: bf16 where this project said it autocasts in bfloat16 (its
    default on a CPU with native bf16, or --amp), else fp32 (the official trainer has no CPU autocast)."""
    if codebase == "project" and "AMP: bfloat16 autocast" in log:
        return "bf16"
    return "fp32"


def run_measured(cmd, cwd, env, timeout):
    """Run cmd; returns (wall seconds, peak RSS of its process tree in MiB, returncode, stdout+stderr, CPU
    seconds: user + system of the process and the children it waited for, its loader workers included)."""
    peak = [0]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], sum(_rss_kib(pid) for pid in _tree_pids(p.pid)))
            done.wait(0.2)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    done.set()
    sampler.join()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, peak[0] / 1024, p.returncode, out, cpu


# ----------------------------------------------------------------------------------------------------------------
def dataset_copy(src, dst, image_folder=False, names_yaml="coco128.yaml"):
    """A writable coco128 at dst with its own data yaml (train = val = images/train2017, the 80 COCO names). The
    copy's folders are made writable (the shared source is read-only, and copytree keeps modes), so each trainer
    writes its label cache once, as it would on a user's disk. image_folder=True (classification): the copied folder
    itself is the dataset argument, no yaml."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.cache"))
    for d in [dst, *(p for p in dst.rglob("*") if p.is_dir())]:
        d.chmod(d.stat().st_mode | 0o200)
    if image_folder:
        return dst
    with open(ROOT / "data" / names_yaml) as f:
        names = yaml.safe_load(f)["names"]
    y = dst.parent / f"{dst.name}.yaml"
    y.write_text(yaml.safe_dump({"path": str(dst), "train": "images/train2017", "val": "images/train2017",
                                 "names": names}, sort_keys=False))
    return y


def train_cmd(python, repo, data, cfg, img, weights, opt, project, name, extra=(), task=None):
    task = task or TASKS["detect"]
    common = ["--epochs", str(opt.epochs), "--workers", str(opt.workers), "--device", "cpu", "--project", str(project),
              "--name", name, "--exist-ok"]
    if task.name == "classify":  # no --cfg, no --noval: the official trainer validates every epoch regardless
        return [python, task.script(repo, "train"), "--model", weights, "--data", str(data), "--img", str(img),
                "--batch-size", str(opt.batch), *common, *extra]
    cfg_path = Path(repo) / "models" / cfg
    return [python, task.script(repo, "train"), "--data", str(data), "--cfg", str(cfg_path), "--weights", weights,
            "--img", str(img), "--batch-size", str(opt.batch), *common[:4], "--noval", *common[4:], *extra]


def val_cmd(python, repo, data, weights, opt, project, name, task=None):
    task = task or TASKS["detect"]
    return [python, task.script(repo, "val"), "--data", str(data), "--weights", weights, "--img", str(opt.val_img),
            "--batch-size", str(opt.val_batch or task.val_batch), "--workers", str(opt.workers), "--device", "cpu",
            "--project", str(project), "--name", name, "--exist-ok"]


def parse_all_line(text, start=3, count=4):
    """The figures of the 'all' row val prints, or None: by default detection's P, R, mAP50, mAP50-95; the task's
    row (start, count) otherwise (segmentation: box then mask P, R, mAP50, mAP50-95; classification: top-1, top-5)."""
    for line in reversed(text.splitlines()):
        parts = line.split()
        if len(parts) >= start + count and parts[0] == "all":
            try:
                return [float(x) for x in parts[start:start + count]]
            except ValueError:
                return None
    return None


def ref_augmentations(text):
    """What the official classification trainer augmented with, from its log (albumentations or not)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # its colorstr prefix
    if "albumentations: not found" in text:
        return "none (albumentations not installed: the eval transform, resize + centre crop)"
    return "albumentations" if "albumentations: " in text else None


def summarize(label, runs):
    ok = [r for r in runs if r["rc"] == 0]
    med = (lambda k: statistics.median([r[k] for r in ok]) if ok else None)
    return {"label": label, "runs": runs, "median_s": med("wall_s"), "median_cpu_s": med("cpu_s"),
            "peak_mib": med("peak_mib"), "failed": len(runs) - len(ok)}


def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ref", default=None, help="official ultralytics/yolov5 checkout (skipped without it)")
    p.add_argument("--ref-python", default=None, help="its Python (default: ../venv/bin/python beside it)")
    p.add_argument("--python", default=str(OWN_PYTHON if OWN_PYTHON.exists() else sys.executable),
                   help="Python for this project (default: its PyTorch environment, .venv-torch)")
    p.add_argument("--task", default="detect", choices=list(TASKS),
                   help="detect: train.py/val.py; segment: segment/*.py on coco128-seg; classify: classify/*.py on "
                   "coco128-cls")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=None, help="default 16 (detect, segment), 64 (classify)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--configs", nargs="+", default=None,
                   choices=[*CONFIGS, *SEG_CONFIGS, *CLS_CONFIGS], help="default: every config of the task")
    p.add_argument("--img", type=int, default=None, help="override every config's image size (smoke tests)")
    p.add_argument("--val-img", type=int, default=None, help="default 640 (detect), 320 (segment), 128 (classify)")
    p.add_argument("--val-batch", type=int, default=None, help="default 32 (detect, segment), 64 (classify)")
    p.add_argument("--no-val", action="store_true", help="skip the val.py comparison")
    p.add_argument("--data", default=None, help="dataset folder to copy (default ../shared/data/coco128, "
                   "coco128-seg or coco128-cls by --task)")
    p.add_argument("--weights", default=None, help="starting weights (default ../shared/weights/yolov5n.pt; "
                   "yolov5n-seg-coco128.pt for segment)")
    p.add_argument("--val-weights", default=None, help="val weights (default yolov5n.pt, yolov5n-seg-coco128.pt, "
                   "yolov5n-cls-coco128cls.pt by --task)")
    p.add_argument("--project-args", default="", help="extra train.py flags for this project, e.g. '--amp'")
    p.add_argument("--project-env", nargs="*", default=[], help="KEY=VALUE for this project's runs")
    p.add_argument("--ref-env", nargs="*", default=[], help="KEY=VALUE for the official runs, e.g. "
                   "OMP_WAIT_POLICY=PASSIVE (which this project sets by itself on CPU machines)")
    cpu_hold.add_argument(p)
    p.add_argument("--timeout", type=int, default=7200)
    p.add_argument("--json", default=None, help="results file (default: a new one in benchmarks/results/)")
    opt = p.parse_args(argv)
    task = TASKS[opt.task]
    opt.configs = opt.configs or list(task.configs)
    wrong = [c for c in opt.configs if c not in task.configs]
    if wrong:
        p.error(f"--configs {' '.join(wrong)} are not --task {opt.task} configs (those are: {', '.join(task.configs)})")
    opt.batch = opt.batch or task.batch
    opt.val_img = opt.val_img or task.val_img
    opt.val_batch = opt.val_batch or task.val_batch
    opt.data = opt.data or str(SHARED / "data" / task.data)
    first_config = task.configs[opt.configs[0]]
    opt.weights = opt.weights or str(SHARED / "weights" / (first_config[2] or "yolov5n.pt"))
    # detection and segmentation validate the starting weights (as before --task), classification its own checkpoint
    opt.val_weights = opt.val_weights or (str(SHARED / "weights" / task.val_weights) if task.name == "classify"
                                          else opt.weights)
    return opt


def _environments(opt):
    """(official runs' environment, this project's): the caller's, less what would mislead either trainer, plus the
    KEY=VALUE pairs asked for each side."""
    # Launcher variables are dropped too: a process that imported OneFlow carries RANK=-1 and LOCAL_RANK=0, which the
    # official trainer reads as a DDP launch ("insufficient CUDA devices for DDP command").
    drop = ("PYTHONPATH", "YOLO_BACKEND", "_YOLO_BACKEND_ANNOUNCED", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR",
            "MASTER_PORT")
    base_env = {k: v for k, v in os.environ.items() if k not in drop}
    ref_env = {**base_env, **dict(kv.split("=", 1) for kv in opt.ref_env)}
    own_env = {**base_env, **dict(kv.split("=", 1) for kv in opt.project_env)}  # the backend follows the device
    return ref_env, own_env


def _compare_training(opt, task, sides, data, weights, tmp, result):
    """Each config trained opt.runs times per side, the sides alternating; result['train'][config] gets the medians."""
    for key in opt.configs:
        cfg, img, w = task.configs[key]
        img = opt.img or img
        runs = {"official": [], "project": []}
        for r in range(opt.runs):
            order = ["official", "project"] if r % 2 == 0 else ["project", "official"]
            for side in order:
                python, repo, env, extra = sides[side]
                cmd = train_cmd(python, repo, data[side], cfg, img, str(weights) if w else "", opt,
                                tmp / f"runs_{side}", f"{key}_{r}", extra, task=task)
                load = _load()
                wall, peak, rc, tail, cpu = run_measured(cmd, repo, env, opt.timeout)
                runs[side].append({"wall_s": round(wall, 2), "cpu_s": round(cpu, 1), "peak_mib": round(peak),
                                   "rc": rc, "load_before": load, "precision": precision_used(tail, side)})
                if task.name == "classify" and side == "official":
                    runs[side][-1]["augmentations"] = ref_augmentations(tail)
                    result["official_augmentations"] = runs[side][-1]["augmentations"]
                print(f"  {key} run {r + 1}/{opt.runs} {side:<9} {wall:8.1f} s  CPU {cpu:7.1f} s  peak {peak:7.0f} "
                      f"MiB  load {load}"
                      f"{'' if rc == 0 else f'  FAILED rc={rc}: ' + tail[-800:]}", flush=True)
        o, p = summarize("official", runs["official"]), summarize("project", runs["project"])
        ratio = o["median_s"] / p["median_s"] if o["median_s"] and p["median_s"] else None
        result["train"][key] = {"cfg": cfg, "img": img, "weights": w or "(scratch)", "official": o, "project": p,
                                "ratio_official_over_project": ratio}


def _compare_validation(opt, task, sides, data, val_weights, tmp):
    """val.py of each side opt.runs times, alternating: the medians and the figures of each run."""
    runs = {"official": [], "project": []}
    for r in range(opt.runs):
        for side in (["official", "project"] if r % 2 == 0 else ["project", "official"]):
            python, repo, env, _ = sides[side]
            cmd = val_cmd(python, repo, data[side], str(val_weights), opt, tmp / f"val_{side}", f"v{r}", task=task)
            load = _load()
            wall, peak, rc, tail, cpu = run_measured(cmd, repo, env, opt.timeout)
            runs[side].append({"wall_s": round(wall, 2), "cpu_s": round(cpu, 1), "peak_mib": round(peak),
                               "rc": rc, "load_before": load, task.figures: parse_all_line(tail, *task.row)})
            print(f"  val run {r + 1}/{opt.runs} {side:<9} {wall:8.1f} s  CPU {cpu:7.1f} s  peak {peak:7.0f} "
                  f"MiB  load {load}  "
                  f"{runs[side][-1][task.figures]}{'' if rc == 0 else ' FAILED: ' + tail[-800:]}",
                  flush=True)
    o, p = summarize("official", runs["official"]), summarize("project", runs["project"])
    return {"img": opt.val_img, "batch": opt.val_batch, "weights": Path(opt.val_weights).name,
            "official": o, "project": p, "ratio_official_over_project":
            o["median_s"] / p["median_s"] if o["median_s"] and p["median_s"] else None}


def _print_table(opt, task, result, own_extra):
    print(f"\nload average (1 min): {result['load_start']} at the start, {result['load_end']} at the end")
    script = {"detect": "train.py", "segment": "segment/train.py", "classify": "classify/train.py"}[task.name]
    noval = "validating every epoch" if task.name == "classify" else "--noval"
    print(f"{script}, {opt.epochs} epochs on {task.data}, batch {opt.batch}, {opt.workers} workers, {noval}, CPU "
          f"({result['cpu']}, {result['cores']} cores); project extra: {' '.join(own_extra) or '-'} "
          f"{' '.join(opt.project_env)}")
    print(f"{'config':<8}{'official s':>12}{'project s':>12}{'ratio':>8}{'official CPU s':>16}{'project CPU s':>15}"
          f"{'official MiB':>14}{'project MiB':>13}")
    rows = [(k, v) for k, v in result["train"].items()] + ([(f"val{opt.val_img}", result["val"])] if result["val"]
                                                             else [])
    for k, v in rows:
        o, p, ratio = v["official"], v["project"], v["ratio_official_over_project"]
        print(f"{k:<8}{_f(o['median_s']):>12}{_f(p['median_s']):>12}{_f(ratio, 2):>8}{_f(o['median_cpu_s']):>16}"
              f"{_f(p['median_cpu_s']):>15}{_f(o['peak_mib'], 0):>14}{_f(p['peak_mib'], 0):>13}")
    if result.get("official_augmentations"):
        print(f"official classification augmentations: {result['official_augmentations']}; this project: random "
              "resized crop, horizontal flip, colour jitter (always)")


def main(opt):
    if not opt.ref or not (Path(opt.ref) / "train.py").is_file():
        print(f"compare_train: skipped: no official checkout (--ref {opt.ref!r}). To make one:\n{HOW_TO}")
        return 0
    # absolute paths: the runs start in the checkouts, where a relative path would name something else
    opt.ref = str(Path(opt.ref).absolute())
    ref_python = str(Path(opt.ref_python or Path(opt.ref).parent / "venv" / "bin" / "python").absolute())
    if not Path(ref_python).exists():
        print(f"compare_train: skipped: no Python for the official checkout at {ref_python} (--ref-python).")
        return 0
    cpu_hold.apply(opt.hold)  # before the environments are copied and the results file records the caps
    ref_env, own_env = _environments(opt)
    own_extra = opt.project_args.split()
    task = TASKS[opt.task]
    result = {"command": command_line(), "task": task.name, "cpu": _cpu_name(), "cores": os.cpu_count(),
              "epochs": opt.epochs, "batch": opt.batch, "workers": opt.workers, "project_args": own_extra,
              "project_env": opt.project_env, "ref_env": opt.ref_env, "memory": MEMORY_METRIC, "train": {}, "val": None,
              "load_start": _load()}
    with tempfile.TemporaryDirectory(prefix="compare_train_") as tmp:
        tmp = Path(tmp)
        names_yaml = "coco128-seg.yaml" if task.name == "segment" else "coco128.yaml"
        data = {side: dataset_copy(Path(opt.data), tmp / f"{task.data}_{side}", image_folder=task.name == "classify",
                                   names_yaml=names_yaml) for side in ("official", "project")}
        weights = tmp / Path(opt.weights).name
        shutil.copy(opt.weights, weights)
        val_weights = tmp / Path(opt.val_weights).name
        if not val_weights.exists():
            shutil.copy(opt.val_weights, val_weights)
        sides = {"official": (ref_python, Path(opt.ref), ref_env, []),
                 "project": (opt.python, ROOT, own_env, own_extra)}
        _compare_training(opt, task, sides, data, weights, tmp, result)
        if not opt.no_val:
            result["val"] = _compare_validation(opt, task, sides, data, val_weights, tmp)
    result["load_end"] = _load()
    _print_table(opt, task, result, own_extra)
    print(f"wrote {write_result('compare_train', result, path=opt.json, tag=task.name)}")
    return 0


def _f(x, nd=1):
    return "-" if x is None else f"{x:.{nd}f}"


def _load():
    """The 1-minute load average now (other work on the machine skews wall times)."""
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    sys.exit(main(parse_opt()))
