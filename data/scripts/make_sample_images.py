"""Draw the sample images in data/images/ (the default --source of detect.py and the images hubconf.py runs on).

The project owns these pictures: they are drawn here from gradients and simple shapes, deterministically, so
`python detect.py` works on a fresh clone without any download and the files can be regenerated at any time:

    python data/scripts/make_sample_images.py                  # rewrites data/images/*.jpg
    python data/scripts/make_sample_images.py --out /tmp/imgs  # somewhere else

Three scenes of different sizes and aspect ratios (landscape 1280x720, portrait 810x1080, 4:3 640x480), so a
batch of them exercises letterboxing to a common shape. JPEG quality is chosen to keep each file under 100 kB.
"""
import argparse
import math
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
QUALITY = 90


def _vertical_gradient(h, w, top, bottom):
    """(h, w, 3) float32 BGR image blending colour `top` into `bottom` from the first row to the last."""
    t = np.linspace(0.0, 1.0, h, dtype=np.float32)[:, None, None]
    return np.broadcast_to((1 - t) * np.float32(top) + t * np.float32(bottom), (h, w, 3)).copy()


def _ridge(w, base, amplitude, rng, octaves=4):
    """A mountain skyline: y coordinate per column from a few random sine waves."""
    x = np.arange(w, dtype=np.float32)
    y = np.full(w, base, dtype=np.float32)
    for k in range(octaves):
        period = w / (1.5 * 2 ** k)
        y += amplitude / 2 ** k * np.sin(2 * math.pi * x / period + rng.uniform(0, 2 * math.pi))
    return y


def _fill_below(im, ys, colour):
    h, w = im.shape[:2]
    pts = np.concatenate([np.stack([np.arange(w), ys], 1), [[w - 1, h - 1], [0, h - 1]]]).astype(np.int32)
    cv2.fillPoly(im, [pts], colour, lineType=cv2.LINE_AA)


def landscape(rng, w=1280, h=720):
    """Dawn over mountains and a lake: sky gradient, sun, two ridges, fir trees, a cabin, a sailing boat."""
    im = _vertical_gradient(h, w, (170, 90, 60), (150, 200, 250))  # deep blue at the top, warm near the horizon
    horizon = int(h * 0.62)
    sun = (int(w * 0.7), int(h * 0.3))
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    glow = np.exp(-((xx - sun[0]) ** 2 + (yy - sun[1]) ** 2) / (2 * (w * 0.12) ** 2))[..., None]
    im += glow * np.float32((40, 90, 105))
    im = np.clip(im, 0, 255).astype(np.uint8)
    cv2.circle(im, sun, 46, (170, 235, 255), -1, cv2.LINE_AA)
    _fill_below(im, _ridge(w, h * 0.40, 45, rng), (140, 110, 105))  # far ridge, hazy
    _fill_below(im, _ridge(w, h * 0.52, 30, rng), (85, 95, 70))  # near ridge
    im[horizon:] = _vertical_gradient(h - horizon, w, (150, 140, 110), (95, 70, 40)).astype(np.uint8)  # lake
    for y in range(horizon + 6, h, 9):  # ripples
        x0 = int(rng.uniform(0, w * 0.8))
        cv2.line(im, (x0, y), (x0 + int(rng.uniform(60, 240)), y), (175, 170, 150), 1, cv2.LINE_AA)
    shore = horizon - 4
    for x in np.sort(rng.uniform(20, w * 0.55, 14)):  # fir trees on the left shore
        s = rng.uniform(40, 90)
        for k in range(3):
            top = shore - s * (0.45 + 0.3 * k)
            tri = np.array([[x, top], [x - s * 0.28, top + s * 0.45], [x + s * 0.28, top + s * 0.45]], np.int32)
            cv2.fillPoly(im, [tri], (40, 80, 30), cv2.LINE_AA)
        cv2.rectangle(im, (int(x - 3), int(shore - s * 0.1)), (int(x + 3), shore), (30, 50, 70), -1)
    cx = int(w * 0.8)  # a cabin on the right shore
    cv2.rectangle(im, (cx - 60, shore - 70), (cx + 60, shore), (60, 90, 150), -1)
    cv2.fillPoly(im, [np.array([[cx - 75, shore - 70], [cx, shore - 120], [cx + 75, shore - 70]], np.int32)],
                 (40, 40, 120), cv2.LINE_AA)
    cv2.rectangle(im, (cx - 15, shore - 40), (cx + 15, shore), (30, 50, 80), -1)
    cv2.rectangle(im, (cx + 25, shore - 55), (cx + 48, shore - 32), (120, 220, 245), -1)
    bx, by = int(w * 0.42), horizon + 110  # a sailing boat on the lake
    hull = np.array([[bx - 110, by], [bx + 110, by], [bx + 80, by + 38], [bx - 80, by + 38]], np.int32)
    cv2.fillPoly(im, [hull], (40, 40, 150), cv2.LINE_AA)
    cv2.line(im, (bx, by), (bx, by - 190), (40, 50, 60), 5, cv2.LINE_AA)
    cv2.fillPoly(im, [np.array([[bx + 6, by - 185], [bx + 6, by - 12], [bx + 100, by - 12]], np.int32)],
                 (235, 240, 245), cv2.LINE_AA)
    cv2.fillPoly(im, [np.array([[bx - 6, by - 160], [bx - 6, by - 12], [bx - 80, by - 12]], np.int32)],
                 (200, 215, 230), cv2.LINE_AA)
    cv2.ellipse(im, (bx, by + 42), (130, 8), 0, 0, 360, (90, 75, 55), -1, cv2.LINE_AA)  # its reflection
    return im


