"""JPEGs that carry each EXIF orientation tag (1-8) and all show the same kind of picture once the tag is applied.

Image k (file o{k}.jpg) is drawn upright ("displayed": 80 wide, 48 high, two objects whose place depends on k), then
stored un-applied: the pixels written are the inverse of orientation k's transform, and the tag says k. A viewer,
cv2.imread/imdecode and PIL's exif_transpose all turn it back into the displayed image, so the labels (written in
displayed coordinates, like every annotation tool does) fit it. Orientations 5-8 swap width and height on disk.

Used by tests/test_data/test_data_exif.py and by tests/data/make_exif_official.py (run in the official code's venv).
"""
from pathlib import Path

import numpy as np

DISPLAY_HW = (48, 80)
COLOURS = ((0, 0, 230), (0, 200, 0))  # class 0 red, class 1 green (BGR)

# stored pixels = INVERSE[k](displayed); applying EXIF orientation k to the stored pixels gives the displayed image
INVERSE = {
    1: lambda a: a,
    2: lambda a: a[:, ::-1],  # mirrored left-right
    3: lambda a: a[::-1, ::-1],  # rotated 180
    4: lambda a: a[::-1],  # mirrored top-bottom
    5: lambda a: a.transpose(1, 0, 2),  # transposed (mirror + rotate 270 CW)
    6: lambda a: np.rot90(a, 1),  # displayed = stored rotated 90 CW
    7: lambda a: np.rot90(a, 2).transpose(1, 0, 2),  # transverse (mirror + rotate 90 CW)
    8: lambda a: np.rot90(a, -1),  # displayed = stored rotated 270 CW
}


def displayed_image(k):
    """(BGR image as shown, label rows [cls, xc, yc, w, h] normalized) for orientation k."""
    h, w = DISPLAY_HW
    im = np.full((h, w, 3), 100, np.uint8)
    im[:, : w // 2] = 120  # a left/right shade difference: mirroring mistakes change pixels, not only boxes
    boxes = ((0, 4 + 6 * k, 6, 20, 20),  # class 0: a 20x20 square, moving right with k
             (1, 40, 28 - 2 * k % 8, 32, 12))  # class 1: a wide bar
    rows = []
    for cls, x, y, bw, bh in boxes:
        im[y:y + bh, x:x + bw] = COLOURS[cls]
        rows.append((cls, (x + bw / 2) / w, (y + bh / 2) / h, bw / w, bh / h))
    return im, rows


def write_exif_dataset(root, orientations=range(1, 9), quality=95):
    """images/o{k}.jpg with EXIF orientation k and labels/o{k}.txt under root; returns the images folder."""
    from PIL import Image
    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "labels").mkdir(parents=True, exist_ok=True)
    for k in orientations:
        im, rows = displayed_image(k)
        stored = np.ascontiguousarray(INVERSE[k](im))
        pil = Image.fromarray(stored[..., ::-1])
        exif = pil.getexif()
        exif[0x0112] = k  # Orientation
        pil.save(root / "images" / f"o{k}.jpg", quality=quality, exif=exif)
        (root / "labels" / f"o{k}.txt").write_text("".join(f"{c} {x:.6f} {y:.6f} {bw:.6f} {bh:.6f}\n"
                                                           for c, x, y, bw, bh in rows))
    return root / "images"
