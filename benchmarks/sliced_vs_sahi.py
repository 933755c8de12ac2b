"""Sliced prediction, this project against SAHI itself: the same weights, the same decoded images, the same slice and
merge settings; the detections matched box to box and the time per image measured side by side.

    python benchmarks/sliced_vs_sahi.py --sahi-python SAHI_ENV/bin/python        # 8 coco128 images, slice 256
    python benchmarks/sliced_vs_sahi.py --sahi-python P --source DIR --slice 512 --imgsz 640 --images 4

SAHI (sahi 0.12.8 with the `yolov5` pip package, its model type "yolov5") is not one of the project's dependencies:
it runs in a throwaway environment of its own (docs/sliced-inference.md says how to build one), named by
--sahi-python (or SAHI_PYTHON); without one this side is skipped, saying so. Its yolov5 model runs on the yolov5
package's own AutoShape, one tile a call; this project's SlicedPredictor runs all tiles of an image as one batch.
Both read the images as this script decodes them (OpenCV, then RGB for SAHI), so JPEG decoders cannot differ.
PyPI's torchvision wheels do not load their compiled operators into a CPU-only torch build: where that is so, the
SAHI side registers a plain-torch greedy NMS as torchvision::nms before importing it (the same rule, as
torchvision.ops.nms documents it), and the results record that it did.

Figures: per image the detections of each, matched greedily by class and IoU; the largest coordinate and score
difference over matched pairs; unmatched counts; images/s of each (after one warm-up image, single process, same
threads); written as a results file (benchmarks/results_io.py), `sliced_vs_sahi_<time>.json`."""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.results_io import write_result  # noqa: E402

SHARED_COCO = ROOT.parent / "shared" / "data" / "coco128" / "images" / "train2017"
SHARED_WEIGHTS = ROOT.parent / "shared" / "weights" / "yolov5n.pt"

# Run by SAHI's interpreter, outside the project (so `models` in the checkpoint's pickle resolves to the yolov5
# package's own classes, as for any SAHI user). argv: a JSON of the settings and image paths. Prints one line
# "SAHI" + JSON: per image the rows [x1, y1, x2, y2, score, class] and the seconds get_sliced_prediction took.
SAHI_CLIENT = r'''
import json, sys, time
cfg = json.loads(sys.argv[1])
import torch
shimmed = False
try:
    import torchvision
    torchvision.ops.nms(torch.zeros((1, 4)), torch.ones(1), 0.5)
except Exception:
    # torchvision's compiled operators do not load into this torch: define torchvision::nms in plain torch first
    # (greedy, drop IoU > threshold, best score first), then import torchvision against it.
    for k in [k for k in sys.modules if k.startswith("torchvision")]:
        del sys.modules[k]
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")

    def nms(dets, scores, iou_threshold):
        order = scores.argsort(descending=True)
        b = dets[order]
        area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        lt = torch.max(b[:, None, :2], b[None, :, :2])
        rb = torch.min(b[:, None, 2:], b[None, :, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[..., 0] * wh[..., 1]
        over = (inter / (area[:, None] + area[None, :] - inter)) > iou_threshold
        alive = torch.ones(len(b), dtype=torch.bool)
        for i in range(len(b)):
            if alive[i]:
                alive[i + 1:] &= ~over[i, i + 1:]
        return order[alive]

    lib.impl("nms", nms, "CPU")
    import torchvision
    import torchvision.ops.boxes as tvboxes
    tvboxes._assert_has_ops = lambda: None
    shimmed = True
import cv2
from sahi import AutoDetectionModel
from sahi.predict import get_sliced_prediction
torch.set_num_threads(cfg["threads"])
model = AutoDetectionModel.from_pretrained(model_type="yolov5", model_path=cfg["weights"],
                                           confidence_threshold=cfg["conf"], device="cpu", image_size=cfg["imgsz"])
s = cfg["settings"]
def run(path):
    im = cv2.imread(path)[:, :, ::-1].copy()  # RGB, as SAHI reads files
    t = time.perf_counter()
    r = get_sliced_prediction(im, model, slice_height=s["size"][0], slice_width=s["size"][1],
                              overlap_height_ratio=s["overlap"][0], overlap_width_ratio=s["overlap"][1],
                              perform_standard_pred=s["full_image"], postprocess_type=s["merge"],
                              postprocess_match_metric=s["metric"], postprocess_match_threshold=s["threshold"],
                              postprocess_class_agnostic=s["class_agnostic"], verbose=0)
    dt = time.perf_counter() - t
    rows = [[*map(float, p.bbox.to_xyxy()), float(p.score.value), int(p.category.id)] for p in r.object_prediction_list]
    return rows, dt
run(cfg["images"][0])  # warm-up
out = [run(p) for p in cfg["images"]]
import sahi
print("SAHI" + json.dumps({"images": out, "torchvision_nms_shim": shimmed, "sahi": sahi.__version__}))
'''

