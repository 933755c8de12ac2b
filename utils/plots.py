"""Plots: box annotation (OpenCV), batch mosaics, label statistics, training curves.

matplotlib is imported inside the functions (Agg backend, utils/figures.py: pyplot) so that importing this module has
no side effects and costs nothing for code that never plots. utils/figures.py also holds official's plot_val_study,
imshow_cls and hist2d, offered here. seaborn is optional: without it the label correlogram is drawn with
plain matplotlib.

Every picture is written through utils/atomic_files.py (save_figure, write_image, write_atomically): under a
temporary name, renamed over the file when complete, so a full disk leaves the previous picture whole and raises
one line naming the file (the plot helpers turn that into a warning; the run goes on).
"""
import math
from pathlib import Path

import cv2
import numpy as np

from utils.atomic_files import numbered_unique_path, save_figure, write_atomically, write_image
from utils.boxes import clip_boxes, xywh2xyxy, xyxy2xywh
from utils.evolve_csv import read_evolve_csv
from utils.figures import hist2d, imshow_cls, plot_val_study, pyplot  # noqa: F401  (official import path)
from utils.log import LOGGER

# The palette of ultralytics.utils.plotting, through which the official scripts draw (yolov5 requires
# ultralytics>=8.4.118): the same class gets the same colour in both projects' pictures
_HEX = ("042AFF 0BDBEB F3F3F3 00DFB7 111F68 FF6FDD FF444F CCED00 00F344 BD00FF 00B4FF DD00BA 00FFFF 26C000 "
        "01FFB3 7D24FF 7B0068 FF1B6C FC6D2F A2FF0B").split()
# Label text on these box colours (as the BGR tuples the scripts pass) is drawn dark, on these white, as there;
# any other colour keeps the caller's text colour
_DARK_TEXT_ON = {(235, 219, 11), (243, 243, 243), (183, 223, 0), (221, 111, 255), (0, 237, 204), (68, 243, 0),
                 (255, 255, 0), (179, 255, 1), (11, 255, 162)}
_WHITE_TEXT_ON = {(255, 42, 4), (79, 68, 255), (255, 0, 189), (255, 180, 0), (186, 0, 221), (0, 192, 38),
                  (255, 36, 125), (104, 0, 123), (108, 27, 255), (47, 109, 252), (104, 31, 17)}
_DARK_TEXT = (104, 31, 17)


class Colors:
    """colors(i, bgr=False) -> an (r, g, b) tuple from a fixed 20-colour palette."""

    def __init__(self):
        self.palette = [tuple(int(h[k:k + 2], 16) for k in (0, 2, 4)) for h in _HEX]
        self.n = len(self.palette)

    def __call__(self, i, bgr=False):
        c = self.palette[int(i) % self.n]
        return (c[2], c[1], c[0]) if bgr else c


colors = Colors()


class Annotator:
    """Draw boxes and labels on a BGR or RGB uint8 image with OpenCV (in place on a contiguous copy)."""

    def __init__(self, im, line_width=None, font_size=None, font="", pil=False, example="abc"):
        assert isinstance(im, np.ndarray) and im.dtype == np.uint8, "Annotator takes a uint8 numpy image"
        self.im = np.ascontiguousarray(im)
        self.lw = line_width or max(round(sum(im.shape) / 2 * 0.003), 2)
        self.tf = max(self.lw - 1, 1)  # font thickness
        self.fs = self.lw / 3  # font scale

    def box_label(self, box, label="", color=(128, 128, 128), txt_color=(255, 255, 255)):
        p1, p2 = (int(box[0]), int(box[1])), (int(box[2]), int(box[3]))
        cv2.rectangle(self.im, p1, p2, color, thickness=self.lw, lineType=cv2.LINE_AA)
        if label:
            color = tuple(color)
            txt_color = _DARK_TEXT if color in _DARK_TEXT_ON else (255, 255, 255) if color in _WHITE_TEXT_ON \
                else txt_color
            w, h = cv2.getTextSize(label, 0, fontScale=self.fs, thickness=self.tf)[0]
            outside = p1[1] - h >= 3  # put the label above the box when there is room
            if p1[0] > self.im.shape[1] - w:  # a label past the right edge moves left, inside the image
                p1 = self.im.shape[1] - w, p1[1]
            p2 = p1[0] + w, p1[1] - h - 3 if outside else p1[1] + h + 3
            cv2.rectangle(self.im, p1, p2, color, -1, cv2.LINE_AA)
            cv2.putText(self.im, label, (p1[0], p1[1] - 2 if outside else p1[1] + h + 2), 0, self.fs, txt_color,
                        thickness=self.tf, lineType=cv2.LINE_AA)

    def rectangle(self, xy, fill=None, outline=None, width=1):
        cv2.rectangle(self.im, (int(xy[0]), int(xy[1])), (int(xy[2]), int(xy[3])), fill or outline or (255, 255, 255),
                      -1 if fill else width)

    def text(self, xy, text, txt_color=(255, 255, 255), anchor="top"):
        h = cv2.getTextSize(text, 0, fontScale=self.fs, thickness=self.tf)[0][1]
        y = int(xy[1]) + (h if anchor == "top" else 0)
        cv2.putText(self.im, text, (int(xy[0]), y), 0, self.fs, txt_color, thickness=self.tf, lineType=cv2.LINE_AA)

    def result(self):
        return self.im


