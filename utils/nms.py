"""Non-maximum suppression. OneFlow 0.9.0's flow.nms has only a CUDA kernel and torchvision is optional, so greedy NMS
is also implemented here in numpy; the backend's nms_kernel() is used where it works."""
import time

import numpy as np

from utils.backend import from_numpy, is_cuda, nms_kernel, to_numpy, torch
from utils.boxes import xywh2xyxy
from utils.log import LOGGER

SMALL_BATCH_CELLS = 1 << 21  # IoU cells of one batched call over small groups: 8 MB per float32 temporary


def _iou_rows(a, b):
    """IoU of each box in a (..., k, 4) with each box in b (..., m, 4): (..., k, m), float32 as torchvision computes
    it (the same operations in the same order; in place where it can, since NMS spends most of its time here).
    Leading dimensions are a batch (groups padded to one size)."""
    area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
    area_b = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    w = np.minimum(a[..., :, None, 2], b[..., None, :, 2])
    w -= np.maximum(a[..., :, None, 0], b[..., None, :, 0])
    np.maximum(w, 0, out=w)
    h = np.minimum(a[..., :, None, 3], b[..., None, :, 3])
    h -= np.maximum(a[..., :, None, 1], b[..., None, :, 1])
    np.maximum(h, 0, out=h)
    w *= h  # the intersection
    union = area_a[..., :, None] + area_b[..., None, :]
    union -= w
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.divide(w, union, out=w)


def _greedy_within(over):
    """Greedy keep mask for r boxes in score order, given over (..., r, r) bool: over[i, j] for i < j means box i
    suppresses box j if i is kept. The greedy answer is the one fixed point of keep[j] = no kept i < j over j;
    iterating that map from 'all kept' settles one more link of the longest suppression chain each round (a few
    rounds in practice), so no Python loop runs per box. Leading dimensions are independent problems solved
    together."""
    over = np.triu(over, 1)
    keep = np.ones(over.shape[:-1], dtype=bool)
    for _ in range(over.shape[-1]):
        new = ~(over & keep[..., :, None]).any(-2)  # suppressed by no box still kept
        if np.array_equal(new, keep):
            break
        keep = new
    return keep


def _greedy_small_groups(b, starts, sizes, iou_thres, alive):
    """Greedy NMS of many small groups at once: each group (b[start:start + size], score order) padded at its end to
    the largest size and all solved as one batch (_greedy_within); writes the keep marks into alive. Padding comes
    after a group's boxes in score order, so it can suppress only other padding: it needs no mask, only leaving out."""
    pos = np.arange(int(sizes.max()))
    real = pos < sizes[:, None]
    idx = np.where(real, starts[:, None] + pos, starts[:, None])  # padding repeats the group's first box
    g = b[idx]
    keep = _greedy_within(_iou_rows(g, g) > iou_thres)
    alive[idx[real]] = keep[real]


def _greedy_large_group(b, s, stop, iou_thres, alive, block):
    """Greedy NMS of one group b[s:stop] in score order, in blocks: the block's still-alive rows among themselves
    (_greedy_within), then only the rows it keeps drop the later boxes of the group they overlap."""
    while s < stop:
        e = min(s + block, stop)
        rows = np.flatnonzero(alive[s:e]) + s
        if rows.size:
            br = b[rows]
            keep = _greedy_within(_iou_rows(br, br) > iou_thres)  # NaN (zero-area pairs) compares False
            alive[rows] = keep
            cols = np.flatnonzero(alive[e:stop]) + e
            if cols.size:
                alive[cols[(_iou_rows(br[keep], b[cols]) > iou_thres).any(0)]] = False
        s = e


