"""Does it learn the same? The same training under several configurations and several seeds each, alternating, with
each configuration's final figures summarised and every pair of configurations compared with a 95% interval.

    python benchmarks/learning_study.py --ref ../yolov5-official --seeds 5 --epochs 30            # coco128
    python benchmarks/learning_study.py --ref ../yolov5-official --seeds 5 --epochs 30 --dataset shapes
    python benchmarks/learning_study.py --ref ../yolov5-official --dataset all     # the whole study, both datasets

Configurations (--configs, default all three): `official` (the official train.py of the --ref checkout, with its own
Python, --ref-python, default ../venv/bin/python beside it), `fp32` (this project's train.py --no-amp) and `bf16`
(this project's train.py --amp: bf16 autocast, only on a CPU with native bf16, AVX512-BF16 or AMX; skipped with the
reason elsewhere, where --amp would train in fp32). Each run is a whole train.py on the CPU as a child process:

- `--dataset coco128` (default): yolov5n from yolov5n.pt, 320 px, batch 16, train and val both coco128's 128
  images (as data/coco128.yaml), on a writable copy per codebase (neither reads the other's label cache);
- `--dataset shapes`: yolov5n from scratch on the offline shapes set (data/scripts/make_shapes.py: 300 train and
  60 val images, made once into the temporary folder), 256 px.

Every run validates after every epoch (no --noval) and draws no plots (--noplots, on both sides). Seeds are given
to train.py's --seed (seed-start, seed-start + 1, ...); the order of the configurations rotates with the seed, so no
configuration always runs first on a machine that warms up or gets busier. A run's figures are the last row of its
results.csv (the EMA weights after the last epoch, validated by the trainer itself): P, R, mAP50, mAP50-95, plus
the mAP50-95 of every epoch (the curves) and the run's wall and CPU time. Per configuration: mean, std, min, max of
each; per pair of configurations: the difference of the means with its 95% interval, Welch's t and the bootstrap
(benchmarks/study_stats.py; the percentile bootstrap is too narrow with a handful of seeds: Welch's is the one the
pages quote). The results file (benchmarks/results/learning_study_<dataset>_<time>.json unless
--json) is rewritten after every run, so a study cut short keeps what it measured; the plot of the curves (mean
line, min-max band per configuration) goes beside it with the same name and .png. The full study (5 seeds, 3
configurations, 30 epochs) takes hours on a CPU: `--seeds 2 --epochs 2 --configs fp32 official` is a smoke run.
Too long for one sitting, it grows in parts: `--add-to FILE --seed-start 2 --seeds 2` keeps FILE's successful runs and
adds the (configuration, seed) pairs it lacks, with the same settings; each run records the CPU it ran on (times of
runs on different CPUs do not compare; the learning figures do).

The official checkout (commit 5081342f was measured) needs its own environment (`python3 -m venv ../venv` beside it,
then `../venv/bin/pip install -r requirements.txt`), and offline it must not try to download its font: apply the
utils/general.py check_font patch that scripts/stage_gpu_kit.sh applies (its runs here also get YOLO_OFFLINE=1,
ultralytics' own switch, and --weights as a local file, so nothing else is fetched).
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.compare_train import dataset_copy, precision_used, run_measured  # noqa: E402
from benchmarks.results_io import NATIVE_BF16, cpu_info, default_path, write_result  # noqa: E402
from benchmarks.study_stats import compare, summary  # noqa: E402

SHARED = ROOT.parent / "shared"
OWN_PYTHON = ROOT / ".venv-torch" / "bin" / "python"
METRICS = {"P": "metrics/precision", "R": "metrics/recall", "mAP50": "metrics/mAP_0.5",
           "mAP50-95": "metrics/mAP_0.5:0.95"}  # results.csv columns, the same in both codebases
CONFIGS = {  # name: (codebase, extra train.py flags, what it is)
    "official": ("official", [], "the official train.py (fp32 on the CPU)"),
    "fp32": ("project", ["--no-amp"], "this project, fp32"),
    "bf16": ("project", ["--amp"], "this project, bf16 autocast (--amp)"),
}
DATASETS = {  # name: (model yaml, image size, start from yolov5n.pt?)
    "coco128": ("yolov5n.yaml", 320, True),
    "shapes": ("yolov5n.yaml", 256, False),
}
# variables a launcher or this project's environment leave behind that the official trainer would misread
LAUNCH_VARS = ("PYTHONPATH", "YOLO_BACKEND", "_YOLO_BACKEND_ANNOUNCED", "RANK", "LOCAL_RANK", "WORLD_SIZE",
               "MASTER_ADDR", "MASTER_PORT")


# ----------------------------------------------------------------------------------------------------------------
# one run
def read_results_csv(path):
    """The rows of a results.csv as dicts of floats, the official trainer's padded column names stripped."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return []
    names = [n.strip() for n in rows[0]]
    return [{k: float(v) for k, v in zip(names, r) if v.strip()} for r in rows[1:] if r]


