"""How far validation figures move with the order given to images of equal aspect ratio in --rect batches.

val.py groups images into rect batches by sorting aspect ratios; images with equal ratios (39 of coco128's 128
are 4:3) can land in either of two neighbouring batches, whose padded shapes differ, and so do the detections.
ultralytics leaves that order to numpy's unstable argsort, which orders ties differently across numpy versions
and CPUs; this project sorts stably (file order). This script runs the model once per (image, shape) an order
can produce, then rebuilds P, R, mAP50 and mAP50-95 for the stable order, this numpy's quicksort order and
--orders random tie orders, and prints their spread and how often each figure falls within --tol of --ref.

    python benchmarks/rect_order.py                          # coco128 (../shared), yolov5n.pt, batch 32, 1000 orders
    python benchmarks/rect_order.py --batch-size 16 --ref 0.626 0.487 0.550 0.352
"""
import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from utils.backend import no_grad, to_numpy  # noqa: E402
from utils.dataloaders import LoadImagesAndLabels, rect_batch_shapes  # noqa: E402
from utils.evaluation import IOU_THRESHOLDS, labels_in_pixels, match_image  # noqa: E402
from utils.nms import non_max_suppression  # noqa: E402
from utils.inference import preprocess  # noqa: E402
from utils.metrics import ap_per_class  # noqa: E402

SHARED = ROOT.parent / "shared"
FIGURES = ("P", "R", "mAP50", "mAP50-95")


def batch_shapes_per_image(ar, order, batch_size, img_size, stride, pad):
    """(n, 2) letterbox shape (h, w) of every image when the images are taken in `order` (as val.py's rect does)."""
    per_batch = rect_batch_shapes(ar[order], batch_size, img_size, stride, pad)
    out = np.zeros((len(ar), 2), dtype=int)
    out[order] = per_batch[np.arange(len(ar)) // batch_size]
    return out


def image_stats(model, dataset, index, shape, conf_thres, iou_thres, max_det):
    """val.py's per-image statistics (correct, conf, class, label classes) with the image letterboxed to shape."""
    dataset.batch_shapes, dataset.batch = np.array([shape]), np.zeros(dataset.n, dtype=int)
    img, targets, _, shapes = dataset[index]
    im = preprocess(np.ascontiguousarray(img), "cpu")
    with no_grad():
        pred = model(im)[0]
    pred = to_numpy(non_max_suppression(pred, conf_thres, iou_thres, multi_label=True, max_det=max_det)[0])
    pred = pred.astype(np.float32)
    h, w = im.shape[2:]
    labels = labels_in_pixels(targets, (h, w))[:, 1:]
    correct = match_image(pred, labels, (h, w), shapes[0], shapes[1], IOU_THRESHOLDS)[0]
    return correct, pred[:, 4], pred[:, 5], labels[:, 0]


def figures(per_image):
    """P, R, mAP50, mAP50-95 from a list of per-image statistics, as val.py computes them."""
    stats = [np.concatenate(x, 0) for x in zip(*per_image)]
    _, _, p, r, _, ap, _ = ap_per_class(*stats)
    return np.array([p.mean(), r.mean(), ap[:, 0].mean(), ap.mean(1).mean()])


def run(images, weights, batch_size=32, img_size=640, orders=1000, seed=0, conf_thres=0.001, iou_thres=0.6,
        max_det=300, ref=None, tol=0.005, device="cpu"):
    from models.experimental import attempt_load
    dataset = LoadImagesAndLabels(str(images), img_size, batch_size, rect=False, stride=32, pad=0.5)
    dataset.rect = True  # built unsorted (file order); image_stats sets the letterbox shape of each image itself
    model = attempt_load(weights, device=device, fuse=True).eval()
    stride = int(max(model.stride))
    ar = dataset.shapes[:, 1] / dataset.shapes[:, 0]
    rng = np.random.default_rng(seed)
    named = {"stable (this project)": np.argsort(ar, kind="stable"), "numpy quicksort (ultralytics)": ar.argsort()}
    randoms = [np.lexsort((rng.random(len(ar)), ar)) for _ in range(orders)]
    per_order = [batch_shapes_per_image(ar, o, batch_size, img_size, stride, 0.5) for o in (*named.values(), *randoms)]
    cache = {}  # (image, shape) -> statistics: only ~1.4 shapes per image occur over all orders
    for shapes in per_order:
        for i, shape in enumerate(shapes):
            key = (i, tuple(shape))
            if key not in cache:
                cache[key] = image_stats(model, dataset, i, shape, conf_thres, iou_thres, max_det)
    results = [figures([cache[(i, tuple(s))] for i, s in enumerate(shapes)]) for shapes in per_order]
    report = {"images": len(ar), "batch_size": batch_size, "image_shape_pairs": len(cache),
              "named": {k: dict(zip(FIGURES, map(float, v))) for k, v in zip(named, results)}, "random": {}}
    r = np.array(results[len(named):])
    for k, name in enumerate(FIGURES):
        if not len(r):
            break
        row = {"min": r[:, k].min(), "p5": np.percentile(r[:, k], 5), "median": np.median(r[:, k]),
               "p95": np.percentile(r[:, k], 95), "max": r[:, k].max()}
        if ref is not None:
            row["within_tol_of_ref"] = float(np.mean(np.abs(r[:, k] - ref[k]) <= tol))
        report["random"][name] = {key: float(v) for key, v in row.items()}
    if ref is not None and len(r):
        report["random"]["all_within_tol_of_ref"] = float(np.mean((np.abs(r - np.asarray(ref)) <= tol).all(1)))
    return report


def print_report(report, ref, tol):
    print(f"{report['images']} images, batch {report['batch_size']}, {report['image_shape_pairs']} image/shape pairs")
    print(("%-32s" + "%10s" * 4) % ("order", *FIGURES))
    for name, v in report["named"].items():
        print(("%-32s" + "%10.3f" * 4) % (name, *v.values()))
    if ref is not None:
        print(("%-32s" + "%10.3f" * 4) % ("reference", *ref))
    for name, v in report["random"].items():
        if name == "all_within_tol_of_ref":
            print(f"random tie orders with all four within {tol} of the reference: {v:.1%}")
            continue
        share = f", within {tol} of the reference in {v['within_tol_of_ref']:.1%}" if "within_tol_of_ref" in v else ""
        print(f"{name:>9}: random tie orders give {v['min']:.3f}..{v['max']:.3f} "
              f"(5-95% {v['p5']:.3f}..{v['p95']:.3f}, median {v['median']:.3f}){share}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", default=str(SHARED / "data" / "coco128" / "images" / "train2017"))
    ap.add_argument("--weights", default=str(SHARED / "weights" / "yolov5n.pt"))
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--imgsz", "--img", type=int, default=640)
    ap.add_argument("--orders", type=int, default=1000, help="random tie orders to evaluate")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ref", type=float, nargs=4, default=[0.634, 0.480, 0.544, 0.350],
                    help="P R mAP50 mAP50-95 to compare with (default: ultralytics at batch 32, REFERENCE.md)")
    ap.add_argument("--tol", type=float, default=0.005)
    ap.add_argument("--json", help="also write the report here")
    opt = ap.parse_args(argv)
    report = run(opt.images, opt.weights, opt.batch_size, opt.imgsz, opt.orders, opt.seed, ref=opt.ref, tol=opt.tol)
    print_report(report, opt.ref, opt.tol)
    if opt.json:
        Path(opt.json).write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
