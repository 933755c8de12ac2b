"""The demo's learning figure: one column of the newest results.csv under a runs folder, first epoch against last
(and the best epoch), e.g. `python scripts/learning_figure.py runs/train-seg "metrics/mAP_0.5(M)"`."""
import csv
import sys
from pathlib import Path


def learning_figure(runs, column):
    files = sorted(Path(runs).glob("*/results.csv"), key=lambda f: f.stat().st_mtime)
    if not files:
        return f"no results.csv under {runs}"
    with open(files[-1]) as f:
        rows = [{k.strip(): v.strip() for k, v in r.items()} for r in csv.DictReader(f)]
    if not rows or column not in rows[0]:
        return f"{files[-1]}: no column {column!r}"
    y = [float(r[column]) for r in rows]
    best = max(range(len(y)), key=y.__getitem__)
    return (f"{column}: {y[0]:.3f} after epoch 0 -> {y[-1]:.3f} after epoch {len(y) - 1} (best {y[best]:.3f}, "
            f"epoch {best}) in {files[-1]}")


if __name__ == "__main__":
    print(learning_figure(sys.argv[1], sys.argv[2]))