def run_figures(rows):
    """A run's final P, R, mAP50, mAP50-95 (the last row) and its mAP50-95 per epoch; None without rows."""
    if not rows:
        return None
    final = {k: rows[-1].get(col) for k, col in METRICS.items()}
    return {**final, "curve": [r.get(METRICS["mAP50-95"]) for r in rows]}


def train_command(python, repo, data, model_yaml, weights, opt, project, name, seed, extra):
    return [python, str(Path(repo) / "train.py"), "--data", str(data), "--cfg", str(Path(repo) / "models" / model_yaml),
            "--weights", weights, "--img", str(opt.img), "--batch-size", str(opt.batch), "--epochs", str(opt.epochs),
            "--workers", str(opt.workers), "--device", "cpu", "--seed", str(seed), "--noplots", "--project",
            str(project), "--name", name, "--exist-ok", *extra]


def order_for(configs, round_index):
    """The configurations of one seed's round, rotated by the round's index."""
    k = round_index % len(configs)
    return configs[k:] + configs[:k]


# ----------------------------------------------------------------------------------------------------------------
# the study's figures
def summarize(study):
    """Per configuration, the summary of each final figure and of the run times; per pair, both intervals of the
    difference of means (first named minus second) for each figure. Failed runs are counted, not averaged."""
    names = [c for c in study["configs"] if study["configs"][c]["runs"]]
    for c in names:
        ok = [r for r in study["configs"][c]["runs"] if r.get("rc") == 0 and r.get("mAP50-95") is not None]
        study["configs"][c]["summary"] = {k: summary([r[k] for r in ok]) for k in (*METRICS, "wall_s", "cpu_s")}
        study["configs"][c]["failed"] = len(study["configs"][c]["runs"]) - len(ok)
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ra, rb = (_final(study, a), _final(study, b))
            pairs.append({"a": a, "b": b, **{k: compare([r[k] for r in ra], [r[k] for r in rb]) for k in METRICS}})
    study["pairs"] = pairs
    return study


def _final(study, config):
    return [r for r in study["configs"][config]["runs"] if r.get("rc") == 0 and r.get("mAP50-95") is not None]


def plot_curves(study, path):
    """mAP50-95 per epoch: each configuration's mean over its runs, and the band from its lowest to highest run."""
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    from utils.atomic_files import save_figure
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, block in study["configs"].items():
        curves = [r["curve"] for r in _final(study, name) if r.get("curve")]
        if not curves:
            continue
        n = min(len(c) for c in curves)
        y = np.array([c[:n] for c in curves], dtype=float)
        x = np.arange(1, n + 1)
        line, = ax.plot(x, y.mean(0), label=f"{name} (mean of {len(curves)})")
        ax.fill_between(x, y.min(0), y.max(0), color=line.get_color(), alpha=0.2)
    ax.set(xlabel="epoch", ylabel="mAP50-95 (val)", title=f"{study['dataset']}: {study['model']} {study['img']} px, "
           f"batch {study['batch']}; band: min-max over seeds")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs, not fractions of them
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def print_summary(study):
    print(f"\n{study['dataset']}, {study['model']} {study['img']} px, batch {study['batch']}, {study['epochs']} "
          f"epochs, seeds {study['seeds']}")
    print(f"{'config':<10}{'n':>3}{'mAP50-95 mean':>15}{'std':>8}{'min':>8}{'max':>8}{'mAP50 mean':>12}{'wall s':>9}")
    for name, block in study["configs"].items():
        s = block.get("summary") or {}
        m, m50, w = s.get("mAP50-95") or {}, s.get("mAP50") or {}, s.get("wall_s") or {}
        print(f"{name:<10}{m.get('n', 0):>3}{_f(m.get('mean'), 4):>15}{_f(m.get('std'), 4):>8}{_f(m.get('min'), 4):>8}"
              f"{_f(m.get('max'), 4):>8}{_f(m50.get('mean'), 4):>12}{_f(w.get('mean'), 1):>9}")
    for p in study.get("pairs") or []:
        c = p["mAP50-95"]
        w, b = c["welch"] or {}, c["bootstrap"] or {}
        print(f"{p['a']} - {p['b']}: mAP50-95 {_f(w.get('diff', b.get('diff')), 4)}, 95% Welch "
              f"[{_f(w.get('low'), 4)}, {_f(w.get('high'), 4)}], bootstrap [{_f(b.get('low'), 4)}, "
              f"{_f(b.get('high'), 4)}]")


