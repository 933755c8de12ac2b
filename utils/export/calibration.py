"""Calibration images for int8 exports (TFLite --int8): up to 100 training images of --data, letterboxed to the export
size as validation sees them, float32 in [0, 1], NHWC (the layout of the TensorFlow graph)."""
from pathlib import Path

import numpy as np

from utils.export.prepare import ExportError


def calibration_images(data, imgsz, n=100):
    """-> float32 array (n, h, w, 3), RGB. data: a dataset YAML (its train, else val, images
    are used) or a folder of images."""
    import cv2

    from utils.augmentations import letterbox
    from utils.data.files import list_image_files
    from utils.dataset_config import check_dataset
    try:
        if Path(data).is_dir():  # a folder of images
            files = list_image_files(data)
        else:
            d = check_dataset(str(data), autodownload=False)
            files = list_image_files(d.get("train") or d["val"])
    except Exception as e:
        raise ExportError(f"--int8 calibrates on the images of --data {data}, which could not be read: "
                          f"{str(e).strip().splitlines()[0]}") from None
    h, w = imgsz
    out = []
    for f in files[:n]:
        im = cv2.imread(str(f))
        if im is None:
            continue
        im = letterbox(im, (h, w), auto=False)[0][..., ::-1]  # BGR -> RGB
        out.append(im.astype(np.float32) / 255)
    return np.stack(out)
