"""Validate a trained YOLOv5 detection model on a detection dataset (same flags and output as ultralytics/yolov5).

Usage:
    python val.py --weights yolov5s.pt --data coco128.yaml --img 640
    python val.py --weights yolov5n.pt --task speed      # speed only
    python val.py --weights yolov5n.pt --task study      # mAP vs image size

From Python (train.py calls it each epoch with model=, dataloader=, save_dir=, plots=, compute_loss=):
    from val import run
    (mp, mr, map50, map, *losses), maps, times = run(data='coco128.yaml', weights='yolov5n.pt')
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # `python val.py` from anywhere finds models/ and utils/

from utils import signals  # noqa: E402

if __name__ == "__main__":  # before the framework import: a Ctrl-C from here on is only recorded (utils/signals.py)
    signals.install("val")

from utils.backend import inference_mode, select_device, to_numpy, torch, wait_for_work  # noqa: E402
from utils.errors import exit_on_user_error  # noqa: E402
from utils.general import (LOGGER, check_img_size, coco80_to_coco91_class, colorstr, increment_path,  # noqa: E402
                           non_max_suppression, scale_boxes, xywh2xyxy, xyxy2xywh)
from utils.metrics import ConfusionMatrix, ap_per_class, match_predictions  # noqa: E402
from utils.plots import output_to_target, plot_images  # noqa: E402

TQDM_BAR_FORMAT = "{l_bar}{bar:10}{r_bar}"


def save_one_txt(predn, save_conf, shape, file):
    """One line per detection: class x y w h [conf], normalized to the original image (YOLO label format)."""
    gn = np.array(shape, dtype=np.float64)[[1, 0, 1, 0]]
    xywh = xyxy2xywh(predn[:, :4].astype(np.float64)) / gn
    with open(file, "a") as f:
        for b, conf, cls in zip(xywh.tolist(), predn[:, 4].tolist(), predn[:, 5].tolist()):
            line = (cls, *b, conf) if save_conf else (cls, *b)
            f.write(("%g " * len(line)).rstrip() % line + "\n")


def save_one_json(predn, jdict, path, class_map):
    """COCO results entries: {image_id, category_id, bbox [x, y, w, h] top-left, score}."""
    image_id = int(path.stem) if path.stem.isnumeric() else path.stem
    box = xyxy2xywh(predn[:, :4].astype(np.float64))
    box[:, :2] -= box[:, 2:] / 2  # centre -> top-left corner
    for p, b in zip(predn.tolist(), box.tolist()):
        jdict.append({"image_id": image_id, "category_id": class_map[int(p[5])],
                      "bbox": [round(x, 3) for x in b], "score": round(p[4], 5)})


class _Timer:
    """Accumulating wall-clock timer that waits for the device first (CUDA work is asynchronous)."""

    def __init__(self, device):
        self.t, self.device = 0.0, device

    def __enter__(self):
        wait_for_work(self.device)
        self.start = time.perf_counter()
        return self

    def __exit__(self, *args):
        wait_for_work(self.device)
        self.t += time.perf_counter() - self.start


def _model_device(model):
    return next(model.parameters()).device


def _names(model):
    names = getattr(model, "names", None) or getattr(getattr(model, "module", None), "names", None)
    return dict(enumerate(names)) if isinstance(names, (list, tuple)) else dict(names or {})


def evaluate_coco_json(jdict, data, save_dir, weights, im_files, is_coco):
    """Write the predictions JSON and, with pycocotools and an annotations file, return (mAP50-95, mAP50)."""
    w = Path(weights[0] if isinstance(weights, (list, tuple)) else weights).stem if weights else ""
    pred_json = str(save_dir / f"{w}_predictions.json")
    LOGGER.info(f"\nSaving {pred_json}...")
    with open(pred_json, "w") as f:
        json.dump(jdict, f)
    anno_json = Path(data.get("path", "../coco")) / "annotations" / "instances_val2017.json"
    if not anno_json.is_file():
        LOGGER.info(f"No COCO annotations at {anno_json}: predictions saved, pycocotools evaluation skipped.")
        return None
    try:
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval
    except ImportError:
        LOGGER.info("pycocotools is not installed ('pip install pycocotools'): COCO evaluation skipped.")
        return None
    try:
        anno = COCO(str(anno_json))
        pred = anno.loadRes(pred_json)
        ev = COCOeval(anno, pred, "bbox")
        if is_coco:
            ev.params.imgIds = [int(Path(x).stem) for x in im_files]  # only the images evaluated here
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
        return ev.stats[0], ev.stats[1]
    except Exception as e:
        LOGGER.info(f"pycocotools unable to run: {e}")
        return None


@inference_mode()
def run(data=None, weights=None, batch_size=32, imgsz=640, conf_thres=0.001, iou_thres=0.6, max_det=300, task="val",
        device="", workers=8, single_cls=False, augment=False, verbose=False, save_txt=False, save_hybrid=False,
        save_conf=False, save_json=False, project=ROOT / "runs/val", name="exp", exist_ok=False, half=False,
        dnn=False, model=None, dataloader=None, save_dir=Path(""), plots=True, callbacks=None, compute_loss=None):
    """Validate; returns ((P, R, mAP50, mAP50-95, *val losses), per-class mAP50-95 array, per-image ms (pre, inf, nms))."""
    from utils.dataset_config import check_dataset
    training = model is not None
    if training:  # called by train.py
        device = _model_device(model)
        half &= "cuda" in str(device)  # half precision only on CUDA
        model.half() if half else model.float()
        if isinstance(data, (str, Path)):
            data = check_dataset(data)
    else:
        from models.experimental import attempt_load
        device = select_device(device, batch_size=batch_size)
        half &= "cuda" in str(device)
        save_dir = increment_path(Path(project) / name, exist_ok=exist_ok, mkdir=True)  # one line if unwritable
        (save_dir / "labels" if save_txt else save_dir).mkdir(parents=True, exist_ok=True)
        model = attempt_load(weights, device=device, fuse=True)
        model.half() if half else model.float()
        stride = int(max(float(model.stride.max()), 32))
        imgsz = check_img_size(imgsz, s=stride)
        data = check_dataset(data)
    model.eval()
    save_dir = Path(save_dir)
    is_coco = isinstance(data.get("val"), str) and data["val"].endswith(f"coco{os.sep}val2017.txt")
    nc = 1 if single_cls else int(data["nc"])
    iouv = np.linspace(0.5, 0.95, 10)  # IoU thresholds for mAP@0.5:0.95
    niou = len(iouv)

    if not training:
        ncm = int(model.yaml["nc"]) if getattr(model, "yaml", None) else nc
        assert ncm == nc or single_cls, (f"{weights} ({ncm} classes) trained on different --data than what you "
                                         f"passed ({nc} classes). Pass correct combination of --weights and --data.")
        from utils.dataloaders import create_dataloader
        pad, rect = (0.0, False) if task == "speed" else (0.5, True)  # square inference for benchmarks
        task = task if task in ("train", "val", "test") else "val"
        dataloader = create_dataloader(data[task], imgsz, batch_size, stride, single_cls, pad=pad, rect=rect,
                                       workers=workers, prefix=colorstr(f"{task}: "))[0]

    seen = 0
    confusion_matrix = ConfusionMatrix(nc=nc)
    names = _names(model) or dict(data.get("names", {}))
    if single_cls:
        names = {0: names.get(0, "item")}
    class_map = coco80_to_coco91_class() if is_coco else list(range(1000))
    s = ("%22s" + "%11s" * 6) % ("Class", "Images", "Instances", "P", "R", "mAP50", "mAP50-95")
    tp, fp, p, r, f1, mp, mr, map50, ap50, map = 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
    dt = _Timer(device), _Timer(device), _Timer(device)  # pre-process, inference, NMS
    loss = torch.zeros(3, device=device)
    jdict, stats, ap, ap_class = [], [], [], []
    try:
        from tqdm import tqdm
        pbar = tqdm(dataloader, desc=s, bar_format=TQDM_BAR_FORMAT)
    except ImportError:
        LOGGER.info(s)
        pbar = dataloader
    if not training:
        signals.describe_on_disk(lambda: f"no metrics were computed; {save_dir} holds what the batches so far wrote")
    for batch_i, (im, targets, paths, shapes) in enumerate(pbar):
        signals.check()  # a safe point: Ctrl-C / SIGTERM stop here, never inside the framework
        with dt[0]:
            im = im.to(device)
            targets = targets.to(device)
            im = im.half() if half else im.float()
            im /= 255
            nb, _, height, width = im.shape

        with dt[1]:
            if compute_loss:
                preds, train_out = model(im)  # eval mode: (decoded, raw maps); the loss needs the raw maps
            else:
                preds, train_out = (model(im, augment=True) if augment else model(im)), None

        if compute_loss:
            loss += compute_loss(train_out, targets)[1]  # box, obj, cls

        targets_np = to_numpy(targets).astype(np.float32)
        targets_np[:, 2:] *= np.array((width, height, width, height), np.float32)  # to pixels of the input
        lb = [targets[targets[:, 0] == i, 1:] * _pixel_gain(targets, width, height) for i in range(nb)] \
            if save_hybrid else []
        with dt[2]:
            preds = non_max_suppression(preds, conf_thres, iou_thres, labels=lb, multi_label=True,
                                        agnostic=single_cls, max_det=max_det)

        for si, pred in enumerate(preds):
            pred = to_numpy(pred).astype(np.float32)
            labels = targets_np[targets_np[:, 0] == si, 1:]
            nl, npr = labels.shape[0], pred.shape[0]
            path, shape = Path(paths[si]), shapes[si][0]
            correct = np.zeros((npr, niou), dtype=bool)
            seen += 1

            if npr == 0:
                if nl:
                    stats.append((correct, np.zeros(0), np.zeros(0), labels[:, 0]))
                    if plots:
                        confusion_matrix.process_batch(detections=None, labels=labels[:, 0])
                continue

            if single_cls:
                pred[:, 5] = 0
            correct, predn, labelsn = match_image(pred, labels, im[si].shape[1:], shape, shapes[si][1], iouv)
            if nl and plots:
                confusion_matrix.process_batch(predn, labelsn)
            stats.append((correct, pred[:, 4], pred[:, 5], labels[:, 0]))

            if save_txt:
                save_one_txt(predn, save_conf, shape, file=save_dir / "labels" / f"{path.stem}.txt")
            if save_json:
                save_one_json(predn, jdict, path, class_map)

        if plots and batch_i < 3:
            plot_images(im, targets_np, paths, save_dir / f"val_batch{batch_i}_labels.jpg", names)
            plot_images(im, output_to_target(preds, max_det=max_det), paths, save_dir / f"val_batch{batch_i}_pred.jpg",
                        names)

    # Metrics
    stats = [np.concatenate(x, 0) for x in zip(*stats)]
    if len(stats) and stats[0].any():
        tp, fp, p, r, f1, ap, ap_class = ap_per_class(*stats, plot=plots, save_dir=save_dir, names=names)
        ap50, ap = ap[:, 0], ap.mean(1)  # AP@0.5, AP@0.5:0.95
        mp, mr, map50, map = p.mean(), r.mean(), ap50.mean(), ap.mean()
    nt = np.bincount(stats[3].astype(int), minlength=nc) if len(stats) else np.zeros(nc, int)

    pf = "%22s" + "%11i" * 2 + "%11.3g" * 4
    LOGGER.info(pf % ("all", seen, nt.sum(), mp, mr, map50, map))
    if nt.sum() == 0:
        LOGGER.warning(f"WARNING: no labels found in {task} set, can not compute metrics without labels")

    if (verbose or (nc < 50 and not training)) and nc > 1 and len(stats):
        for i, c in enumerate(ap_class):
            LOGGER.info(pf % (names.get(int(c), str(c)), seen, nt[c], p[i], r[i], ap50[i], ap[i]))

    t = tuple(x.t / max(seen, 1) * 1e3 for x in dt)  # ms per image
    if not training:
        shape = (batch_size, 3, imgsz, imgsz)
        LOGGER.info(f"Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image at shape {shape}" % t)

    if plots:
        confusion_matrix.plot(save_dir=save_dir, names=list(names.values()))

    if save_json and len(jdict):
        res = evaluate_coco_json(jdict, data, save_dir, weights, getattr(dataloader.dataset, "im_files", []), is_coco)
        if res is not None:
            map, map50 = res

    model.float()
    if not training:
        s = f"\n{len(list(save_dir.glob('labels/*.txt')))} labels saved to {save_dir / 'labels'}" if save_txt else ""
        LOGGER.info(f"Results saved to {colorstr('bold', save_dir)}{s}")
    maps = np.zeros(nc) + map
    for i, c in enumerate(ap_class):
        maps[c] = ap[i]
    n_batches = max(len(dataloader), 1) if hasattr(dataloader, "__len__") else 1
    losses = (to_numpy(loss) / n_batches).tolist()
    if compute_loss and not np.isfinite(losses).all():  # results.csv would show nan with no word of why
        LOGGER.warning(f"WARNING ⚠️ validation losses are not finite (box, obj, cls = {[round(x, 4) for x in losses]}):"
                       " the model's outputs on the validation images are NaN or overflow, so this epoch's metrics "
                       "mean nothing; lower --hyp lr0 or check the labels.")
    return (mp, mr, map50, map, *losses), maps, t


def match_image(pred, labels, im_hw, shape0, ratio_pad, iouv):
    """One image's true positives: pred (n,6) [xyxy, conf, cls] and labels (m,5) [cls, xywh] in pixels of the
    letterboxed input of size im_hw are mapped back to the original image (shape0, ratio_pad from the loader) and
    matched at each IoU threshold. Returns correct (n,T) bool, predn (n,6) and labelsn (m,5) [cls, xyxy]."""
    predn = pred.copy()
    scale_boxes(im_hw, predn[:, :4], shape0, ratio_pad)
    tbox = xywh2xyxy(labels[:, 1:5])
    scale_boxes(im_hw, tbox, shape0, ratio_pad)
    labelsn = np.concatenate((labels[:, 0:1], tbox), 1)
    return match_predictions(predn, labelsn, iouv), predn, labelsn


def _pixel_gain(targets, width, height):
    """[1, w, h, w, h] multiplier taking a target row [cls, xywh normalized] to pixels (for --save-hybrid)."""
    return torch.tensor([1.0, width, height, width, height], device=targets.device, dtype=targets.dtype)


def parse_opt(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=str, default=ROOT / "data/coco128.yaml", help="dataset.yaml path")
    parser.add_argument("--weights", nargs="+", type=str, default=ROOT / "yolov5s.pt", help="model path(s)")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size")
    parser.add_argument("--imgsz", "--img", "--img-size", type=int, default=640, help="inference size (pixels)")
    parser.add_argument("--conf-thres", type=float, default=0.001, help="confidence threshold")
    parser.add_argument("--iou-thres", type=float, default=0.6, help="NMS IoU threshold")
    parser.add_argument("--max-det", type=int, default=300, help="maximum detections per image")
    parser.add_argument("--task", default="val", help="train, val, test, speed or study")
    parser.add_argument("--device", default="", help="cuda device, i.e. 0 or 0,1,2,3 or cpu")
    parser.add_argument("--workers", type=int, default=8, help="max dataloader workers (per RANK in DDP mode)")
    parser.add_argument("--single-cls", action="store_true", help="treat as single-class dataset")
    parser.add_argument("--augment", action="store_true", help="augmented inference")
    parser.add_argument("--verbose", action="store_true", help="report mAP by class")
    parser.add_argument("--save-txt", action="store_true", help="save results to *.txt")
    parser.add_argument("--save-hybrid", action="store_true", help="save label+prediction hybrid results to *.txt")
    parser.add_argument("--save-conf", action="store_true", help="save confidences in --save-txt labels")
    parser.add_argument("--save-json", action="store_true", help="save a COCO-JSON results file")
    parser.add_argument("--project", default=ROOT / "runs/val", help="save to project/name")
    parser.add_argument("--name", default="exp", help="save to project/name")
    parser.add_argument("--exist-ok", action="store_true", help="existing project/name ok, do not increment")
    parser.add_argument("--half", action="store_true", help="use FP16 half-precision inference")
    parser.add_argument("--dnn", action="store_true", help="accepted for compatibility; ignored")
    opt = parser.parse_args(argv)
    opt.save_json |= str(opt.data).endswith("coco.yaml")
    opt.save_txt |= opt.save_hybrid
    return opt


def main(opt):
    weights = opt.weights if isinstance(opt.weights, list) else [opt.weights]
    if opt.task in ("train", "val", "test"):
        if opt.conf_thres > 0.001:
            LOGGER.info(f"WARNING: confidence threshold {opt.conf_thres} > 0.001 produces invalid results")
        if opt.save_hybrid:
            LOGGER.info("WARNING: --save-hybrid will return high mAP from hybrid labels, not from predictions alone")
        return run(**vars(opt))
    opt.half = "cuda" in str(select_device(opt.device))  # FP16 for fastest results on GPU
    if opt.task == "speed":  # speed benchmarks: square batches, realistic thresholds, no plots
        opt.conf_thres, opt.iou_thres, opt.save_json = 0.25, 0.45, False
        for opt.weights in weights:
            run(**vars(opt), plots=False)
    elif opt.task == "study":  # mAP and speed against image size, one study_*.txt per model
        x = list(range(256, 1536 + 128, 128))
        for opt.weights in weights:
            f = f"study_{Path(opt.data).stem}_{Path(opt.weights).stem}.txt"
            y = []
            for opt.imgsz in x:
                LOGGER.info(f"\nRunning {f} --imgsz {opt.imgsz}...")
                r, _, t = run(**vars(opt), plots=False)
                y.append(r + t)
            np.savetxt(f, y, fmt="%10.4g")
            LOGGER.info(f"Study results saved to {f}")
    else:
        raise ValueError(f"--task {opt.task} is not one of train, val, test, speed, study")


if __name__ == "__main__":
    with exit_on_user_error("val"):
        main(parse_opt())