def _greedy_nms_numpy(boxes, scores, iou_thres, groups=None, block=128):
    """Greedy NMS on xyxy boxes (n,4) with scores (n,) and optional groups (n,) (classes: boxes of different groups
    never suppress each other): indices of kept boxes, highest score first.
    Same rule as torchvision.ops.nms: a box is dropped when its IoU with a kept, higher-scoring box of its group is
    > iou_thres. The boxes are sorted by group, then score. Groups of up to `block` boxes (most groups of a
    validation at conf 0.001, a fourth of its boxes) are solved together, a few numpy calls for a set of groups of
    similar size (up to the same power of two; at most SMALL_BATCH_CELLS IoUs a call, however many classes);
    larger groups one at a time in blocks of `block` (_greedy_large_group). On coco128
    validation predictions (yolov5n, 320 px, conf 0.001, multi-label: 2155 candidates and 26 classes an image) this
    takes 22% less CPU time than blocks alone; blocks of 64 or 256 are no faster than 128."""
    n = len(boxes)
    order = np.argsort(-scores, kind="stable")
    if groups is not None:
        order = order[np.argsort(np.asarray(groups).reshape(-1)[order], kind="stable")]
        g = np.asarray(groups).reshape(-1)[order]
        starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    else:
        starts = np.zeros(1, dtype=np.int64)
    sizes = np.diff(np.r_[starts, n])
    b = boxes[order]
    alive = np.ones(n, dtype=bool)
    small = sizes <= block
    if small.any():
        rank = np.ceil(np.log2(np.maximum(sizes[small], 2))).astype(np.int64)  # sets of similar size: little padding
        for r in np.unique(rank):
            ss, sz = starts[small][rank == r], sizes[small][rank == r]
            per_call = max(1, SMALL_BATCH_CELLS >> (2 * int(r)))  # groups of up to 2**r boxes: (2**r)**2 IoUs each
            for i in range(0, len(ss), per_call):
                _greedy_small_groups(b, ss[i:i + per_call], sz[i:i + per_call], iou_thres, alive)
    for s, size in zip(starts[~small], sizes[~small]):
        _greedy_large_group(b, int(s), int(s + size), iou_thres, alive, block)
    kept = order[alive]
    return kept[np.argsort(-scores[kept], kind="stable")] if groups is not None else kept


def nms_numpy(boxes, scores, iou_thres, groups=None):
    """Greedy NMS per group (class) in numpy, all groups in one pass (_greedy_nms_numpy). Returns kept indices
    sorted by descending score, like torchvision's batched_nms."""
    boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    scores = np.asarray(scores, dtype=np.float32).reshape(-1)
    if not len(boxes):
        return np.zeros(0, dtype=np.int64)
    return _greedy_nms_numpy(boxes, scores, iou_thres, groups)


def _nms_indices(boxes, scores, classes, iou_thres, agnostic, kernel):
    """Indices (framework long tensor) of the boxes a device NMS kernel keeps, best first. Each class is shifted
    by max_wh=7680 so boxes of different classes never overlap (the official trick). In float32 the shift rounds
    coordinates of high class ids (to 1/16 px at class 79); the numpy path applies the same shift, because the
    official mAP figures include that rounding."""
    if not agnostic:
        boxes = boxes + classes[:, None] * 7680.0
    return kernel(boxes, scores, iou_thres)


def _candidates_numpy(x, conf_thres, mi, multi_label, classes, max_nms):
    """Rows (n, 5 + nc + nm) after the objectness filter -> (k, 6 + nm) [xyxy, conf, cls, masks], conf = obj * cls,
    highest confidence first when capped at max_nms."""
    scores = x[:, 5:mi] * x[:, 4:5]
    masks = x[:, mi:] * x[:, 4:5]  # official NMS scales every column after objectness by it, mask coefficients too
    box = xywh2xyxy(x[:, :4])
    if multi_label:
        i, j = np.nonzero(scores > conf_thres)
        out = np.concatenate((box[i], scores[i, j, None], j[:, None].astype(np.float32), masks[i]), 1)
    else:
        j = scores.argmax(1)
        conf = scores[np.arange(len(j)), j]
        keep = conf > conf_thres
        out = np.concatenate((box, conf[:, None], j[:, None].astype(np.float32), masks), 1)[keep]
    if classes is not None:
        out = out[np.isin(out[:, 5], np.asarray(list(classes), dtype=np.float32))]
    if len(out) > max_nms:
        out = out[np.argsort(-out[:, 4], kind="stable")[:max_nms]]
    return out.astype(np.float32, copy=False)


def _candidates_tensor(x, conf_thres, mi, multi_label, classes, max_nms):
    """The same as _candidates_numpy on framework tensors (used where a device NMS kernel exists)."""
    x = x.clone()
    x[:, 5:] *= x[:, 4:5]  # mask coefficients too, as official
    box = xywh2xyxy(x[:, :4])
    mask = x[:, mi:]
    if multi_label:
        i, j = (x[:, 5:mi] > conf_thres).nonzero(as_tuple=False).T
        x = torch.cat((box[i], x[i, j + 5].unsqueeze(1), j.unsqueeze(1).to(x.dtype), mask[i]), 1)
    else:
        conf, j = x[:, 5:mi].max(1, keepdim=True)
        x = torch.cat((box, conf, j.to(x.dtype), mask), 1)[conf.view(-1) > conf_thres]
    if classes is not None:
        x = x[(x[:, 5:6] == torch.tensor(list(classes), device=x.device, dtype=x.dtype)).any(1)]
    if x.shape[0] > max_nms:
        x = x[x[:, 4].argsort(descending=True)[:max_nms]]
    return x


