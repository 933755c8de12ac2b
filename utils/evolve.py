"""--evolve: genetic search over the hyperparameters, as ultralytics does it. Each generation picks a parent from
the 5 fittest rows of evolve.csv, mutates the genes listed in META (gain 0 = fixed), trains, and appends the
results and the hyperparameters to evolve.csv; hyp_evolve.yaml holds the best row so far.

The first generations train an initial population instead of mutants: --hyp itself, then each hyp YAML in
--evolve_population (data/hyps/ by default) that differs from it in some gene. --resume_evolve continues an earlier
search: from its evolve.csv (the rows become this run's history, so mutation starts from its fittest), or from an
official evolve_population.yaml (its individuals become the initial population).

The task decides evolve.csv's result columns and the fitness its rows are ranked by (EvolveColumns.of(task)):
detection's 7 (P, R, mAP50, mAP50-95, val box, obj, cls; 0.1 mAP50 + 0.9 mAP50-95), segmentation's 12 as official
segment/train.py writes them (box then mask P, R, mAP50, mAP50-95, val box, seg, obj, cls; the fitness best.pt is
chosen by, boxes plus masks)."""
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Tuple

import numpy as np
import yaml

from utils.atomic_files import write_bytes, write_text
from utils.errors import UserError
from utils.evolve_csv import read_evolve_csv
from utils.log import LOGGER, colorstr
from utils.loggers import note_ignored_flags
from utils.paths import ROOT
from utils.plots import plot_evolve
from utils.yaml_files import read_yaml

# gene: (mutation gain, lower limit, upper limit). 'anchors' is not evolved here: the model yaml owns anchors.
META = {
    "lr0": (1, 1e-5, 1e-1), "lrf": (1, 0.01, 1.0), "momentum": (0.3, 0.6, 0.98), "weight_decay": (1, 0.0, 0.001),
    "warmup_epochs": (1, 0.0, 5.0), "warmup_momentum": (1, 0.0, 0.95), "warmup_bias_lr": (1, 0.0, 0.2),
    "box": (1, 0.02, 0.2), "cls": (1, 0.2, 4.0), "cls_pw": (1, 0.5, 2.0), "obj": (1, 0.2, 4.0),
    "obj_pw": (1, 0.5, 2.0), "iou_t": (0, 0.1, 0.7), "anchor_t": (1, 2.0, 8.0), "fl_gamma": (0, 0.0, 2.0),
    "hsv_h": (1, 0.0, 0.1), "hsv_s": (1, 0.0, 0.9), "hsv_v": (1, 0.0, 0.9), "degrees": (1, 0.0, 45.0),
    "translate": (1, 0.0, 0.9), "scale": (1, 0.0, 0.9), "shear": (1, 0.0, 10.0), "perspective": (0, 0.0, 0.001),
    "flipud": (1, 0.0, 1.0), "fliplr": (0, 0.0, 1.0), "mosaic": (1, 0.0, 1.0), "mixup": (1, 0.0, 1.0),
    "copy_paste": (1, 0.0, 1.0)}
RESULT_KEYS = ("metrics/precision", "metrics/recall", "metrics/mAP_0.5", "metrics/mAP_0.5:0.95",
               "val/box_loss", "val/obj_loss", "val/cls_loss")


def _fitness(x):
    return (np.asarray(x)[:, :4] * np.array([0.0, 0.0, 0.1, 0.9])).sum(1)


@dataclass(frozen=True)
class EvolveColumns:
    """evolve.csv's first columns (what one generation's training returns: the metrics, then the val losses) and
    the fitness of rows of them."""
    result_keys: Tuple[str, ...]
    fitness: Callable

    @classmethod
    def of(cls, task):
        """A utils.tasks.Task's: its metric and val-loss columns of results.csv, and its fitness."""
        n = len(task.loss_names)
        keys = task.results_keys()[n:n + len(task.metric_names) + n]
        return cls(tuple(keys), task.fitness)


DETECTION = EvolveColumns(RESULT_KEYS, _fitness)


