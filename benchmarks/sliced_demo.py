"""The small-object demo: what slicing buys. Shapes on large canvases with small objects (make_shapes.py
--small-objects: 640 px, objects of about 12-32 px), cut into 256 px tiles (data/scripts/slice_dataset.py), yolov5n
fine-tuned on the tiles at 256 px, then val.py on the whole canvases at 256 px: plain (each canvas shrunk 2.5x, the
objects to 5-13 px) against --slice 256 (each tile at its own size), COCO AP by object size from each
(--save-json). Writes a results file (benchmarks/results_io.py) `sliced_demo_<time>.json`.

    python benchmarks/sliced_demo.py                  # 24 train / 12 val canvases, 30 epochs: about 25 min on 2 cores
    python benchmarks/sliced_demo.py --epochs 10 --train 60 --out DIR   # DIR keeps data and runs (--reuse skips
                                                                        # steps whose outputs are there)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.results_io import write_result  # noqa: E402

SHARED_WEIGHTS = ROOT.parent / "shared" / "weights" / "yolov5n.pt"


def _make_shapes_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_shapes", ROOT / "data" / "scripts" / "make_shapes.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def make_canvases(out, n_train, n_val, seed=0):
    """The large-canvas shapes set and its YAML (out/canvases.yaml)."""
    from utils.atomic_files import write_text
    m = _make_shapes_module()
    s = m.SMALL_OBJECTS
    src = m.make_shapes(out / "canvases", n_train, n_val, s["size"], seed, max_objects=s["max_objects"],
                        radius=s["radius"])
    f = out / "canvases.yaml"
    write_text(f, yaml.safe_dump({"path": str(src), "train": "images/train", "val": "images/val",
                                  "names": dict(enumerate(m.NAMES))}))
    return f


LOG = []  # every run's output, rewritten whole to the --out folder's demo.log after each run


def _run(cmd, log):
    """A script run to its end; its output added to log. Returns wall seconds."""
    from utils.atomic_files import write_text
    t = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    LOG.append(f"$ {' '.join(map(str, cmd))}\n{p.stdout}")
    write_text(log, "\n".join(LOG))
    if p.returncode:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed (exit {p.returncode}); see {log}")
    return time.time() - t


def validate(weights, data, img, out, name, log, slice_args=()):
    """val.py --save-json on data's val canvases; returns (its AP-by-size stats, wall seconds)."""
    cmd = [sys.executable, "val.py", "--weights", weights, "--data", data, "--img", img, "--batch-size", 8,
           "--save-json", "--workers", 0, "--project", out / "runs", "--name", name, "--exist-ok", *slice_args]
    wall = _run([str(c) for c in cmd], log)
    return json.loads((out / "runs" / name / "ap_by_size.json").read_text()), wall


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="work folder (default: a temporary one, removed after)")
    ap.add_argument("--weights", default=str(SHARED_WEIGHTS), help="starting weights")
    ap.add_argument("--train", type=int, default=24, help="training canvases")
    ap.add_argument("--val", type=int, default=12, help="validation canvases")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--img", type=int, default=256, help="training and inference size; the tile size too")
    ap.add_argument("--reuse", action="store_true", help="keep what --out already holds (data, trained weights)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)

    from utils.data.tiling import slice_dataset
    tmp = None if a.out else tempfile.TemporaryDirectory()
    out = Path(a.out or tmp.name)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "demo.log"
    canvases = out / "canvases.yaml"
    if not (a.reuse and canvases.is_file()):
        canvases = make_canvases(out, a.train, a.val)
        slice_dataset(canvases, out / "tiles", size=a.img, overlap=0.2, min_area_ratio=0.1)
    best = out / "runs" / "train" / "weights" / "best.pt"
    train_s = None
    if not (a.reuse and best.is_file()):
        train_s = _run([sys.executable, "train.py", "--data", str(out / "tiles" / "tiles.yaml"), "--weights",
                        a.weights, "--img", str(a.img), "--epochs", str(a.epochs), "--batch-size", "16",
                        "--workers", "2", "--noplots", "--noval", "--project", str(out / "runs"), "--name", "train",
                        "--exist-ok"], log)
    plain, plain_s = validate(best, canvases, a.img, out, "plain", log)
    sliced, sliced_s = validate(best, canvases, a.img, out, "sliced", log,
                                ("--slice", a.img, "--slice-overlap", 0.2))
    figures = {"canvas_px": _make_shapes_module().SMALL_OBJECTS["size"], "train_canvases": a.train,
               "val_canvases": a.val, "tiles_px": a.img, "epochs": a.epochs, "img": a.img,
               "weights_start": Path(a.weights).name, "train_wall_s": train_s,
               "plain": {"coco": plain, "wall_s": plain_s}, "sliced": {"coco": sliced, "wall_s": sliced_s},
               "AP_small_plain": plain["AP_small"], "AP_small_sliced": sliced["AP_small"]}
    print(f"AP_small: plain {plain['AP_small']:.3f}, sliced {sliced['AP_small']:.3f}; "
          f"AP: plain {plain['AP']:.3f}, sliced {sliced['AP']:.3f}")
    f = write_result("sliced_demo", figures, path=a.json)
    print(f"results: {f}")
    if tmp is not None:
        tmp.cleanup()
    return figures


if __name__ == "__main__":
    os.environ.setdefault("TREE_WATCH", "off")
    main()
