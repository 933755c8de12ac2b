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
threads), the two sides alternating image by image so that both run under the same load, with each process's CPU
seconds beside the wall time; written as a results file (benchmarks/results_io.py), `sliced_vs_sahi_<time>.json`."""
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
    t, c = time.perf_counter(), time.process_time()
    r = get_sliced_prediction(im, model, slice_height=s["size"][0], slice_width=s["size"][1],
                              overlap_height_ratio=s["overlap"][0], overlap_width_ratio=s["overlap"][1],
                              perform_standard_pred=s["full_image"], postprocess_type=s["merge"],
                              postprocess_match_metric=s["metric"], postprocess_match_threshold=s["threshold"],
                              postprocess_class_agnostic=s["class_agnostic"], verbose=0)
    dt, dc = time.perf_counter() - t, time.process_time() - c
    rows = [[*map(float, p.bbox.to_xyxy()), float(p.score.value), int(p.category.id)] for p in r.object_prediction_list]
    return rows, dt, dc
run(cfg["images"][0])  # warm-up
import sahi
print("READY" + json.dumps({"torchvision_nms_shim": shimmed, "sahi": sahi.__version__}), flush=True)
for line in sys.stdin:  # one image path a line, answered by one line: its rows and seconds (wall, CPU)
    print("SAHI" + json.dumps(run(line.strip())), flush=True)
'''

SAHI_MERGE_NAMES = {"nmm": "GREEDYNMM", "nms": "NMS"}


def sahi_python(given=None):
    """The SAHI environment's interpreter (--sahi-python, else SAHI_PYTHON), or None when neither names one."""
    p = given or os.environ.get("SAHI_PYTHON")
    return p if p and Path(p).exists() else None