def _with_label_rows(x, lb, width, on_host):
    """x with one confidence-1 row per label of lb (m, 5) [cls, x, y, w, h] appended (--save-hybrid), numpy rows when
    on_host, else framework rows on x's device."""
    v = np.zeros((len(lb), width), dtype=np.float32)
    v[:, :4] = lb[:, 1:5]
    v[:, 4] = 1.0
    v[np.arange(len(lb)), lb[:, 0].astype(np.int64) + 5] = 1.0
    if on_host:
        return np.concatenate((x, v), 0)
    return torch.cat((x, from_numpy(v).to(x.device).to(x.dtype)), 0)


def non_max_suppression(prediction, conf_thres=0.25, iou_thres=0.45, classes=None, agnostic=False, multi_label=False,
                        labels=(), max_det=300, nm=0, max_nms=30000, time_limit=None):
    """Filter raw detections (bs, n, 5 + nc + nm) [xywh, obj, cls..., masks...] into a list of bs tensors (k, 6 + nm)
    [x1, y1, x2, y2, conf, cls, masks...], conf = obj * cls.

    multi_label: one row per (box, class) pair above conf_thres (what val.py uses) instead of the best class only.
    labels: optional per-image (m, 5) [cls, x, y, w, h] pixel tensors added as confidence-1 boxes (--save-hybrid).
    max_nms: candidate cap per image before NMS (highest confidence kept). max_det: rows kept per image after NMS.
    time_limit: seconds for the whole batch; None means the official limit, 0.5 + 0.05 * batch size (an untrained
    model at conf_thres 0.001 gives tens of thousands of candidates an image, and validation must not stall on
    them); math.inf never stops. When it runs out, the images not processed yet keep empty outputs and a warning
    says how many were cut (never silently)."""
    if isinstance(prediction, (list, tuple)):  # eval-mode model output (inference, raw maps)
        prediction = prediction[0]
    assert 0 <= conf_thres <= 1 and 0 <= iou_thres <= 1, f"bad thresholds conf={conf_thres} iou={iou_thres}"
    bs = prediction.shape[0]
    nc = prediction.shape[2] - nm - 5
    mi = 5 + nc  # first mask column
    multi_label &= nc > 1
    kernel = nms_kernel(prediction.device)
    if time_limit is None:
        time_limit = 0.5 + 0.05 * bs
    output = [torch.zeros((0, 6 + nm), device=prediction.device) for _ in range(bs)]
    on_host = kernel is None and not is_cuda(prediction.device)  # numpy from the start: no framework op per image
    t0 = time.time()
    for xi in range(bs):
        x = to_numpy(prediction[xi].float()) if on_host else prediction[xi]
        x = x[x[:, 4] > conf_thres]  # objectness pre-filter: cheap and removes most anchors
        if labels is not None and len(labels) and len(labels[xi]):  # autolabelling: add ground truth as detections
            x = _with_label_rows(x, to_numpy(labels[xi]).astype(np.float32), nc + nm + 5, on_host)
        if not x.shape[0]:
            continue
        if kernel is None:  # CPU: numpy (faster than many small framework ops, same on both frameworks)
            x = _candidates_numpy(x if on_host else to_numpy(x).astype(np.float32, copy=False), conf_thres, mi,
                                  multi_label, classes, max_nms)
            if len(x):
                shift = np.float32(0 if agnostic else 7680) * x[:, 5:6]  # float32 like the framework path
                i = nms_numpy(x[:, :4] + shift, x[:, 4], iou_thres, None if agnostic else x[:, 5])[:max_det]
                output[xi] = from_numpy(x[i]).to(prediction.device)
        else:
            x = _candidates_tensor(x, conf_thres, mi, multi_label, classes, max_nms)
            if x.shape[0]:
                output[xi] = x[_nms_indices(x[:, :4], x[:, 4], x[:, 5], iou_thres, agnostic, kernel)[:max_det]]
        if time.time() - t0 > time_limit and xi < bs - 1:
            LOGGER.warning(f"WARNING: NMS time limit {time_limit:.3f}s exceeded: {bs - 1 - xi} of {bs} images in this "
                           f"batch were cut and have no detections")
            break
    return output
