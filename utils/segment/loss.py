"""The segmentation loss: detection's box, objectness and class losses (utils/loss.ComputeLoss) plus the mask loss
over the prototypes, equal to the official one (ultralytics/yolov5 utils/segment/loss.py).

Mask loss, as official: for each matched prediction, the mask logits coefs @ protos of its image are compared
with the target's mask by per-pixel BCE, zeroed outside the target box (in prototype pixels), averaged over the
prototype map and divided by the box's normalized area; per level the official code averages these over the
matches of each image and sums the images; the sum over levels is scaled by the box gain / batch size.

Fixed shapes, no host syncs, no per-image loop: like the detection loss every candidate (level, neighbour cell,
anchor, target) is computed with a weight (0 where invalid). The per-image mean is a weighted sum, each match
weighted by one over its image's match count at that level (counted with a one-hot product, on the device). The
mask logits of all candidates are one batched product per target, (candidates per target, nm) @ (nm, h*w) with the
target's own image's protos (on the CPU a cache-sized chunk of targets at a time; the chunks depend only on the
number of target rows); memory is candidates x targets x h x w floats. Of detection's five neighbour offsets
at most three cells can carry a match (see _three_slots), so a target has 27 candidate rows with 3 levels and 3
anchors, not 45; and the BCE is never materialised (see _mask_loss).
"""
from utils.backend import F, torch
from utils.loss import ComputeLoss as DetectionLoss