def still_life(rng, w=810, h=1080):
    """Geometric still life: a table edge, a bowl of fruit-like spheres, a vase, blocks, a picture on the wall."""
    im = _vertical_gradient(h, w, (200, 215, 225), (150, 170, 185)).astype(np.uint8)  # wall
    table = int(h * 0.62)
    im[table:] = _vertical_gradient(h - table, w, (60, 100, 150), (30, 55, 90)).astype(np.uint8)  # wooden table
    for y in range(table + 12, h, 23):  # wood grain
        cv2.line(im, (0, y), (w, y + int(rng.integers(-8, 9))), (45, 80, 120), 2, cv2.LINE_AA)
    cv2.rectangle(im, (90, 120), (390, 360), (70, 60, 50), 12)  # framed picture: a sunset of stripes
    for k, c in enumerate([(90, 120, 240), (80, 160, 250), (120, 200, 250), (150, 120, 90)]):
        cv2.rectangle(im, (96, 126 + k * 58), (384, 184 + k * 58), c, -1)
    cv2.circle(im, (240, 250), 30, (120, 230, 255), -1, cv2.LINE_AA)

    def sphere(c, r, colour):
        """A shaded ball: concentric discs lighter towards an upper-left highlight."""
        for k in range(12, 0, -1):
            f = k / 12
            shade = np.clip(np.float32(colour) * (0.55 + 0.45 * (1 - f)) + 60 * (1 - f), 0, 255)
            off = int((1 - f) * r * 0.35)
            cv2.circle(im, (c[0] - off, c[1] - off), int(r * f), tuple(int(v) for v in shade), -1, cv2.LINE_AA)

    bowl_c = (int(w * 0.33), table + 40)
    for x, r, colour in [(-70, 52, (40, 40, 200)), (0, 58, (40, 160, 230)), (70, 50, (50, 170, 60)),
                         (-35, 46, (30, 120, 220)), (38, 48, (40, 40, 170))]:
        sphere((bowl_c[0] + x, bowl_c[1] - 45 - (30 if abs(x) < 40 else 0)), r, colour)
    cv2.ellipse(im, bowl_c, (150, 70), 0, 0, 180, (200, 200, 205), -1, cv2.LINE_AA)  # bowl
    cv2.ellipse(im, bowl_c, (150, 18), 0, 0, 360, (170, 170, 180), -1, cv2.LINE_AA)
    vx = int(w * 0.75)  # a tall vase with a stripe
    body = np.array([[vx - 30, table - 260], [vx + 30, table - 260], [vx + 22, table - 200], [vx + 70, table - 110],
                     [vx + 55, table + 20], [vx - 55, table + 20], [vx - 70, table - 110], [vx - 22, table - 200]],
                    np.int32)
    cv2.fillPoly(im, [body], (140, 70, 30), cv2.LINE_AA)
    cv2.line(im, (vx - 66, table - 100), (vx + 66, table - 100), (80, 200, 230), 10, cv2.LINE_AA)
    for k in range(3):  # stacked blocks
        x0, y0 = 80 + k * 38, h - 150 - k * 70
        cv2.rectangle(im, (x0, y0), (x0 + 140, y0 + 70), [(60, 60, 200), (200, 120, 40), (60, 190, 230)][k], -1)
        cv2.rectangle(im, (x0, y0), (x0 + 140, y0 + 70), (40, 40, 40), 2)
    return im


