"""Mosaic augmentation with ultralytics semantics (the same random draws in the same order, so the same labels).

ultralytics resizes each of the 4 tiles, pastes it into a 2x (1280^2) canvas and then warps the whole canvas. The
fused path here PLANS the mosaic from the cached image sizes before anything is decoded, composes each tile's
placement with the random affine into ONE matrix, and warps each tile once, straight into its part of the 640^2
output: tiles that end up outside are never read, and an image that will be shrunk >= 2x is decoded at 1/2, 1/4 or
1/8 resolution by libjpeg. With perspective > 0 or copy-paste the canvas path runs (ultralytics' formulation).
"""
import math
import random

import numpy as np

from utils.augmentations import (box_candidates, copy_paste, random_affine_matrix, random_perspective,
                                 transform_boxes, transform_segments, warp_into)
from utils.boxes import xyn2xy, xywhn2xyxy


class MosaicMixin:
    """load_mosaic and load_mosaic9 for LoadImagesAndLabels (uses its labels, segments, shapes, indices, hyp,
    img_size, mosaic_border, resized_shape, load_image and source_image)."""

    fused_mosaic = True  # False: always the canvas path (benchmarks/classic_loader.py, the reference)

    def _mosaic_layout(self, indices, s, xc, yc):
        """ultralytics' 4-tile placement in the 2s x 2s canvas: per tile (index, (h, w), canvas rect a, tile rect b)."""
        out = []
        for k, index in enumerate(indices):
            h, w = self.resized_shape(index)
            if k == 0:  # top left
                x1a, y1a, x2a, y2a = max(xc - w, 0), max(yc - h, 0), xc, yc
                x1b, y1b, x2b, y2b = w - (x2a - x1a), h - (y2a - y1a), w, h
            elif k == 1:  # top right
                x1a, y1a, x2a, y2a = xc, max(yc - h, 0), min(xc + w, s * 2), yc
                x1b, y1b, x2b, y2b = 0, h - (y2a - y1a), min(w, x2a - x1a), h
            elif k == 2:  # bottom left
                x1a, y1a, x2a, y2a = max(xc - w, 0), yc, xc, min(s * 2, yc + h)
                x1b, y1b, x2b, y2b = w - (x2a - x1a), 0, w, min(y2a - y1a, h)
            else:  # bottom right
                x1a, y1a, x2a, y2a = xc, yc, min(xc + w, s * 2), min(s * 2, yc + h)
                x1b, y1b, x2b, y2b = 0, 0, min(w, x2a - x1a), min(y2a - y1a, h)
            out.append((index, (h, w), (x1a, y1a, x2a, y2a), (x1b, y1b, x2b, y2b)))
        return out

    def _mosaic_labels(self, layout):
        labels4, segments4 = [], []
        for index, (h, w), (x1a, y1a, _, _), (x1b, y1b, _, _) in layout:
            padw, padh = x1a - x1b, y1a - y1b
            labels, segments = self.labels[index].copy(), [x.copy() for x in self.segments[index]]
            if labels.size:
                labels[:, 1:] = xywhn2xyxy(labels[:, 1:], w, h, padw, padh)
                segments = [xyn2xy(x, w, h, padw, padh) for x in segments]
            labels4.append(labels)
            segments4.extend(segments)
        labels4 = np.concatenate(labels4, 0)
        for x in (labels4[:, 1:], *segments4):
            np.clip(x, 0, 2 * self.img_size, out=x)
        return labels4, segments4

    def load_mosaic(self, index):
        """4-mosaic + random affine: (image s x s BGR, labels (n, 5) [cls, xyxy pixels])."""
        hyp, s = self.hyp, self.img_size
        yc, xc = (int(random.uniform(-x, 2 * s + x)) for x in self.mosaic_border)  # mosaic center x, y
        indices = [index] + random.choices(self.indices, k=3)
        random.shuffle(indices)
        layout = self._mosaic_layout(indices, s, xc, yc)
        labels4, segments4 = self._mosaic_labels(layout)
        use_copy_paste = hyp.get("copy_paste", 0.0) and len(segments4)
        if not self.fused_mosaic or hyp.get("perspective", 0.0) or use_copy_paste:
            return self._mosaic_canvas(layout, labels4, segments4)

        # Same draws as random_perspective on the 2s canvas with border -s/2: output s x s
        M, scale = random_affine_matrix((2 * s, 2 * s), (s, s), degrees=hyp["degrees"], translate=hyp["translate"],
                                        scale=hyp["scale"], shear=hyp["shear"], perspective=0.0)
        out = np.full((s, s, 3), 114, dtype=np.uint8)
        sv = np.linalg.svd(M[:2, :2], compute_uv=False).max()  # the largest stretch of the affine
        for index, (h, w), (x1a, y1a, x2a, y2a), (x1b, y1b, x2b, y2b) in layout:
            # Skip tiles whose canvas rect lands entirely outside the output (never decoded)
            rect = np.array([[x1a, y1a, 1], [x2a, y1a, 1], [x1a, y2a, 1], [x2a, y2a, 1]], dtype=np.float64) @ M[:2].T
            if rect[:, 0].max() <= 0 or rect[:, 1].max() <= 0 or rect[:, 0].min() >= s or rect[:, 1].min() >= s:
                continue
            w0, h0 = self.shapes[index]
            src = self.source_image(index, sv * w / w0)
            hs, ws = src.shape[:2]
            fx, fy = ws / w, hs / h  # decoded pixels per resized pixel
            # the tile's visible part in decoded-image pixels (integer crop; sub-pixel slack is invisible)
            cx1, cy1 = int(math.floor(x1b * fx)), int(math.floor(y1b * fy))
            cx2, cy2 = min(int(math.ceil(x2b * fx)), ws), min(int(math.ceil(y2b * fy)), hs)
            crop = src[cy1:cy2, cx1:cx2]
            # decoded crop pixel -> canvas: x = (u + cx1) / fx + (x1a - x1b); canvas -> output: M
            A = np.array([[1 / fx, 0, cx1 / fx + x1a - x1b], [0, 1 / fy, cy1 / fy + y1a - y1b], [0, 0, 1]])
            self.warp_tile(out, crop, (M @ A)[:2])

        n = len(labels4)
        if n:  # boxes exactly as random_perspective makes them (from the polygons when every box has one)
            use_segments = len(segments4) == n and any(x.any() for x in segments4)
            if use_segments:
                new, _ = transform_segments(segments4, M, (s, s))
            else:
                new = transform_boxes(labels4[:, 1:5].astype(np.float64), M, (s, s))
            i = box_candidates(box1=labels4[:, 1:5].T * scale, box2=new.T, area_thr=0.01 if use_segments else 0.10)
            labels4 = labels4[i]
            labels4[:, 1:5] = new[i]
        return out, labels4

    def warp_tile(self, out, crop, A):
        """One tile of the fused mosaic into the output (a method so that profiling can time it as a stage)."""
        return warp_into(out, crop, A)

    def _mosaic_canvas(self, layout, labels4, segments4):
        """ultralytics' path: paste resized tiles into a 2s canvas, copy-paste, then random_perspective."""
        s = self.img_size
        img4 = np.full((s * 2, s * 2, 3), 114, dtype=np.uint8)
        for index, _, (x1a, y1a, x2a, y2a), (x1b, y1b, x2b, y2b) in layout:
            im = self.load_image(index)[0]
            img4[y1a:y2a, x1a:x2a] = im[y1b:y2b, x1b:x2b]
        img4, labels4, segments4 = copy_paste(img4, labels4, segments4, p=self.hyp.get("copy_paste", 0.0))
        return self.canvas_perspective(img4, labels4, segments4)

    def canvas_perspective(self, im, labels, segments):
        """random_perspective of a 2s (or 3s) canvas down to the s x s output, with the hyp's ranges."""
        hyp = self.hyp
        return random_perspective(im, labels, segments, degrees=hyp["degrees"], translate=hyp["translate"],
                                  scale=hyp["scale"], shear=hyp["shear"], perspective=hyp["perspective"],
                                  border=self.mosaic_border)

    def load_mosaic9(self, index):
        """ultralytics' 9-image mosaic (optional; same placement rules), then random_perspective."""
        s = self.img_size
        indices = [index] + random.choices(self.indices, k=8)
        random.shuffle(indices)
        hp, wp = -1, -1
        labels9, segments9 = [], []
        img9 = np.full((s * 3, s * 3, 3), 114, dtype=np.uint8)
        for i, index in enumerate(indices):
            img, _, (h, w) = self.load_image(index)
            if i == 0:  # center
                h0, w0 = h, w
                c = s, s, s + w, s + h
            elif i == 1:  # top
                c = s, s - h, s + w, s
            elif i == 2:  # top right
                c = s + wp, s - h, s + wp + w, s
            elif i == 3:  # right
                c = s + w0, s, s + w0 + w, s + h
            elif i == 4:  # bottom right
                c = s + w0, s + hp, s + w0 + w, s + hp + h
            elif i == 5:  # bottom
                c = s + w0 - w, s + h0, s + w0, s + h0 + h
            elif i == 6:  # bottom left
                c = s + w0 - wp - w, s + h0, s + w0 - wp, s + h0 + h
            elif i == 7:  # left
                c = s - w, s + h0 - h, s, s + h0
            else:  # top left
                c = s - w, s + h0 - hp - h, s, s + h0 - hp
            padx, pady = c[:2]
            x1, y1, x2, y2 = (max(x, 0) for x in c)
            labels, segments = self.labels[index].copy(), [x.copy() for x in self.segments[index]]
            if labels.size:
                labels[:, 1:] = xywhn2xyxy(labels[:, 1:], w, h, padx, pady)
                segments = [xyn2xy(x, w, h, padx, pady) for x in segments]
            labels9.append(labels)
            segments9.extend(segments)
            img9[y1:y2, x1:x2] = img[y1 - pady:, x1 - padx:]
            hp, wp = h, w
        yc, xc = (int(random.uniform(0, s)) for _ in self.mosaic_border)
        img9 = img9[yc:yc + 2 * s, xc:xc + 2 * s]
        labels9 = np.concatenate(labels9, 0)
        labels9[:, [1, 3]] -= xc
        labels9[:, [2, 4]] -= yc
        c = np.array([xc, yc])
        segments9 = [x - c for x in segments9]
        for x in (labels9[:, 1:], *segments9):
            np.clip(x, 0, 2 * s, out=x)
        img9, labels9, segments9 = copy_paste(img9, labels9, segments9, p=self.hyp.get("copy_paste", 0.0))
        return self.canvas_perspective(img9, labels9, segments9)