def mutate(hyp, csv, parent="single", mp=0.8, s=0.2, rng=None, columns=DETECTION):
    """A child of the best rows in evolve.csv (returns a new hyp dict); the hyp itself when there is no csv yet."""
    hyp = dict(hyp)
    csv = Path(csv)
    keys, x = read_evolve_csv(csv) if csv.exists() else ([], ())  # rows that are not numbers are skipped, warned
    if len(x):  # no usable generation yet: the hyp itself, as without a csv
        rng = rng or np.random.default_rng(int(time.time()))
        n = min(5, len(x))
        x = x[np.argsort(-columns.fitness(x))][:n]
        w = columns.fitness(x) - columns.fitness(x).min() + 1e-6
        row = x[random.choices(range(n), weights=w)[0]] if parent == "single" or n == 1 else \
            (x * w.reshape(n, 1)).sum(0) / w.sum()
        genes = [k for k in hyp if k in META and k in keys]
        g = np.array([META[k][0] for k in genes], dtype=np.float64)
        v = np.ones(len(genes))
        while len(genes) and (v == 1).all():  # mutate until something changes
            v = (g * (rng.random(len(genes)) < mp) * rng.standard_normal(len(genes)) * rng.random() * s + 1)
            v = v.clip(0.3, 3.0)
        for k, vi in zip(genes, v):
            hyp[k] = float(row[keys.index(k)] * vi)
    for k, (_, lo, hi) in META.items():  # constrain to limits
        if k in hyp:
            hyp[k] = round(min(max(hyp[k], lo), hi), 5)
    return hyp


def record(results, hyp, save_dir, columns=DETECTION):
    """Append one generation to evolve.csv and rewrite hyp_evolve.yaml with the best generation so far."""
    save_dir = Path(save_dir)
    csv, yml = save_dir / "evolve.csv", save_dir / "hyp_evolve.yaml"
    nr = len(columns.result_keys)
    if len(results) != nr:  # a task's train() and its columns disagree: a programming error, not the user's
        raise ValueError(f"evolve: {len(results)} results for the {nr} columns {columns.result_keys}")
    keys = list(columns.result_keys) + list(hyp.keys())
    vals = [float(r) for r in results] + [float(v) for v in hyp.values()]
    n = len(keys)
    old = csv.read_bytes() if csv.exists() else b""
    if old and not old.endswith(b"\n"):  # a row cut by an earlier crash stays a row of its own
        old += b"\n"
    header = b"" if old else (("%20s," * n % tuple(keys)).rstrip(",") + "\n").encode()
    # appended by rewriting the small file whole through a temporary name: a full disk never leaves half a row
    write_bytes(csv, old + header + (("%20.5g," * n % tuple(vals)).rstrip(",") + "\n").encode())
    keys, x = read_evolve_csv(csv)
    fit = columns.fitness(x)
    i = int(np.argmax(fit))
    best = {k: float(v) for k, v in zip(keys[nr:], x[i, nr:])}
    write_text(yml, f"# YOLOv5 Hyperparameter Evolution Results\n# Best generation: {i}\n"
                    f"# Last generation: {len(x) - 1}\n# " + ", ".join(k.strip() for k in keys[:nr]) + "\n# "
                    + ", ".join(f"{v:.5g}" for v in x[i, :nr]) + "\n\n" + yaml.safe_dump(best, sort_keys=False))
    LOGGER.info(colorstr("evolve: ") + f"generation {len(x) - 1} fitness {fit[-1]:.5f}, "
                f"best {fit[i]:.5f} (generation {i})")
    return best


def print_mutation(keys, results, hyp, save_dir, bucket="", prefix=colorstr("evolve: ")):
    """ultralytics' name for record(): one generation (results under their keys, then hyp) appended to
    save_dir/evolve.csv, hyp_evolve.yaml rewritten with the fittest row (fitness 0.1 mAP50 + 0.9 mAP50-95 of the
    results' 3rd and 4th columns, as ultralytics ranks them). bucket (a gs:// copy) is not used: nothing is
    uploaded."""
    return record(results, hyp, save_dir, columns=EvolveColumns(tuple(keys), _fitness))


class EvolveError(UserError):
    """--evolve_population or --resume_evolve names something that cannot seed the search."""


def _existing(path, flag):
    for cand in (Path(path), ROOT / path):
        if cand.exists():
            return cand
    raise EvolveError(f"{flag} {path}: not found; give an existing path.")


def _read_yaml(file, flag):
    return read_yaml(file, what=flag, error=EvolveError, mapping=False)  # one line for syntax errors, alias bombs