def skyline(rng, w=640, h=480):
    """A city at dusk: purple-orange sky, a crescent moon, buildings with lit windows, a river with reflections."""
    im = _vertical_gradient(h, w, (90, 40, 50), (110, 140, 240)).astype(np.uint8)
    cv2.circle(im, (90, 80), 26, (210, 240, 250), -1, cv2.LINE_AA)
    cv2.circle(im, (102, 72), 24, tuple(int(v) for v in im[72, w - 1]), -1, cv2.LINE_AA)  # sky bites: crescent
    for _ in range(40):  # stars
        cv2.circle(im, (int(rng.uniform(0, w)), int(rng.uniform(0, h * 0.35))), 1, (230, 230, 255), -1)
    ground = int(h * 0.78)
    x = 0
    while x < w:
        bw, bh = int(rng.uniform(40, 90)), int(rng.uniform(90, 300))
        top = ground - bh
        shade = int(rng.uniform(35, 70))
        cv2.rectangle(im, (x, top), (x + bw, ground), (shade + 15, shade, shade - 10), -1)
        for wy in range(top + 10, ground - 12, 16):
            for wx in range(x + 6, x + bw - 10, 12):
                if rng.random() < 0.45:
                    cv2.rectangle(im, (wx, wy), (wx + 5, wy + 8), (110, 210, 250), -1)
        x += bw + int(rng.uniform(2, 10))
    river = _vertical_gradient(h - ground, w, (80, 60, 70), (50, 30, 35)).astype(np.uint8)
    reflection = cv2.flip(im[2 * ground - h:ground], 0)
    im[ground:] = cv2.addWeighted(river, 0.7, reflection, 0.3, 0)
    for y in range(ground + 4, h, 7):
        cv2.line(im, (0, y), (w, y), (60, 45, 50), 1)
    return im


SCENES = {"landscape.jpg": landscape, "still_life.jpg": still_life, "skyline.jpg": skyline}


def make_images(out=ROOT / "data" / "images", seed=0):
    """Draw every scene into out/ as JPEG; returns the written paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, (name, draw) in enumerate(SCENES.items()):
        im = draw(np.random.default_rng(seed + i))
        path = out / name
        if not cv2.imwrite(str(path), im, [cv2.IMWRITE_JPEG_QUALITY, QUALITY]):
            raise OSError(f"could not write {path}")
        paths.append(path)
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "data" / "images"), help="output folder")
    parser.add_argument("--seed", type=int, default=0)
    opt = parser.parse_args(argv)
    for p in make_images(opt.out, opt.seed):
        print(f"{p} {p.stat().st_size / 1e3:.1f} kB")


if __name__ == "__main__":
    main()