SAHI_MERGE_NAMES = {"nmm": "GREEDYNMM", "nms": "NMS"}


def sahi_python(given=None):
    """The SAHI environment's interpreter (--sahi-python, else SAHI_PYTHON), or None when neither names one."""
    p = given or os.environ.get("SAHI_PYTHON")
    return p if p and Path(p).exists() else None


def run_sahi(python, weights, images, settings, conf, imgsz, threads, timeout=1800):
    """SAHI's rows and seconds per image (one subprocess, SAHI_CLIENT), plus whether the NMS shim was used."""
    cfg = {"weights": str(weights), "images": [str(p) for p in images], "conf": conf, "imgsz": imgsz,
           "threads": threads,
           "settings": {"size": list(settings.size), "overlap": list(settings.overlap),
                        "full_image": settings.full_image, "merge": SAHI_MERGE_NAMES[settings.merge],
                        "metric": settings.metric.upper(), "threshold": settings.threshold,
                        "class_agnostic": settings.class_agnostic}}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"  # torch >= 2.6 refuses every YOLOv5 .pt's pickled model otherwise
    p = subprocess.run([python, "-c", SAHI_CLIENT, json.dumps(cfg)], cwd=Path(weights).parent, env=env,
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode or "SAHI{" not in p.stdout:
        raise RuntimeError(f"the SAHI client failed:\n{(p.stdout + p.stderr)[-3000:]}")
    return json.loads(p.stdout[p.stdout.index("SAHI{") + 4:].splitlines()[0])


def run_project(weights, images, settings, conf, imgsz, threads):
    """This project's merged rows and seconds per image (after one warm-up image), in this process."""
    import cv2

    from utils.backend import inference_mode, torch
    from utils.inference import load_model
    from utils.inference.slicing import SlicedPredictor
    torch.set_num_threads(threads)
    model, _ = load_model(str(weights), device="cpu", imgsz=imgsz)
    sliced = SlicedPredictor(model, imgsz, settings, conf_thres=conf)
    out = []
    with inference_mode():
        sliced.predict(cv2.imread(str(images[0])))  # warm-up
        for path in images:
            im = cv2.imread(str(path))
            t = time.perf_counter()
            det = sliced.predict(im)
            out.append((det.tolist(), time.perf_counter() - t))
    return out


def match_rows(a, b):
    """Greedy one-to-one matching of two detection lists (rows [xyxy, score, cls]) by class, highest IoU first.
    Returns (pairs [(i, j)], unmatched in a, unmatched in b)."""
    from utils.tiles import match_values
    a, b = np.asarray(a, np.float64).reshape(-1, 6), np.asarray(b, np.float64).reshape(-1, 6)
    cand = []
    for i in range(len(a)):
        if len(b):
            iou = match_values(a[i, :4], b[:, :4], "iou")
            for j in np.flatnonzero((iou > 0.5) & (b[:, 5] == a[i, 5])):
                cand.append((-iou[j], i, int(j)))
    used_a, used_b, pairs = set(), set(), []
    for _, i, j in sorted(cand):
        if i not in used_a and j not in used_b:
            used_a.add(i), used_b.add(j), pairs.append((i, j))
    return pairs, len(a) - len(pairs), len(b) - len(pairs)


def compare(ours, theirs):
    """Per-image and overall agreement of two lists of rows: matched pairs, unmatched counts, largest differences."""
    per_image, max_box, max_score, unmatched = [], 0.0, 0.0, 0
    for a, b in zip(ours, theirs):
        pairs, ua, ub = match_rows(a, b)
        a, b = np.asarray(a).reshape(-1, 6), np.asarray(b).reshape(-1, 6)
        box = max([float(np.abs(a[i, :4] - b[j, :4]).max()) for i, j in pairs], default=0.0)
        score = max([float(abs(a[i, 4] - b[j, 4])) for i, j in pairs], default=0.0)
        per_image.append({"ours": len(a), "sahi": len(b), "matched": len(pairs), "unmatched_ours": ua,
                          "unmatched_sahi": ub, "max_box_diff_px": box, "max_score_diff": score})
        max_box, max_score, unmatched = max(max_box, box), max(max_score, score), unmatched + ua + ub
    return {"per_image": per_image, "max_box_diff_px": max_box, "max_score_diff": max_score,
            "unmatched": unmatched, "matched": sum(x["matched"] for x in per_image)}


def list_images(source, n):
    from utils.data.files import IMG_FORMATS
    p = Path(source)
    files = [p] if p.is_file() else sorted(f for f in p.iterdir() if f.suffix[1:].lower() in IMG_FORMATS)
    return files[:n]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", default=str(SHARED_WEIGHTS))
    ap.add_argument("--source", default=str(SHARED_COCO), help="an image or a folder of images")
    ap.add_argument("--images", type=int, default=8, help="how many images of --source")
    ap.add_argument("--slice", type=int, nargs="+", default=[256])
    ap.add_argument("--overlap", type=float, default=0.2)
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--conf", type=float, default=0.25)
    ap.add_argument("--merge", default="nmm", choices=["nmm", "nms"])
    ap.add_argument("--metric", default="ios", choices=["ios", "iou"])
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--no-full", action="store_true", help="no full-image pass (SAHI perform_standard_pred=False)")
    ap.add_argument("--batch", type=int, default=16, help="this project's tiles per model call")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--sahi-python", default=None, help="the SAHI environment's python (else $SAHI_PYTHON)")
    ap.add_argument("--json", default=None, help="results file (default benchmarks/results/sliced_vs_sahi_*.json)")
    a = ap.parse_args(argv)

    from utils.tiles import SliceSettings
    settings = SliceSettings.of(a.slice, a.overlap, full_image=not a.no_full, merge=a.merge, metric=a.metric,
                                threshold=a.threshold, batch=a.batch)
    images = list_images(a.source, a.images)
    ours = run_project(a.weights, images, settings, a.conf, a.imgsz, a.threads)
    figures = {"weights": Path(a.weights).name, "images": [p.name for p in images], "imgsz": a.imgsz,
               "conf": a.conf, "threads": a.threads,
               "settings": {"size": list(settings.size), "overlap": list(settings.overlap),
                            "full_image": settings.full_image, "merge": settings.merge, "metric": settings.metric,
                            "threshold": settings.threshold, "batch": settings.batch},
               "ours_images_per_s": len(images) / sum(t for _, t in ours),
               "ours_s_per_image": [t for _, t in ours]}
    python = sahi_python(a.sahi_python)
    if python is None:
        print("SAHI side skipped: no SAHI environment (pass --sahi-python or set SAHI_PYTHON)")
        figures["sahi"] = "skipped: no SAHI environment"
    else:
        theirs = run_sahi(python, a.weights, images, settings, a.conf, a.imgsz, a.threads)
        figures.update({"sahi_version": theirs["sahi"], "sahi_torchvision_nms_shim": theirs["torchvision_nms_shim"],
                        "sahi_images_per_s": len(images) / sum(t for _, t in theirs["images"]),
                        "sahi_s_per_image": [t for _, t in theirs["images"]]})
        figures["speedup"] = figures["ours_images_per_s"] / figures["sahi_images_per_s"]
        figures["agreement"] = compare([r for r, _ in ours], [r for r, _ in theirs["images"]])
        ag = figures["agreement"]
        print(f"matched {ag['matched']} boxes, unmatched {ag['unmatched']}, max box diff {ag['max_box_diff_px']:.2e} "
              f"px, max score diff {ag['max_score_diff']:.2e}")
        print(f"images/s: this project {figures['ours_images_per_s']:.2f}, SAHI {figures['sahi_images_per_s']:.2f} "
              f"({figures['speedup']:.2f}x)")
    out = write_result("sliced_vs_sahi", figures, path=a.json)
    print(f"results: {out}")
    return figures


if __name__ == "__main__":
    main()