def _f(x, nd):
    return "-" if x is None else f"{x:.{nd}f}"


# ----------------------------------------------------------------------------------------------------------------
def make_datasets(opt, tmp):
    """{codebase: data yaml} of the study's dataset, one writable copy per codebase."""
    if opt.dataset == "coco128":
        return {side: dataset_copy(Path(opt.data), tmp / f"coco128_{side}") for side in ("official", "project")}
    source = tmp / "shapes_source"
    subprocess.run([opt.python, str(ROOT / "data" / "scripts" / "make_shapes.py"), "--out", str(source)], check=True,
                   stdout=subprocess.DEVNULL)
    with open(ROOT / "data" / "shapes.yaml") as f:
        names = yaml.safe_load(f)["names"]
    out = {}
    for side in ("official", "project"):
        folder = tmp / f"shapes_{side}"
        shutil.copytree(source, folder)
        out[side] = folder.parent / f"{folder.name}.yaml"
        out[side].write_text(yaml.safe_dump({"path": str(folder), "train": "images/train", "val": "images/val",
                                             "names": names}, sort_keys=False))
    return out


def _pairs(items):
    """KEY=VALUE strings as a dict."""
    return dict(kv.split("=", 1) for kv in items)


def skipped_configs(opt, cpu_flags):
    """{config: reason} of the configurations this machine cannot run as named."""
    out = {}
    if "official" in opt.configs and not (opt.ref and (Path(opt.ref) / "train.py").is_file()):
        out["official"] = f"no official checkout (--ref {opt.ref!r})"
    elif "official" in opt.configs and not Path(opt.ref_python).exists():
        out["official"] = f"no Python for the official checkout at {opt.ref_python} (--ref-python)"
    if "bf16" in opt.configs and not NATIVE_BF16 & set(cpu_flags or ()):
        out["bf16"] = "this CPU has no native bf16 (AVX512-BF16 or AMX): --amp would train in fp32"
    return out


SAME_STUDY = ("dataset", "model", "img", "batch", "epochs", "weights")  # what runs added to one study must share


def continued(study, path):
    """study (a new one's settings) holding the successful runs of the study in path, which must have been made with
    the same settings (SAME_STUDY): a study too long for one sitting grows session by session (--add-to), each run
    recording the CPU it ran on. Raises SystemExit with one line when the settings differ."""
    try:
        old = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return study  # the first part of a study
    except (OSError, ValueError) as e:
        raise SystemExit(f"learning_study: --add-to {path}: not a study results file ({e})")
    for k in SAME_STUDY:
        if old.get(k) != study[k]:
            raise SystemExit(f"learning_study: --add-to {path}: its {k} is {old.get(k)!r}, this run's {study[k]!r}: "
                             "give the same settings, or write a new file")
    # a run recorded before runs carried their CPU's flags ran on the machine that wrote the file: keep that fact,
    # since this run's machine becomes the file's
    was = (old.get("run") or {}).get("machine") or {}
    for name, cfg in old.get("configs", {}).items():
        kept = [r if "cpu_flags" in r else {**r, "cpu": r.get("cpu") or was.get("cpu"),
                                            "cpu_flags": was.get("cpu_flags"), "cores": was.get("cores")}
                for r in cfg.get("runs", []) if r.get("rc") == 0 and "error" not in r]
        study["configs"].setdefault(name, {**cfg, "runs": []})["runs"] = kept
    # the configurations in their usual order (official, fp32, bf16), whichever part added them: so are the pairs
    study["configs"] = {c: study["configs"][c] for c in [*CONFIGS, *study["configs"]] if c in study["configs"]}
    study["seeds"] = sorted(set(study["seeds"]) | {r["seed"] for c in study["configs"].values() for r in c["runs"]})
    return study