class SahiClient:
    """SAHI_CLIENT in its own interpreter, warmed up, answering one image at a time (so the two sides can be timed
    alternately, image by image, under the same load)."""

    def __init__(self, python, weights, images, settings, conf, imgsz, threads):
        cfg = {"weights": str(weights), "images": [str(p) for p in images], "conf": conf, "imgsz": imgsz,
               "threads": threads,
               "settings": {"size": list(settings.size), "overlap": list(settings.overlap),
                            "full_image": settings.full_image, "merge": SAHI_MERGE_NAMES[settings.merge],
                            "metric": settings.metric.upper(), "threshold": settings.threshold,
                            "class_agnostic": settings.class_agnostic}}
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"  # torch >= 2.6 refuses every YOLOv5 .pt's pickle otherwise
        self.p = subprocess.Popen([python, "-c", SAHI_CLIENT, json.dumps(cfg)], cwd=Path(weights).parent, env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.info = json.loads(self._answer("READY"))

    def _answer(self, tag):
        for line in self.p.stdout:
            if line.startswith(tag):
                return line[len(tag):]
        raise RuntimeError(f"the SAHI client failed:\n{self.p.stderr.read()[-3000:]}")

    def predict(self, path):
        """(rows, wall seconds, CPU seconds) of one image."""
        self.p.stdin.write(f"{path}\n")
        self.p.stdin.flush()
        return tuple(json.loads(self._answer("SAHI")))

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def run_sahi(python, weights, images, settings, conf, imgsz, threads):
    """SAHI's rows, wall and CPU seconds per image, and its version and NMS shim (one client, images in turn)."""
    client = SahiClient(python, weights, images, settings, conf, imgsz, threads)
    try:
        out = [client.predict(p) for p in images]
    finally:
        client.close()
    return {"images": out, **client.info}


class ProjectSide:
    """This project's SlicedPredictor in this process, warmed up on the first image."""

    def __init__(self, weights, images, settings, conf, imgsz, threads):
        from utils.backend import torch
        from utils.inference import load_model
        from utils.inference.slicing import SlicedPredictor
        torch.set_num_threads(threads)
        model, _ = load_model(str(weights), device="cpu", imgsz=imgsz)
        self.sliced = SlicedPredictor(model, imgsz, settings, conf_thres=conf)
        self.predict(images[0])  # warm-up

    def predict(self, path):
        """(rows, wall seconds, CPU seconds) of one image."""
        import cv2

        from utils.backend import inference_mode
        im = cv2.imread(str(path))
        with inference_mode():
            t, c = time.perf_counter(), time.process_time()
            det = self.sliced.predict(im)
            return det.tolist(), time.perf_counter() - t, time.process_time() - c


def run_project(weights, images, settings, conf, imgsz, threads):
    """This project's merged rows, wall and CPU seconds per image (after one warm-up image), in this process."""
    side = ProjectSide(weights, images, settings, conf, imgsz, threads)
    return [side.predict(p) for p in images]


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


def parse_args(argv=None):
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
    return ap.parse_args(argv)


def side_by_side(python, a, ours_side, images, settings, figures):
    """Image by image, one side then the other, so that both are timed under the same load; returns our results."""
    client = SahiClient(python, a.weights, images, settings, a.conf, a.imgsz, a.threads)
    ours, theirs = [], []
    try:
        for p in images:
            ours.append(ours_side.predict(p))
            theirs.append(client.predict(p))
    finally:
        client.close()
    figures.update({"sahi_version": client.info["sahi"],
                    "sahi_torchvision_nms_shim": client.info["torchvision_nms_shim"],
                    "sahi_images_per_s": len(images) / sum(t for _, t, _ in theirs),
                    "sahi_cpu_s_per_image": sum(c for _, _, c in theirs) / len(images),
                    "sahi_s_per_image": [t for _, t, _ in theirs]})
    figures["agreement"] = compare([r for r, _, _ in ours], [r for r, _, _ in theirs])
    return ours


def print_comparison(figures):
    figures["speedup"] = figures["ours_images_per_s"] / figures["sahi_images_per_s"]
    figures["cpu_speedup"] = figures["sahi_cpu_s_per_image"] / figures["ours_cpu_s_per_image"]
    ag = figures["agreement"]
    print(f"matched {ag['matched']} boxes, unmatched {ag['unmatched']}, max box diff {ag['max_box_diff_px']:.2e} "
          f"px, max score diff {ag['max_score_diff']:.2e}")
    print(f"images/s: this project {figures['ours_images_per_s']:.2f}, SAHI {figures['sahi_images_per_s']:.2f} "
          f"({figures['speedup']:.2f}x); CPU s/image {figures['ours_cpu_s_per_image']:.2f} vs "
          f"{figures['sahi_cpu_s_per_image']:.2f} ({figures['cpu_speedup']:.2f}x)")


def main(argv=None):
    a = parse_args(argv)
    from utils.tiles import SliceSettings
    settings = SliceSettings.of(a.slice, a.overlap, full_image=not a.no_full, merge=a.merge, metric=a.metric,
                                threshold=a.threshold, batch=a.batch)
    images = list_images(a.source, a.images)
    ours_side = ProjectSide(a.weights, images, settings, a.conf, a.imgsz, a.threads)
    figures = {"weights": Path(a.weights).name, "images": [p.name for p in images], "imgsz": a.imgsz,
               "conf": a.conf, "threads": a.threads,
               "settings": {"size": list(settings.size), "overlap": list(settings.overlap),
                            "full_image": settings.full_image, "merge": settings.merge, "metric": settings.metric,
                            "threshold": settings.threshold, "batch": settings.batch}}
    python = sahi_python(a.sahi_python)
    if python is None:
        ours = [ours_side.predict(p) for p in images]
        print("SAHI side skipped: no SAHI environment (pass --sahi-python or set SAHI_PYTHON)")
        figures["sahi"] = "skipped: no SAHI environment"
    else:
        ours = side_by_side(python, a, ours_side, images, settings, figures)
    figures.update({"ours_images_per_s": len(images) / sum(t for _, t, _ in ours),
                    "ours_cpu_s_per_image": sum(c for _, _, c in ours) / len(images),
                    "ours_s_per_image": [t for _, t, _ in ours]})
    if python is not None:
        print_comparison(figures)
    out = write_result("sliced_vs_sahi", figures, path=a.json)
    print(f"results: {out}")
    return figures


if __name__ == "__main__":
    main()
