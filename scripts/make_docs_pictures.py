"""Make the documentation's pictures (docs/assets/*.jpg) from a short real run on the offline shapes data.

    python scripts/make_docs_pictures.py                         # from scratch (offline, about 10 min on 2 cores)
    python scripts/make_docs_pictures.py --det-weights yolov5n.pt --seg-weights yolov5n-seg.pt --epochs 8

What it does, all inside a temporary folder (nothing is written into runs/ or ../datasets):
1. generates the shapes set twice (boxes, and the same scenes with polygon labels) with data/scripts/make_shapes.py;
2. trains yolov5n (detection) and yolov5n-seg (segmentation) on them with train.py and segment/train.py;
3. runs detect.py and segment/predict.py on one validation image each;
4. copies the pictures a reader needs, shrunk to at most --width pixels and JPEG-compressed, into docs/assets/:
   train_batch0.jpg (a labelled training batch), results.jpg (results.png), confusion_matrix.jpg,
   predict.jpg (a detection) and predict_seg.jpg (a segmentation).

The figures are what that run gives: a fine-tuned model predicts the shapes well after a few epochs; from scratch it
needs more epochs (--epochs 30 is the demo's). Pictures go through utils/atomic_files.py like every output.
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from utils.atomic_files import write_image  # noqa: E402 (after the path line: run as a script)

NAMES = ["red circle", "green square", "blue triangle", "yellow star", "magenta cross", "cyan hexagon"]


def data_yaml(folder, dataset):
    """A data YAML for a generated set, written beside it (the same keys as data/shapes.yaml, no download:)."""
    names = "".join(f"  {i}: {n}\n" for i, n in enumerate(NAMES))
    path = folder / f"{dataset.name}.yaml"
    path.write_text(f"path: {dataset}\ntrain: images/train\nval: images/val\nnames:\n{names}")
    return path


def run(script, *args):
    """Run one entry script of the project as a user would, stopping on failure."""
    cmd = [sys.executable, str(ROOT / script), *map(str, args)]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True, env={**os.environ, "YOLO_QUIET": "1"})


def shrink_into_assets(src, name, width, quality):
    """Copy picture src to docs/assets/<name>, at most `width` pixels wide, as a JPEG; returns its size in bytes."""
    im = cv2.imread(str(src))
    if im is None:
        raise SystemExit(f"{src}: the run wrote no such picture")
    if im.shape[1] > width:
        h = round(im.shape[0] * width / im.shape[1])
        im = cv2.resize(im, (width, h), interpolation=cv2.INTER_AREA)
    out = ROOT / "docs" / "assets" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    write_image(out, im, (cv2.IMWRITE_JPEG_QUALITY, quality))
    return out.stat().st_size


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--det-weights", default="", help="detection weights to fine-tune ('' trains from scratch)")
    p.add_argument("--seg-weights", default="", help="segmentation weights to fine-tune ('' from scratch)")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--img", type=int, default=256)
    p.add_argument("--train", type=int, default=300, help="training images generated")
    p.add_argument("--width", type=int, default=720, help="widest picture kept, in pixels")
    p.add_argument("--quality", type=int, default=80, help="JPEG quality of the pictures kept")
    p.add_argument("--work", default="", help="keep the runs in this folder (default: a temporary one)")
    opt = p.parse_args()

    sys.path.insert(0, str(ROOT / "data" / "scripts"))
    from make_shapes import make_shapes

    with tempfile.TemporaryDirectory(prefix="docs-pictures-") as tmp:
        work = Path(opt.work or tmp).resolve()
        det = make_shapes(work / "shapes", n_train=opt.train, n_val=60, size=256, seed=0)
        seg = make_shapes(work / "shapes-seg", n_train=opt.train, n_val=60, size=256, seed=0, segments=True)
        runs = work / "runs"
        common = ("--img", opt.img, "--batch-size", 16, "--epochs", opt.epochs, "--workers", 2, "--device", "cpu",
                  "--exist-ok")
        run("train.py", "--data", data_yaml(work, det), "--cfg", "yolov5n.yaml", "--weights", opt.det_weights,
            *common, "--project", runs, "--name", "det")
        run("segment/train.py", "--data", data_yaml(work, seg), "--cfg", "yolov5n-seg.yaml", "--weights",
            opt.seg_weights, *common, "--project", runs, "--name", "seg")
        image = det / "images" / "val" / sorted(os.listdir(det / "images" / "val"))[3]
        run("detect.py", "--weights", runs / "det/weights/best.pt", "--source", image, "--img", opt.img,
            "--project", runs, "--name", "predict", "--exist-ok")
        run("segment/predict.py", "--weights", runs / "seg/weights/best.pt", "--source", image, "--img", opt.img,
            "--project", runs, "--name", "predict-seg", "--exist-ok")
        pictures = {"train_batch0.jpg": runs / "det/train_batch0.jpg", "results.jpg": runs / "det/results.png",
                    "confusion_matrix.jpg": runs / "det/confusion_matrix.png",
                    "predict.jpg": runs / "predict" / image.name, "predict_seg.jpg": runs / "predict-seg" / image.name}
        total = 0
        for name, src in pictures.items():
            size = shrink_into_assets(src, name, opt.width, opt.quality)
            total += size
            print(f"docs/assets/{name}: {size / 1024:.0f} KB")
        print(f"{len(pictures)} pictures, {total / 1024:.0f} KB in all")


if __name__ == "__main__":
    main()
