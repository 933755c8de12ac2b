"""Cut an ultralytics-format dataset (detection boxes or segmentation polygons) into overlapping tiles with their
labels, for training on what sliced inference sees: data/scripts/slice_dataset.py is its command line.

    slice_dataset("data/shapes.yaml", "../datasets/shapes-tiles", size=256, overlap=0.2, min_area_ratio=0.1)

Tiles follow sliced inference's grid (utils/tiles.py, SAHI's). A label goes into a tile when the part of it inside
the tile keeps at least min_area_ratio of its area (SAHI slice_coco's min_area_ratio, 0.1 by default): a box is
clipped to the tile, a polygon cut by the tile's edges (the part inside, as one polygon). Tile images are named
<image stem>_<x1>_<y1>_<x2>_<y2><ext> (SAHI's naming); tiles without labels are kept as background unless
drop_empty. The new dataset (images/<split>/, labels/<split>/ and <name>.yaml with the same class names) is built in
a temporary folder and moved into place whole (utils/atomic_files.output_folder), so a failed run leaves nothing."""
from pathlib import Path

import numpy as np
import yaml

from utils.atomic_files import output_folder, write_image, write_text
from utils.data.files import img2label_paths, list_image_files
from utils.data.media import read_image
from utils.dataset_config import check_dataset
from utils.errors import UserError
from utils.log import LOGGER
from utils.tiles import SliceSettings, tile_grid

SPLITS = ("train", "val", "test")


class LabelLineError(UserError, ValueError):
    """A label line that is neither a box (class x y w h) nor a polygon (class x1 y1 x2 y2 x3 y3 ...)."""


def read_label_file(path):
    """A YOLO label file -> [(class, points (k, 2) normalized, is_polygon)]: a box as its 4 corners; [] when missing."""
    path = Path(path)
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        try:
            v = [float(x) for x in parts]
        except ValueError:
            raise LabelLineError(f"{path}:{n}: {line.strip()!r} is not numbers: fix or remove the line") from None
        if len(v) == 5:
            c, x, y, w, h = v
            out.append((int(c), np.array([[x - w / 2, y - h / 2], [x + w / 2, y + h / 2]]), False))
        elif len(v) >= 7 and len(v) % 2:
            out.append((int(v[0]), np.array(v[1:]).reshape(-1, 2), True))
        else:
            raise LabelLineError(f"{path}:{n}: {len(v)} values: a box has 5 (class x y w h), a polygon an odd "
                                 "count of 7 or more (class and 3+ points)")
    return out


def polygon_area(p):
    """Shoelace area of a (k, 2) polygon (0 for fewer than 3 points)."""
    if len(p) < 3:
        return 0.0
    x, y = p[:, 0], p[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2)


def clip_polygon(p, x1, y1, x2, y2):
    """The part of polygon p (k, 2) inside the rectangle, by cutting it with each edge in turn (Sutherland-Hodgman;
    a concave shape cut in two pieces stays one outline joined along the edge)."""
    def cut(points, inside, cross):
        out = []
        for i in range(len(points)):
            a, b = points[i - 1], points[i]
            if inside(b):
                if not inside(a):
                    out.append(cross(a, b))
                out.append(b)
            elif inside(a):
                out.append(cross(a, b))
        return out

    def at_x(x):
        return lambda a, b: (x, a[1] + (b[1] - a[1]) * (x - a[0]) / (b[0] - a[0]))

    def at_y(y):
        return lambda a, b: (a[0] + (b[0] - a[0]) * (y - a[1]) / (b[1] - a[1]), y)

    pts = [tuple(q) for q in np.asarray(p, np.float64)]
    for inside, cross in ((lambda q: q[0] >= x1, at_x(x1)), (lambda q: q[0] <= x2, at_x(x2)),
                          (lambda q: q[1] >= y1, at_y(y1)), (lambda q: q[1] <= y2, at_y(y2))):
        if not pts:
            break
        pts = cut(pts, inside, cross)
    return np.array(pts, np.float64).reshape(-1, 2)