def already_run(study, name, seed):
    return any(r["seed"] == seed for r in study["configs"][name]["runs"])


def new_study(opt, model_yaml, pretrained, seeds, cpu, skipped, plot, configs):
    """The study's record before its first run: its settings and an empty run list per configuration."""
    return {"dataset": opt.dataset, "model": Path(model_yaml).stem, "img": opt.img, "batch": opt.batch,
            "epochs": opt.epochs, "workers": opt.workers, "weights": Path(opt.weights).name if pretrained else
            "(scratch)", "seeds": seeds, "cpu": cpu, "skipped": skipped, "plot": plot.name,
            "ref_env": opt.ref_env, "project_env": opt.project_env,
            "configs": {c: {"what": CONFIGS[c][2], "flags": CONFIGS[c][1], "runs": []} for c in configs}}


def run_study(opt):
    model_yaml, _, pretrained = DATASETS[opt.dataset]
    cpu, flags = cpu_info()
    skipped = skipped_configs(opt, flags)
    for name, why in skipped.items():
        print(f"learning_study: {name} skipped: {why}")
    configs = [c for c in opt.configs if c not in skipped]
    if not configs:
        print("learning_study: nothing to run")
        return None
    out = Path(opt.add_to or opt.json) if (opt.add_to or opt.json) else default_path("learning_study", tag=opt.dataset)
    plot = Path(opt.plot) if opt.plot else out.with_suffix(".png")
    seeds = list(range(opt.seed_start, opt.seed_start + opt.seeds))
    study = new_study(opt, model_yaml, pretrained, seeds, cpu, skipped, plot, configs)
    if opt.add_to:
        study = continued(study, opt.add_to)
    if "official" in configs:
        study["official_torch"] = subprocess.run([opt.ref_python, "-c", "import torch; print(torch.__version__)"],
                                                 capture_output=True, text=True).stdout.strip() or None
    base_env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    env = {"official": {**base_env, "YOLO_OFFLINE": "1", **_pairs(opt.ref_env)},  # ultralytics: no network probes
           "project": {**base_env, **_pairs(opt.project_env)}}
    with tempfile.TemporaryDirectory(prefix="learning_study_") as tmp:
        tmp = Path(tmp)
        data = make_datasets(opt, tmp)
        weights = ""
        if pretrained:
            weights = str(tmp / Path(opt.weights).name)
            shutil.copy(opt.weights, weights)
        sides = {"official": (opt.ref_python, Path(opt.ref or ".").absolute()), "project": (opt.python, ROOT)}
        for i, seed in enumerate(seeds):
            for name in order_for(configs, i):
                if already_run(study, name, seed):  # --add-to: measured by an earlier session
                    continue
                codebase, extra, _ = CONFIGS[name]
                python, repo = sides[codebase]
                project = tmp / f"runs_{name}"
                cmd = train_command(python, repo, data[codebase], model_yaml, weights, opt, project, f"seed{seed}",
                                    seed, extra)
                wall, peak, rc, log, cpu_s = run_measured(cmd, repo, env[codebase], opt.timeout)
                csv_path = project / f"seed{seed}" / "results.csv"
                figures = run_figures(read_results_csv(csv_path)) if csv_path.is_file() else None
                run = {"seed": seed, "rc": rc, "wall_s": round(wall, 2), "cpu_s": round(cpu_s, 1), "cpu": cpu,
                       "cpu_flags": flags, "cores": os.cpu_count(), "peak_mib": round(peak),
                       "precision": precision_used(log, codebase), **(figures or {})}
                if rc != 0 or figures is None:
                    run["error"] = log[-1500:]
                study["configs"][name]["runs"].append(run)
                print(f"  seed {seed} {name:<9} {wall:8.1f} s  CPU {cpu_s:7.1f} s  {run['precision']}  "
                      + (f"P {run['P']:.4f} R {run['R']:.4f} mAP50 {run['mAP50']:.4f} mAP50-95 {run['mAP50-95']:.4f}"
                         if figures else f"FAILED rc={rc}: {log[-600:]}"), flush=True)
                write_result("learning_study", summarize(study), path=out)  # kept whole after every run
    summarize(study)
    if any(_final(study, c) for c in configs):
        plot_curves(study, plot)
        print(f"wrote {plot}")
    print_summary(study)
    print(f"wrote {write_result('learning_study', study, path=out)}")
    return study