def _host_array(x, as_float=False):
    """x as a numpy array. The framework is asked only for a framework tensor (whose framework is loaded already):
    a plot helper, forked before the framework's import, draws numpy arrays and never imports it."""
    if isinstance(x, np.ndarray):
        return x
    from utils.backend import to_numpy  # framework choice
    return to_numpy(x.float() if as_float and hasattr(x, "float") else x)


def feature_visualization(x, module_type, stage, n=32, save_dir=Path("runs/detect/exp")):
    """detect.py --visualize: the first n channels of one layer's output for the first image, drawn 8 a row into
    stage{stage}_{module}_features.png (dpi 300), and that image's whole output saved beside it as .npy, as
    ultralytics names and writes them. The Detect head and 1-pixel maps are skipped."""
    if "Detect" in module_type or "Segment" in module_type:
        return None
    maps = _host_array(x[0], as_float=True)
    channels, height, width = maps.shape
    if height <= 1 or width <= 1:
        return None
    f = Path(save_dir) / f"stage{stage}_{module_type.split('.')[-1]}_features.png"
    n = min(n, channels)
    plt = pyplot()
    fig, ax = plt.subplots(math.ceil(n / 8), 8, tight_layout=True)
    ax = np.atleast_1d(ax).ravel()
    plt.subplots_adjust(wspace=0.05, hspace=0.05)
    for i, a in enumerate(ax):
        if i < n:
            a.imshow(maps[i])
        a.axis("off")
    LOGGER.info(f"Saving {f}... ({n}/{channels})")
    try:
        save_figure(fig, f, dpi=300, bbox_inches="tight")
    finally:
        plt.close(fig)
    write_atomically(f.with_suffix(".npy"), lambda fh: np.save(fh, maps))
    return f


# Crops as the official detect.py, segment/predict.py and AutoShape's crop() write them, through ultralytics'
# save_one_box (yolov5 requires ultralytics>=8.4.118): a taken name gets increment_path's "-" and a number (x.jpg,
# x-2.jpg, x-3.jpg, ...), and the JPEG is quality 95 without chroma subsampling (PIL's subsampling=0, chosen there
# so that small crops keep their colour edges); OpenCV with these settings writes the same bytes as PIL.
CROP_NAME_SEP = "-"
CROP_JPEG_PARAMS = (cv2.IMWRITE_JPEG_QUALITY, 95, cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
                    cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444)


def write_crop(file, bgr, start=1):
    """Write a BGR crop as a JPEG under the first free name from number `start` on (1: file itself, 2: <stem>-2.jpg,
    ... without bound: a fixed counter made every crop past it overwrite one old file), whole or not at all ->
    (path, its number). A failed write raises OutputWriteError naming the file and leaves no empty name behind."""
    # suffix first: x.png's crop must not take x.jpg
    f, n = numbered_unique_path(Path(file).with_suffix(".jpg"), start=start, sep=CROP_NAME_SEP)
    try:
        write_image(f, bgr, CROP_JPEG_PARAMS)
    except BaseException:
        try:
            f.unlink()  # the empty file that reserved the name, ours alone
        except OSError:
            pass
        raise
    return f, n