def tile_labels(labels, tile, image_wh, min_area_ratio):
    """An image's labels (read_label_file's, normalized) -> the label lines of one tile [x1, y1, x2, y2] (pixels):
    each label's part inside the tile, kept when it holds >= min_area_ratio of the label's area, normalized to it."""
    w, h = image_wh
    x1, y1, x2, y2 = tile
    tw, th = x2 - x1, y2 - y1
    lines = []
    for c, pts, is_polygon in labels:
        p = pts * (w, h)
        if is_polygon:
            area = polygon_area(p)
            inside = clip_polygon(p, x1, y1, x2, y2)
            kept = polygon_area(inside)
        else:
            (bx1, by1), (bx2, by2) = p
            area = (bx2 - bx1) * (by2 - by1)
            ix1, iy1, ix2, iy2 = max(bx1, x1), max(by1, y1), min(bx2, x2), min(by2, y2)
            kept = max(ix2 - ix1, 0) * max(iy2 - iy1, 0)
        if area <= 0 or kept <= 0 or kept / area < min_area_ratio:
            continue
        if is_polygon:
            q = np.clip((inside - (x1, y1)) / (tw, th), 0, 1)
            lines.append(" ".join([str(c), *(f"{v:.6f}" for v in q.reshape(-1))]))
        else:
            cx, cy = ((ix1 + ix2) / 2 - x1) / tw, ((iy1 + iy2) / 2 - y1) / th
            lines.append(f"{c} {cx:.6f} {cy:.6f} {(ix2 - ix1) / tw:.6f} {(iy2 - iy1) / th:.6f}")
    return lines


def _slice_split(files, out, split, settings, min_area_ratio, drop_empty):
    """One split's images cut into out/images/<split> and out/labels/<split>. Returns (images, tiles, labels)."""
    n_tiles = n_labels = 0
    for f, lb_file in zip(files, img2label_paths(files)):
        im = read_image(f)
        h, w = im.shape[:2]
        labels = read_label_file(lb_file)
        for tile in tile_grid(h, w, settings).tolist():
            lines = tile_labels(labels, tile, (w, h), min_area_ratio)
            if drop_empty and not lines:
                continue
            name = f"{Path(f).stem}_{'_'.join(map(str, tile))}"
            x1, y1, x2, y2 = tile
            write_image(out / "images" / split / f"{name}{Path(f).suffix}", im[y1:y2, x1:x2])
            write_text(out / "labels" / split / f"{name}.txt", "".join(x + "\n" for x in lines))
            n_tiles, n_labels = n_tiles + 1, n_labels + len(lines)
    return len(files), n_tiles, n_labels


def slice_dataset(data, out, size=512, overlap=0.2, min_area_ratio=0.1, drop_empty=False, name=None):
    """Cut each split of data (a dataset YAML, dict or folder) into tiles of size (int or (h, w)) with the given
    overlap ratio; write the tiled dataset to out with its YAML (<name or out's name>.yaml). Returns the YAML path."""
    if not 0 <= min_area_ratio <= 1:
        raise UserError(f"--min-area-ratio {min_area_ratio} is outside [0, 1]: the share of a label's area that "
                        "must lie inside a tile for the tile to keep it")
    settings = SliceSettings.of(size, overlap)
    d = check_dataset(data, autodownload=False)
    out = Path(out)
    yaml_name = f"{name or out.name}.yaml"
    splits = {}
    with output_folder(out) as tmp:
        for split in SPLITS:
            if not d.get(split):
                continue
            files = list_image_files(d[split])
            n, t, k = _slice_split(files, tmp, split, settings, min_area_ratio, drop_empty)
            LOGGER.info(f"{split}: {n} images -> {t} tiles of {settings.size[0]}x{settings.size[1]}, {k} labels")
            splits[split] = f"images/{split}"
        doc = {"path": str(out.resolve()), **splits, "nc": int(d["nc"]),
               "names": {int(k): str(v) for k, v in dict(d["names"]).items()}}
        write_text(tmp / yaml_name, yaml.safe_dump(doc, sort_keys=False))
    return out / yaml_name