def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ref", default=None, help="official ultralytics/yolov5 checkout (the official config is skipped "
                   "without it)")
    p.add_argument("--ref-python", default=None, help="its Python (default: ../venv/bin/python beside it)")
    p.add_argument("--python", default=str(OWN_PYTHON if OWN_PYTHON.exists() else sys.executable),
                   help="Python for this project (default: its PyTorch environment, .venv-torch)")
    p.add_argument("--dataset", nargs="+", choices=[*DATASETS, "all"], default=["coco128"],
                   help="one study (and results file) per dataset; all: every one")
    p.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    p.add_argument("--seeds", type=int, default=5, help="runs per configuration (seeds seed-start, seed-start+1, ...)")
    p.add_argument("--seed-start", type=int, default=0)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--img", type=int, default=None, help="default 320 (coco128), 256 (shapes)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--data", default=str(SHARED / "data" / "coco128"), help="coco128 folder to copy")
    p.add_argument("--weights", default=str(SHARED / "weights" / "yolov5n.pt"), help="starting weights (coco128)")
    p.add_argument("--ref-env", nargs="*", default=[], help="KEY=VALUE for the official runs, e.g. "
                   "OMP_WAIT_POLICY=PASSIVE (this project's own CPU default; OpenMP's spinning threads slow a "
                   "shared machine's runs several times over)")
    p.add_argument("--project-env", nargs="*", default=[], help="KEY=VALUE for this project's runs")
    p.add_argument("--timeout", type=int, default=6 * 3600, help="seconds per run")
    p.add_argument("--json", default=None, help="results file (default: a new one in benchmarks/results/)")
    p.add_argument("--add-to", default=None, help="a study's results file to grow: its successful runs are kept, "
                   "the (configuration, seed) pairs it lacks are run and added (same settings; a missing file starts "
                   "it)")
    p.add_argument("--plot", default=None, help="curves plot (default: beside the results file, .png)")
    opt = p.parse_args(argv)
    bad = [kv for kv in opt.ref_env + opt.project_env if "=" not in kv]
    if bad:
        p.error(f"--ref-env/--project-env take KEY=VALUE, not {' '.join(bad)}")
    if opt.seeds < 1 or opt.epochs < 1:
        p.error(f"--seeds {opt.seeds} --epochs {opt.epochs}: give at least 1 of each")
    opt.dataset = list(DATASETS) if "all" in opt.dataset else list(dict.fromkeys(opt.dataset))
    if len(opt.dataset) > 1 and (opt.json or opt.plot or opt.add_to):
        p.error("--json/--plot/--add-to name one file: give one --dataset with them")
    opt.configs = list(dict.fromkeys(opt.configs))  # once each, in the order given
    if opt.ref:
        opt.ref = str(Path(opt.ref).absolute())  # runs start in the checkouts, where a relative path means another
    opt.ref_python = str(Path(opt.ref_python or Path(opt.ref or ".").parent / "venv" / "bin" / "python").absolute())
    return opt


def study_options(opt, dataset):
    """opt for one dataset's study: its name, and its image size unless --img gave one."""
    return argparse.Namespace(**{**vars(opt), "dataset": dataset, "img": opt.img or DATASETS[dataset][1]})


def main(opt):
    for dataset in opt.dataset:
        run_study(study_options(opt, dataset))
    return 0


if __name__ == "__main__":
    sys.exit(main(parse_opt()))