class SegmentationLoss(DetectionLoss):
    """ComputeLoss(model, overlap=...)((maps, protos), targets, masks) -> (loss * batch size, (box, seg, obj, cls)).

    masks: the loader's masks, (bs, h, w) overlap images (pixel value i + 1 = the image's i-th target) or
    (n_targets, h, w) per-target masks; resized (nearest) to the prototype size when they differ."""

    def __init__(self, model, autobalance=False, overlap=False, fused_iou=None, hyp=None):
        super().__init__(model, autobalance=autobalance, fused_iou=fused_iou, hyp=hyp)
        m = model.module if hasattr(model, "module") else model
        self.nm = m.model[-1].nm
        self.overlap = overlap

    def __call__(self, preds, targets, masks):
        p, proto = preds
        p = [pi.float() for pi in p]
        proto = proto.float()
        loss, (lbox, lobj, lcls) = super().__call__(p, targets)
        bs = proto.shape[0]
        if targets.shape[0]:
            lseg = self._mask_loss(p, proto, targets, masks)
        else:
            lseg = torch.zeros(1, device=self.device)
        lseg = lseg * (self.hyp.box / bs)
        return loss + lseg * bs, torch.cat((lbox.view(1), lseg, lobj.view(1), lcls.view(1))).detach()

    def _target_masks(self, targets, masks, mh, mw, bs):
        """(nt, mh*mw) float 0/1 mask of each target row."""
        masks = masks.float()
        if tuple(masks.shape[-2:]) != (mh, mw):
            masks = F.interpolate(masks[None], (mh, mw), mode="nearest")[0]
        nt = targets.shape[0]
        b = targets[:, 0].long()
        if self.overlap:
            # each target's 1-based position among its image's targets (the loader keeps them grouped in order)
            onehot = (b.view(-1, 1) == torch.arange(bs, device=b.device).view(1, -1)).float()  # (nt, bs)
            index = (onehot.cumsum(0) * onehot).sum(1)  # (nt,)
            per_image = masks.index_select(0, b.clamp(0, bs - 1))  # (nt, mh, mw)
            gt = (per_image == index.view(-1, 1, 1)).float()
        else:
            rows = torch.arange(nt, device=b.device).clamp(max=max(masks.shape[0] - 1, 0))
            gt = masks.index_select(0, rows)
        return gt.view(nt, -1)

    chunk_bytes = 24 << 20  # CPU: one chunk's logits; with its prototype copy it stays near the last-level cache

    def _targets_per_chunk(self, proto, k, nt):
        """Targets whose mask logits are made at once. On a CUDA device all of them (one launch per operation); on
        the CPU chunks of about chunk_bytes of logits, so that each chunk's prototype copy, logits and softplus are
        reused while cached: the loss's forward and backward took 25-35% less time on coco128-seg batches at 320 px
        (about 36 targets a chunk) than in one piece."""
        if proto.device.type == "cuda":
            return max(nt, 1)
        return max(1, min(nt, self.chunk_bytes // max(1, k * proto.shape[2] * proto.shape[3] * 4)))

    @staticmethod
    def _three_slots(cand):
        """The candidates that can carry a mask loss, as three slots per (level, anchor, target) instead of five:
        (cells (nl, 3, na, nt) flat indices into each level's map, weights (nl, 3, na, nt) float).

        A target's centre takes the left neighbour when its x fraction is below 0.5 and the right one when it is
        above (likewise top/bottom), never both, except at an exact integer coordinate: there both are taken and
        the right (bottom) cell is floor(x + 0.5) = x, the target's own cell, with the same prediction and target,
        so the same mask loss. Slot 0 is the own cell, weighted by how many candidates land there; slot 1 the
        horizontal neighbour taken, slot 2 the vertical one. The weighted sum over 3 slots equals the sum over the
        5 offsets, and the mask work (the dearest part of the loss) falls from 45 to 27 rows per target."""
        valid, cell = cand["valid"], cand["gather"]  # (nl, 5, na, nt); offsets: own, left, top, right, bottom
        left, top, right, bottom = valid[:, 1], valid[:, 2], valid[:, 3], valid[:, 4]
        own = valid[:, 0].float() + (left & right).float() + (top & bottom).float()
        cells = torch.stack((cell[:, 0], torch.where(left, cell[:, 1], cell[:, 3]),
                             torch.where(top, cell[:, 2], cell[:, 4])), 1)
        weights = torch.stack((own, (left | right).float(), (top | bottom).float()), 1)
        return cells, weights

    def _mask_loss(self, p, proto, targets, masks):
        nl, na, nc, nm = self.nl, self.na, self.nc, self.nm
        bs, _, mh, mw = proto.shape
        nt = targets.shape[0]
        cells, weights = self._three_slots(self._candidates(p, targets))  # (nl, 3, na, nt) each
        # the mask coefficients at every slot's cell: (nl, 3, na, nt, nm) -> (nt, K, nm), K = nl * 3 * na
        coefs = torch.stack([pi.reshape(-1, pi.shape[-1]).index_select(0, idx.reshape(-1))[:, 5 + nc:5 + nc + nm]
                             for pi, idx in zip(p, cells)])
        coefs = coefs.view(nl * 3 * na, nt, nm).transpose(0, 1)
        b = targets[:, 0].long().clamp(0, bs - 1)  # padding rows (image -1) have weight 0 anyway
        gt = self._target_masks(targets, masks, mh, mw, bs)  # (nt, h*w)
        # the target box in prototype pixels (x1 <= x < x2, y1 <= y < y2), and its normalized area
        xywh = targets[:, 2:6].float()
        x1y1, x2y2 = xywh[:, :2] - xywh[:, 2:] / 2, xywh[:, :2] + xywh[:, 2:] / 2
        x1, x2 = x1y1[:, 0] * mw, x2y2[:, 0] * mw
        y1, y2 = x1y1[:, 1] * mh, x2y2[:, 1] * mh
        cols = torch.arange(mw, dtype=xywh.dtype, device=xywh.device).view(1, 1, mw)
        rows = torch.arange(mh, dtype=xywh.dtype, device=xywh.device).view(1, mh, 1)
        inside = ((cols >= x1.view(-1, 1, 1)) & (cols < x2.view(-1, 1, 1)) &
                  (rows >= y1.view(-1, 1, 1)) & (rows < y2.view(-1, 1, 1))).float().view(nt, -1, 1)
        # BCE with logits is softplus(x) - x * y, so its sum over the box splits into a non-linear part, which needs
        # every logit (one softplus and one matrix-vector product), and a linear one, which needs only each
        # target's protos summed over the box's mask pixels, (nt, nm), against the coefficients. The BCE tensor,
        # its expanded target and the masked product are never made, in the forward or the backward pass.
        flat = proto.view(bs, nm, mh * mw)
        weighted = gt.unsqueeze(2) * inside  # (nt, h*w, 1)
        softs, sums = [], []
        step = self._targets_per_chunk(proto, coefs.shape[1], nt)
        for s in range(0, nt, step):  # the chunks depend on the number of target rows only: fixed shapes
            e = min(s + step, nt)
            protos = flat.index_select(0, b[s:e])  # (n, nm, h*w): each target's image
            logits = torch.bmm(coefs[s:e], protos)  # (n, K, h*w)
            softs.append(torch.bmm(F.softplus(logits), inside[s:e]).view(e - s, -1))  # (n, K)
            sums.append(torch.bmm(protos, weighted[s:e]).view(e - s, 1, nm))
        soft = torch.cat(softs) if len(softs) > 1 else softs[0]
        mask_sum = torch.cat(sums) if len(sums) > 1 else sums[0]
        bce_sum = soft - (coefs * mask_sum).sum(2)  # (nt, K): the BCE summed over the box
        area = xywh[:, 2] * xywh[:, 3]
        area = torch.where(area > 0, area, torch.ones_like(area))  # degenerate boxes have weight 0 anyway
        per_match = bce_sum / (area.view(-1, 1) * (mh * mw))  # (nt, K): the official mean over the map / area
        per_match = per_match.transpose(0, 1).reshape(nl, 3 * na, nt)
        # official: per level, the mean over each image's matches, summed over the images
        w = weights.reshape(nl, 3 * na, nt)
        onehot = (targets[:, 0].long().view(-1, 1) == torch.arange(bs, device=b.device).view(1, -1)).float()
        per_image = w.sum(1) @ onehot  # (nl, bs) matches of each image at each level
        scale = 1.0 / per_image.clamp(min=1.0) @ onehot.t()  # (nl, nt): one over the target's image's count
        return (per_match * w * scale.view(nl, 1, nt)).sum().view(1)


ComputeLoss = SegmentationLoss  # ultralytics' name here: `from utils.segment.loss import ComputeLoss` is this loss