def save_one_box(xyxy, im, file=Path("im.jpg"), gain=1.02, pad=10, square=False, BGR=False, save=True):
    """Crop a (slightly enlarged) xyxy box out of im; with save, write it as write_crop does (a JPEG under a name no
    file has yet) and return it."""
    xyxy = np.asarray([float(v) for v in xyxy], np.float32).reshape(-1, 4)
    b = xyxy2xywh(xyxy)
    if square:
        b[:, 2:] = b[:, 2:].max(1, keepdims=True)
    b[:, 2:] = b[:, 2:] * gain + pad
    xyxy = xywh2xyxy(b)
    clip_boxes(xyxy, im.shape[:2])
    x1, y1, x2, y2 = xyxy[0].astype(int)
    crop = im[y1:y2, x1:x2, ::(1 if BGR else -1)]
    if save:
        write_crop(file, crop if BGR else crop[..., ::-1])
    return crop


def output_to_target(output, max_det=300):
    """NMS output list of (n,6) [xyxy, conf, cls] -> (N,7) numpy [batch_id, cls, x, y, w, h, conf] for plot_images."""
    targets = []
    for i, o in enumerate(output):
        o = _host_array(o[:max_det])[:, :6]
        box, conf, cls = o[:, :4], o[:, 4:5], o[:, 5:6]
        j = np.full((len(o), 1), i, dtype=np.float32)
        targets.append(np.concatenate((j, cls, xyxy2xywh(box), conf), 1))
    return np.concatenate(targets, 0) if targets else np.zeros((0, 7), np.float32)


def images_as_drawn(images, max_subplots=16):
    """The first max_subplots images of a batch (B,3,H,W) tensor/array (uint8 pixels, or floats 0-255 or 0-1) as the
    uint8 pixels plot_images draws: what to hand a drawing process (a quarter of the float batch's bytes)."""
    images = _host_array(images[:max_subplots], as_float=True)
    if images.dtype == np.uint8:
        return images
    images = images.astype(np.float32)
    if images.size and images.max() <= 1:
        images = images * 255
    return images.clip(0, 255).astype(np.uint8)


