"""Writes tests/data/exif_official.npz: what the official ultralytics/yolov5 loader makes of JPEGs carrying EXIF
orientations 1-8 (tests/helpers/exif_images.py), for tests/test_data/test_data_exif.py to compare this project's
loader with.

Run it with the official code's environment (it imports ultralytics' utils.dataloaders, and nothing of this project
but tests/helpers/exif_images.py):
    cd ../yolov5-official && .venv/bin/python /path/to/project/tests/data/make_exif_official.py
Stored per case and image: the labels the item carries, a 16x16 thumbnail of its image (INTER_AREA; enough to see a
rotation, mirror or squeeze, small enough to keep in git), the letterbox shapes and, for --rect, the file order and
batch shapes.
"""
import random
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "helpers"))  # tests/helpers/: exif_images
sys.path.insert(0, str(Path.cwd()))  # the official repository (run from its root)
from exif_images import write_exif_dataset  # noqa: E402
from utils.dataloaders import LoadImagesAndLabels  # noqa: E402  (the official one)

IMG = 64
THUMB = 16


def hyp(**kw):
    with open(Path.cwd() / "data" / "hyps" / "hyp.scratch-low.yaml") as f:
        h = yaml.safe_load(f)
    h.update(hsv_h=0.0, hsv_s=0.0, hsv_v=0.0, **kw)  # colours stay as drawn: no LUT-vs-transform rounding
    return h


CASES = {  # name: LoadImagesAndLabels keyword arguments (the official loader at 5081342f has no 9-image mosaic)
    "letterbox": dict(augment=False),
    "rect": dict(augment=False, rect=True, pad=0.5),
    "rect_augment": dict(augment=True, rect=True, hyp=hyp(degrees=5.0)),
    "mosaic": dict(augment=True, hyp=hyp()),
    "mosaic_perspective": dict(augment=True, hyp=hyp(perspective=0.0005)),
}


def thumb(im_hwc):
    return cv2.resize(np.ascontiguousarray(im_hwc), (THUMB, THUMB), interpolation=cv2.INTER_AREA)


def main():
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        images = write_exif_dataset(tmp)
        for name, kw in CASES.items():
            ds = LoadImagesAndLabels(str(images), IMG, batch_size=4, **kw)
            labels, thumbs, shapes = [], [], []
            for i in range(len(ds)):
                random.seed(i)
                np.random.seed(i)
                im, lb, path, sh = ds[i]
                thumbs.append(thumb(im.numpy().transpose(1, 2, 0)))  # RGB
                labels.append(lb.numpy()[:, 1:].astype(np.float64))  # [cls, xywhn]
                shapes.append(np.nan * np.zeros(6) if sh is None else
                              np.array([*sh[0], *sh[1][0], *sh[1][1]], np.float64))  # h0 w0 gh gw padw padh
            out[f"{name}/labels"] = np.concatenate(labels, 0)
            out[f"{name}/counts"] = np.array([len(x) for x in labels])
            out[f"{name}/thumbs"] = np.stack(thumbs)
            out[f"{name}/shapes"] = np.stack(shapes)
            out[f"{name}/files"] = np.array([Path(f).name for f in ds.im_files])
            if ds.rect:
                out[f"{name}/batch_shapes"] = ds.batch_shapes
    np.savez_compressed(HERE / "exif_official.npz", **out)
    print(f"wrote {HERE / 'exif_official.npz'}: {len(out)} arrays")


if __name__ == "__main__":
    main()
