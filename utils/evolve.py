"""--evolve: genetic search over the hyperparameters, as ultralytics does it. Each generation picks a parent from
the 5 fittest rows of evolve.csv, mutates the genes listed in META (gain 0 = fixed), trains, and appends the
results and the hyperparameters to evolve.csv; hyp_evolve.yaml holds the best row so far."""
import random
import time
from pathlib import Path

import numpy as np
import yaml

from utils.general import LOGGER, colorstr

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


def read_evolve_csv(csv):
    lines = Path(csv).read_text().splitlines()
    keys = [k.strip() for k in lines[0].split(",")]
    x = np.array([[float(v) for v in line.split(",")] for line in lines[1:] if line.strip()], ndmin=2)
    return keys, x


def mutate(hyp, csv, parent="single", mp=0.8, s=0.2, rng=None):
    """A child of the best rows in evolve.csv (returns a new hyp dict); the hyp itself when there is no csv yet."""
    hyp = dict(hyp)
    csv = Path(csv)
    if csv.exists():
        rng = rng or np.random.default_rng(int(time.time()))
        keys, x = read_evolve_csv(csv)
        n = min(5, len(x))
        x = x[np.argsort(-_fitness(x))][:n]
        w = _fitness(x) - _fitness(x).min() + 1e-6
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


def record(results, hyp, save_dir):
    """Append one generation to evolve.csv and rewrite hyp_evolve.yaml with the best generation so far."""
    save_dir = Path(save_dir)
    csv, yml = save_dir / "evolve.csv", save_dir / "hyp_evolve.yaml"
    keys = list(RESULT_KEYS) + list(hyp.keys())
    vals = [float(r) for r in results] + [float(v) for v in hyp.values()]
    n = len(keys)
    header = "" if csv.exists() else ("%20s," * n % tuple(keys)).rstrip(",") + "\n"
    with open(csv, "a") as f:
        f.write(header + ("%20.5g," * n % tuple(vals)).rstrip(",") + "\n")
    keys, x = read_evolve_csv(csv)
    i = int(np.argmax(_fitness(x)))
    best = {k: float(v) for k, v in zip(keys[7:], x[i, 7:])}
    with open(yml, "w") as f:
        f.write(f"# YOLOv5 Hyperparameter Evolution Results\n# Best generation: {i}\n"
                f"# Last generation: {len(x) - 1}\n# " + ", ".join(k.strip() for k in keys[:7]) + "\n# "
                + ", ".join(f"{v:.5g}" for v in x[i, :7]) + "\n\n")
        yaml.safe_dump(best, f, sort_keys=False)
    LOGGER.info(colorstr("evolve: ") + f"generation {len(x) - 1} fitness {_fitness(x[-1:])[0]:.5f}, "
                f"best {_fitness(x[i:i + 1])[0]:.5f} (generation {i})")
    return best


def evolve(hyp, opt, device, train_fn):
    """Run opt.evolve generations of train_fn(hyp, opt, device) in opt.save_dir."""
    opt.noval, opt.nosave = True, True  # only the final epoch is validated, only the final epoch saved
    save_dir = Path(opt.save_dir)
    save_dir.mkdir(parents=True, exist_ok=True)
    for gen in range(opt.evolve):
        h = mutate(hyp, save_dir / "evolve.csv")
        results = train_fn(dict(h), opt, device)
        record(results, h, save_dir)
    LOGGER.info(f"Hyperparameter evolution finished {opt.evolve} generations\n"
                f"Results saved to {colorstr('bold', save_dir)}\n"
                f"Usage example: $ python train.py --hyp {save_dir / 'hyp_evolve.yaml'}")