def plot_images(images, targets, paths=None, fname="images.jpg", names=None, max_size=1920, max_subplots=16):
    """Mosaic of a batch with its boxes. images (B,3,H,W) tensor/array (0-255 or 0-1); targets (N,6) labels
    [img, cls, xywh (normalized or pixels)] or (N,7) predictions with conf as the last column."""
    images = images_as_drawn(images, max_subplots)
    targets = _host_array(targets)
    bs, _, h, w = images.shape
    bs = min(bs, max_subplots)
    ns = int(np.ceil(bs ** 0.5))  # grid side
    mosaic = np.full((int(ns * h), int(ns * w), 3), 255, dtype=np.uint8)
    for i in range(bs):
        x, y = int(w * (i // ns)), int(h * (i % ns))
        mosaic[y:y + h, x:x + w] = images[i].transpose(1, 2, 0)
    scale = max_size / ns / max(h, w)
    if scale < 1:
        h, w = math.ceil(scale * h), math.ceil(scale * w)
        mosaic = cv2.resize(mosaic, (int(ns * w), int(ns * h)))
    fs = int((h + w) * ns * 0.01)
    annotator = Annotator(mosaic, line_width=max(round(fs / 10), 1))
    for i in range(bs):
        x, y = int(w * (i // ns)), int(h * (i % ns))
        annotator.rectangle([x, y, x + w, y + h], None, (255, 255, 255), width=2)
        if paths is not None and i < len(paths):
            annotator.text((x + 5, y + 5), Path(paths[i]).name[:40], txt_color=(220, 220, 220))
        ti = targets[targets[:, 0] == i]
        if not len(ti):
            continue
        boxes = xywh2xyxy(ti[:, 2:6]).T
        classes = ti[:, 1].astype(int)
        is_label = ti.shape[1] == 6
        conf = None if is_label else ti[:, 6]
        if boxes.shape[1]:
            if boxes.max() <= 1.01:  # normalized coordinates
                boxes[[0, 2]] *= w
                boxes[[1, 3]] *= h
            elif scale < 1:
                boxes *= scale
        boxes[[0, 2]] += x
        boxes[[1, 3]] += y
        for j, box in enumerate(boxes.T.tolist()):
            c = classes[j]
            if is_label or conf[j] > 0.25:  # only confident predictions are worth drawing
                name = names[c] if names is not None and c in (names if isinstance(names, dict) else range(len(names))) \
                    else str(c)
                label = name if is_label else f"{name} {conf[j]:.1f}"
                annotator.box_label(box, label, color=colors(c))
    out = annotator.result()
    write_image(fname, out[..., ::-1])  # mosaic is RGB
    return out


def plot_labels(labels, names=(), save_dir=Path("")):
    """labels.jpg (class histogram, box centres and sizes, all boxes overlaid) and labels_correlogram.jpg.
    labels: (n,5) [cls, x, y, w, h] normalized."""
    plt = pyplot()
    save_dir = Path(save_dir)
    labels = np.asarray(labels, dtype=np.float64).reshape(-1, 5)
    c, b = labels[:, 0].astype(int), labels[:, 1:].T
    nc = int(c.max() + 1) if len(c) else max(len(names), 1)
    cols = ["x", "y", "width", "height"]

    # Correlogram: histograms on the diagonal, 2-D histograms off it (seaborn's pairplot when available).
    fig, axes = plt.subplots(4, 4, figsize=(8, 8), tight_layout=True)
    for r in range(4):
        for k in range(4):
            ax = axes[r, k]
            if r == k:
                ax.hist(b[r], bins=50, color="#1f77b4")
            elif len(c):
                ax.hist2d(b[k], b[r], bins=50, cmap="Blues", cmin=1)
            ax.set_xlabel(cols[k] if r == 3 else "")
            ax.set_ylabel(cols[r] if k == 0 else "")
    try:
        save_figure(fig, save_dir / "labels_correlogram.jpg", dpi=200)
    finally:
        plt.close(fig)

    fig, ax = plt.subplots(2, 2, figsize=(8, 8), tight_layout=True)
    ax = ax.ravel()
    counts = np.bincount(c, minlength=nc)
    bars = ax[0].bar(range(nc), counts, width=0.8)
    for i, bar in enumerate(bars):
        bar.set_color([v / 255 for v in colors(i)])
    ax[0].set_ylabel("instances")
    names = names if isinstance(names, dict) else dict(enumerate(names))
    if 0 < len(names) < 30:
        ax[0].set_xticks(range(len(names)), list(names.values()), rotation=90, fontsize=10)
    else:
        ax[0].set_xlabel("classes")
    # Boxes drawn centred, to compare their shapes.
    canvas = np.full((1000, 1000, 3), 255, dtype=np.uint8)
    boxes = labels[:1000, 1:].copy()
    boxes[:, :2] = 0.5
    boxes = xywh2xyxy(boxes) * 1000
    for cls, box in zip(c[:1000], boxes):
        cv2.rectangle(canvas, (int(box[0]), int(box[1])), (int(box[2]), int(box[3])), colors(cls), 1)
    ax[1].imshow(canvas)
    ax[1].axis("off")
    ax[2].hist2d(b[0], b[1], bins=50, cmap="Blues", cmin=1) if len(c) else None
    ax[2].set_xlabel("x")
    ax[2].set_ylabel("y")
    ax[3].hist2d(b[2], b[3], bins=50, cmap="Blues", cmin=1) if len(c) else None
    ax[3].set_xlabel("width")
    ax[3].set_ylabel("height")
    for a in (0, 2, 3):
        for s in ("top", "right"):
            ax[a].spines[s].set_visible(False)
    try:
        save_figure(fig, save_dir / "labels.jpg", dpi=200)
    finally:
        plt.close(fig)


# results.png panels: the results.csv columns drawn, losses on top and metrics below (ultralytics' order); the
# segmentation columns (box, seg, obj, cls losses; box (B) and mask (M) metrics) get 16 panels, as official
_RESULT_PANELS = {False: ((2, 5), [1, 2, 3, 4, 5, 8, 9, 10, 6, 7]),
                  True: ((2, 8), [1, 2, 3, 4, 5, 6, 9, 10, 13, 14, 15, 16, 7, 8, 11, 12])}


def plot_results(file="path/to/results.csv", dir="", best=True):
    """results.csv (train.py's or segment/train.py's columns) -> results.png: each column against the epoch. A
    segment/train.py one is drawn as official plot_results_with_masks: a red star on the best epoch (by
    0.1 mAP50 + 0.9 mAP50-95 of boxes plus masks; with best=False the last one), its value under each title.
    Returns the panel titles."""
    import pandas as pd  # heavy (0.6 s), needed by this plot only: kept off every start-up
    plt = pyplot()
    save_dir = Path(file).parent if file else Path(dir)
    files = list(save_dir.glob("results*.csv"))
    assert len(files), f"No results.csv files found in {save_dir.resolve()}, nothing to plot."
    masks = any("(M)" in c for c in open(files[0]).readline().split(","))  # a segment/train.py results.csv
    grid, panels = _RESULT_PANELS[masks]
    fig, ax = plt.subplots(*grid, figsize=(18 if masks else 12, 6), tight_layout=True)
    ax = ax.ravel()
    for f in files:
        try:
            data = pd.read_csv(f)
            s = [x.strip() for x in data.columns]
            x = data.values[:, 0]
            if masks:  # box mAP50, mAP50-95, mask mAP50, mAP50-95 are columns 7, 8, 11, 12
                k = int(np.argmax(data.values[:, [7, 8, 11, 12]].astype(float) @ [0.1, 0.9, 0.1, 0.9])) if best \
                    else len(x) - 1
            for i, j in enumerate(panels):
                if j >= data.shape[1]:
                    continue
                y = data.values[:, j].astype("float")
                if masks:
                    ax[i].plot(x, y, marker=".", label=f.stem, linewidth=2, markersize=2)
                    ax[i].scatter(x[k], y[k], color="r", label=f"best:{k}" if best else "last", marker="*",
                                  linewidth=3)
                    ax[i].set_title(s[j] + f"\n{round(y[k], 5)}")
                    continue
                ax[i].plot(x, y, marker=".", label=f.stem, linewidth=2, markersize=8)
                if len(y) > 2:  # a smoothed trend, as ultralytics draws it
                    from scipy.ndimage import gaussian_filter1d  # heavy (0.6 s), this plot only
                    ax[i].plot(x, gaussian_filter1d(y, sigma=3), ":", label="smooth", linewidth=2)
                ax[i].set_title(s[j], fontsize=12)
        except Exception as e:
            LOGGER.info(f"Warning: Plotting error for {f}: {e}")
    ax[1].legend()
    titles = [a.get_title() for a in ax]
    try:
        save_figure(fig, save_dir / "results.png", dpi=200)
    finally:
        plt.close(fig)
    return titles


def _cell_density(x, y, n=20):
    """log of how many points share each point's cell of an n x n grid over (x, y): plot_evolve's dot colours."""
    def cell(v):
        span = v.max() - v.min()
        return np.zeros(len(v), int) if span == 0 else np.minimum(((v - v.min()) / span * n).astype(int), n - 1)
    cx, cy = cell(x), cell(y)
    counts = np.zeros((n, n))
    np.add.at(counts, (cx, cy), 1)
    return np.log(counts[cx, cy])


def plot_evolve(evolve_csv="path/to/evolve.csv", fitness=None, n_results=7):
    """evolve.csv -> evolve.png beside it, as official: one panel per hyperparameter (the columns after the
    n_results result columns), each generation's value against its fitness, the best generation marked and named
    in the title. fitness: rows -> fitness (default detection's, 0.1 mAP50 + 0.9 mAP50-95 of columns 2 and 3).
    Returns the best row's hyperparameters."""
    evolve_csv = Path(evolve_csv)
    keys, x = read_evolve_csv(evolve_csv)  # cut or NaN rows skipped with a warning, as --evolve reads it
    f = np.asarray(fitness(x) if fitness else x[:, 2] * 0.1 + x[:, 3] * 0.9, np.float64)
    j = int(np.argmax(f))
    plt = pyplot()
    fig = plt.figure(figsize=(10, 12), tight_layout=True)
    LOGGER.info(f"Best results from row {j} of {evolve_csv}:")
    genes = keys[n_results:]
    for i, k in enumerate(genes[:30]):  # a 6 x 5 grid, as official
        v = x[:, n_results + i]
        ax = fig.add_subplot(6, 5, i + 1)
        ax.scatter(v, f, c=_cell_density(v, f), cmap="viridis", alpha=0.8, edgecolors="none")
        ax.plot(v[j], f.max(), "k+", markersize=15)
        ax.set_title(f"{k} = {v[j]:.3g}", fontdict={"size": 9})
        if i % 5 != 0:
            ax.set_yticks([])
        LOGGER.info(f"{k:>15}: {v[j]:.3g}")
    out = evolve_csv.with_suffix(".png")
    try:
        save_figure(fig, out, dpi=200)
    finally:
        plt.close(fig)
    LOGGER.info(f"Saved {out}")
    return {k: float(x[j, n_results + i]) for i, k in enumerate(genes)}