def _individual(hyp, candidate):
    """hyp with the candidate's values for the evolvable genes (META) both define."""
    return {**hyp, **{k: float(v) for k, v in candidate.items()
                      if k in META and k in hyp and isinstance(v, (int, float)) and not isinstance(v, bool)}}


def initial_population(hyp, folder=None, resume=None, csv=None, columns=DETECTION):
    """Hyp dicts to train before mutating, without repeats: hyp and the folder's *.yaml, or the individuals of an
    official evolve_population.yaml given as `resume`. A `resume` evolve.csv is copied to `csv` instead and no
    population is returned: mutation continues from its fittest rows."""
    population = [dict(hyp)]
    if resume:
        path = _existing(resume, "--resume_evolve")
        if path.suffix == ".csv":
            try:
                keys, x = read_evolve_csv(path)
            except (ValueError, IndexError) as e:  # UnicodeDecodeError is a ValueError
                raise EvolveError(f"--resume_evolve {path}: not a readable evolve.csv ({type(e).__name__}: "
                                  f"{' '.join(str(e).split())[:100]}).") from None
            nr = len(columns.result_keys)
            if len(keys) <= nr or tuple(keys[:nr]) != columns.result_keys:
                raise EvolveError(f"--resume_evolve {path}: not an evolve.csv of this task (its columns start "
                                  f"{', '.join(keys[:2])}...; expected {', '.join(columns.result_keys[:2])}...).")
            if csv is not None and Path(csv).resolve() != path.resolve():
                write_text(csv, path.read_text())
            LOGGER.info(colorstr("evolve: ") + f"resuming from the {len(x)} generations in {path}")
            return []
        individuals = _read_yaml(path, "--resume_evolve")
        if not isinstance(individuals, dict) or not individuals or \
                not all(isinstance(v, dict) for v in individuals.values()):
            raise EvolveError(f"--resume_evolve {path}: expected an evolve.csv or an evolve_population.yaml "
                              "({name: {hyperparameter: value}}).")
        population, candidates = [], list(individuals.values())
    elif folder:
        path = _existing(folder, "--evolve_population")
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        candidates = [c for c in (_read_yaml(f, "--evolve_population") for f in files) if isinstance(c, dict)]
    else:
        candidates = []
    for c in candidates:
        h = _individual(hyp, c)
        if all(any(h[k] != p.get(k) for k in META if k in h) for p in population):
            population.append(h)
    return population


def evolve(hyp, opt, device, train_fn, columns=DETECTION, script="train.py"):
    """Run opt.evolve generations of train_fn(hyp, opt, device) in opt.save_dir. columns: the task's evolve.csv
    results and fitness (EvolveColumns.of(task)); script: the entry script named in the closing usage line."""
    note_ignored_flags(vars(opt), {"bucket": ""}, what="syncing evolve.csv with a Google Cloud Storage bucket")
    # only the final epoch is validated, nothing saved, no plots (official: plots = not evolve and not --noplots)
    opt.noval, opt.nosave, opt.noplots = True, True, True
    save_dir = Path(opt.save_dir)
    save_dir.mkdir(parents=True, exist_ok=True)
    csv = save_dir / "evolve.csv"
    population = initial_population(hyp, opt.evolve_population, opt.resume_evolve, csv, columns=columns)
    if csv.exists():  # continuing a search (--resume_evolve x.csv, or --resume into its folder): mutants only
        population = []
    elif len(population) > 1:
        LOGGER.info(colorstr("evolve: ") + f"initial population of {len(population)}, then mutation")
    for gen in range(opt.evolve):
        h = population[gen] if gen < len(population) else mutate(hyp, csv, columns=columns)
        results = train_fn(dict(h), opt, device)
        record(results, h, save_dir, columns=columns)
    if (save_dir / "evolve.csv").exists():
        plot_evolve(save_dir / "evolve.csv", columns.fitness, len(columns.result_keys))  # evolve.png, as official
    LOGGER.info(f"Hyperparameter evolution finished {opt.evolve} generations\n"
                f"Results saved to {colorstr('bold', save_dir)}\n"
                f"Usage example: $ python {script} --hyp {save_dir / 'hyp_evolve.yaml'}")
