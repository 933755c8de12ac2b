"""Helpers for the training tests: a tiny synthetic detection set made in a temporary folder (coloured
rectangles and ellipses on noisy backgrounds, YOLO labels), and a runner for train.py in a subprocess."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def make_tiny_dataset(root, n_train=8, n_val=4, size=128, seed=0, nc=2):
    """Write images/{train,val} and labels/{train,val} plus data.yaml under root; returns the yaml path.
    Class 0: filled rectangle, class 1: filled ellipse, each 1-3 per image, sizes 20-60% of the image."""
    import cv2
    rng = np.random.default_rng(seed)
    root = Path(root)
    for split, n in (("train", n_train), ("val", n_val)):
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            im = (rng.normal(110, 20, (size, size, 3))).clip(0, 255).astype(np.uint8)
            rows = []
            for _ in range(int(rng.integers(1, 4))):
                c = int(rng.integers(0, nc))
                w, h = (rng.uniform(0.2, 0.6, 2) * size).astype(int)
                x0, y0 = int(rng.integers(0, size - w)), int(rng.integers(0, size - h))
                color = tuple(int(v) for v in rng.integers(0, 255, 3))
                if c == 0:
                    cv2.rectangle(im, (x0, y0), (x0 + w - 1, y0 + h - 1), color, -1)
                else:
                    cv2.ellipse(im, (x0 + w // 2, y0 + h // 2), (w // 2, h // 2), 0, 0, 360, color, -1)
                rows.append(f"{c} {(x0 + w / 2) / size:.6f} {(y0 + h / 2) / size:.6f} {w / size:.6f} {h / size:.6f}")
            cv2.imwrite(str(root / "images" / split / f"{i:04d}.jpg"), im)
            (root / "labels" / split / f"{i:04d}.txt").write_text("\n".join(rows) + "\n")
    yml = root / "data.yaml"
    yml.write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnames:\n  0: rect\n  1: ellipse\n")
    return yml


def backend_python():
    """This test process's interpreter and backend, for train.py subprocesses."""
    from utils.backend import BACKEND
    return sys.executable, BACKEND


def run_train(args, cwd=ROOT, timeout=600, env_extra=None):
    """Run train.py with args in a subprocess under this process's backend; returns CompletedProcess."""
    python, backend = backend_python()
    env = {**os.environ, "YOLO_BACKEND": backend, "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT),
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"), **(env_extra or {})}
    return subprocess.run([python, str(ROOT / "train.py"), *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
