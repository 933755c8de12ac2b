"""YOLOv5 training loss: ComputeLoss(model) -> (loss * batch_size, (box, obj, cls)), as the official one computes it.

Targets are matched to anchors whose width and height ratios are within hyp['anchor_t'], and each match is also
assigned to the two neighbouring grid cells nearest the target centre (offset 0.5), tripling the positives.
Box loss is 1 - CIoU, objectness is BCE against the (detached, clamped) CIoU, classes are BCE with optional label
smoothing; with fl_gamma > 0 both BCEs are wrapped in a focal loss.

Fixed shapes, no host syncs: the official code filters the candidate matches with boolean masks (each a nonzero,
so the host waits for the GPU, nine times a step) and loops over the levels. Here every candidate (level, neighbour
offset, anchor, target) is kept, with a validity mask: the shapes depend only on the number of target rows, all
levels are handled by the same few kernels, and a masked-out candidate contributes exactly nothing. Candidates keep
the official order (offset, then anchor, then target, per level), so where several write the same objectness cell
the same one wins. Target rows whose image index is negative are padding (see ``pad_targets``): a batch padded to a
fixed row count gives the same loss with fixed shapes throughout, which is what a CUDA graph or a compiled region
needs.
"""
from dataclasses import dataclass, fields

from utils.backend import F, head_reads, nn, torch
from utils.iou import ciou_function

__all__ = ["ComputeLoss", "LossHyp", "FocalLoss", "smooth_BCE", "pad_targets"]


@dataclass(frozen=True)
class LossHyp:
    """The hyperparameters the loss uses, as gains already scaled to the model (utils/engine/hyp.scale_hyp)."""
    box: float  # box loss gain
    obj: float  # objectness loss gain
    cls: float  # class loss gain
    cls_pw: float  # class BCE positive weight
    obj_pw: float  # objectness BCE positive weight
    anchor_t: float  # a target matches an anchor whose width and height ratios are below this
    fl_gamma: float = 0.0  # focal loss gamma (0: plain BCE)
    label_smoothing: float = 0.0

    @classmethod
    def from_dict(cls, hyp):
        """From a hyp dict (its other keys, augmentation and optimizer settings, are not the loss's)."""
        return cls(**{f.name: float(hyp[f.name]) for f in fields(cls) if f.name in hyp})


def smooth_BCE(eps=0.1):
    """Positive and negative BCE targets for label smoothing eps (https://arxiv.org/pdf/1902.04103.pdf eq. 3)."""
    return 1.0 - 0.5 * eps, 0.5 * eps


class FocalLoss(nn.Module):
    """Focal loss around a BCEWithLogitsLoss: BCE * alpha_t * (1 - p_t) ** gamma (https://arxiv.org/abs/1708.02002)."""

    def __init__(self, loss_fcn, gamma=1.5, alpha=0.25):
        super().__init__()
        self.loss_fcn = loss_fcn
        self.gamma = gamma
        self.alpha = alpha
        self.reduction = loss_fcn.reduction
        self.loss_fcn.reduction = "none"  # element-wise, so the factors can weight each element

    def modulation(self, true, pred_prob):
        p_t = true * pred_prob + (1 - true) * (1 - pred_prob)
        return (1.0 - p_t) ** self.gamma

    def forward(self, pred, true):
        loss = self.loss_fcn(pred, true)
        alpha_factor = true * self.alpha + (1 - true) * (1 - self.alpha)
        loss = loss * (alpha_factor * self.modulation(true, torch.sigmoid(pred)))
        if self.reduction == "mean":
            return loss.mean()
        if self.reduction == "sum":
            return loss.sum()
        return loss


class QFocalLoss(FocalLoss):
    """Quality focal loss (https://arxiv.org/abs/2006.04388): the focal weight uses |true - p| ** gamma, so soft
    targets (an IoU as objectness) are weighted by how far the prediction is from them."""

    def modulation(self, true, pred_prob):
        return torch.abs(true - pred_prob) ** self.gamma


class BCEBlurWithLogitsLoss(nn.Module):
    """BCE whose weight 1 - exp((p - y - 1) / (alpha + 1e-4)) fades for predictions well above their label (p - y
    near 1): a positive the labels missed costs less. Returns the mean."""

    def __init__(self, alpha=0.05):
        super().__init__()
        self.loss_fcn = nn.BCEWithLogitsLoss(reduction="none")
        self.alpha = alpha

    def forward(self, pred, true):
        loss = self.loss_fcn(pred, true)
        dx = torch.sigmoid(pred) - true  # missing labels only; (p - y).abs() would also soften wrong labels
        return (loss * (1 - torch.exp((dx - 1) / (self.alpha + 1e-4)))).mean()


def _balance(nl):
    """Objectness weight per level: small-object levels have many more cells, so their mean BCE is scaled up."""
    return [4.0, 1.0, 0.4] if nl == 3 else [4.0, 1.0, 0.25, 0.06, 0.02][:max(nl, 0)] + [0.02] * max(nl - 5, 0)


def pad_targets(targets, rows):
    """targets (n, 6) -> (rows, 6), the extra rows marked as padding (image index -1; ComputeLoss ignores them).
    rows must be >= n. Padding to a few fixed sizes keeps the loss's tensor shapes fixed from batch to batch."""
    n = targets.shape[0]
    if rows < n:
        raise ValueError(f"pad_targets: {n} target rows do not fit in {rows}")
    pad = torch.zeros((rows - n, targets.shape[1]), dtype=targets.dtype, device=targets.device)
    pad[:, 0] = -1.0
    return torch.cat((targets, pad), 0)


def _elementwise(loss_module, pred, true):
    """The per-element values of a BCEWithLogitsLoss or a FocalLoss around one (their 'none' reduction)."""
    if isinstance(loss_module, FocalLoss):
        loss = _elementwise(loss_module.loss_fcn, pred, true)
        pred_prob = torch.sigmoid(pred)
        p_t = true * pred_prob + (1 - true) * (1 - pred_prob)
        alpha_factor = true * loss_module.alpha + (1 - true) * (1 - loss_module.alpha)
        return loss * (alpha_factor * (1.0 - p_t) ** loss_module.gamma)
    return F.binary_cross_entropy_with_logits(pred, true, weight=loss_module.weight,
                                              pos_weight=loss_module.pos_weight, reduction="none")


class ComputeLoss:
    sort_obj_iou = False  # official default; True would let the highest IoU win where targets share a cell

    def __init__(self, model, autobalance=False, fused_iou=False, hyp=None):
        """model: a DetectionModel (or a DDP/DP wrapper of one). hyp: a LossHyp (or a hyp dict); None takes the
        model's .hyp, as the official ComputeLoss(model) does (the trainer passes its own). fused_iou: the
        --bbox_iou_optim flag. The CIoU implementation is chosen here, once."""
        device = next(model.parameters()).device
        m = model.module if hasattr(model, "module") else model  # de-parallel
        h = hyp if isinstance(hyp, LossHyp) else LossHyp.from_dict(m.hyp if hyp is None else hyp)
        self.fused_iou = bool(fused_iou)
        self.ciou = ciou_function(device, self.fused_iou)  # fused kernel or plain maths, for this device

        BCEcls = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([h.cls_pw], device=device))
        BCEobj = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([h.obj_pw], device=device))
        self.cp, self.cn = smooth_BCE(eps=h.label_smoothing)
        g = h.fl_gamma
        if g > 0:
            BCEcls, BCEobj = FocalLoss(BCEcls, g), FocalLoss(BCEobj, g)

        det = m.model[-1]  # Detect()
        self.balance = _balance(det.nl)
        self.ssi = [float(s) for s in det.stride].index(16.0) if autobalance else 0  # stride-16 level is the anchor
        self.BCEcls, self.BCEobj, self.gr, self.hyp, self.autobalance = BCEcls, BCEobj, 1.0, h, autobalance
        self.na, self.nc, self.nl = det.na, det.nc, det.nl
        self.anchors = det.anchors  # (nl, na, 2) in grid units of each level
        self.device = device
        # constants made once on the device: a tensor made from host data in every step is a blocking copy on a GPU
        g = 0.5  # neighbour-cell offset
        self._offsets = torch.tensor([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]], dtype=torch.float32,
                                     device=device).view(1, 5, 1, 1, 2) * g  # self, left, top, right, bottom
        self._one = torch.ones((), device=device)
        self._class_ids = torch.arange(self.nc, device=device)
        self._anchor_ids = torch.arange(self.na, device=device).view(1, 1, self.na, 1)
        self._grids = {}  # level shapes -> per-level grid sizes and flat-index bases, on the device

    # ------------------------------------------------------------------------------------------------ the loss
    def __call__(self, p, targets):
        """p: list of nl raw maps (bs, na, ny, nx, 5 + nc); targets: (n, 6) [image, class, x, y, w, h] normalised
        (rows with a negative image index are padding). Under autocast the maps may be fp16/bf16: the loss itself
        is computed in fp32 (bf16 keeps only 8 bits of mantissa, too coarse for box offsets and IoUs)."""
        *_, sizes, bases = self._grid(p)
        tobj = torch.zeros(bases[-1] + 1, dtype=torch.float32, device=p[0].device)  # all levels + one spare element
        if targets.shape[0]:  # a host-side shape, not a value: no sync
            cand = self._candidates(p, targets)
            objs, rows = zip(*(head_reads(pi, idx.reshape(-1)) for pi, idx in zip(p, cand["gather"])))
            lbox, lcls = self._matched_losses(rows, cand, tobj)
        else:  # no targets: box and class losses are 0 (and OneFlow's kernels dislike zero-size candidates)
            objs = [pi.float()[..., 4] for pi in p]
            lbox, lcls = torch.zeros(1, device=self.device), torch.zeros(1, device=self.device)
        lobj = torch.zeros(1, device=self.device)
        for i, obj_logits in enumerate(objs):
            obji = self.BCEobj(obj_logits, tobj[bases[i]:bases[i] + sizes[i]].view(obj_logits.shape))
            lobj = lobj + obji * self.balance[i]
            if self.autobalance:
                self.balance[i] = self.balance[i] * 0.9999 + 0.0001 / obji.detach().item()
        if self.autobalance:
            self.balance = [x / self.balance[self.ssi] for x in self.balance]
        lbox = lbox * self.hyp.box
        lobj = lobj * self.hyp.obj
        lcls = lcls * self.hyp.cls
        bs = p[0].shape[0]
        return (lbox + lobj + lcls) * bs, torch.cat((lbox, lobj, lcls)).detach()

    def _matched_losses(self, rows, cand, tobj):
        """Box and class losses (each (1,)) of all candidate matches at once, from rows (per level, the fp32
        prediction at every candidate's cell; invalid candidates read cell 0: harmless); writes the objectness
        targets into the flat buffer tobj."""
        nl, na, nc = self.nl, self.na, self.nc
        valid, invalid = cand["valid"], cand["invalid"]  # (nl, 5, na, nt)
        count = valid.sum((1, 2, 3)).clamp(min=1).to(torch.float32)  # matches per level (1 where none: sums are 0)
        ps = torch.stack(rows)
        ps = ps.view(nl, 5, na, -1, ps.shape[-1])
        pxy = ps[..., 0:2].sigmoid() * 2 - 0.5  # centre offset in (-0.5, 1.5): neighbour cells can reach the target
        pwh = (ps[..., 2:4].sigmoid() * 2) ** 2 * cand["anchors"]  # size in (0, 4) anchors: matches anchor_t = 4
        pbox = torch.cat((pxy, pwh), -1)
        iou = self.ciou(pbox.reshape(-1, 4), cand["tbox"].reshape(-1, 4)).view(valid.shape)
        lbox = ((1.0 - iou).masked_fill(invalid, 0.0).sum((1, 2, 3)) / count).sum().view(1)

        # objectness target: the box quality at each matched cell (invalid candidates write to the spare last
        # element, so the official order, in which the last write to a cell wins, is kept)
        score = iou.detach().clamp(0).to(tobj.dtype)
        slot = cand["slot"]
        if self.sort_obj_iou:  # lowest first within each level, so the highest IoU is written last
            order = torch.where(valid, score, score - 2.0).reshape(nl, -1).argsort(1)
            score, slot = score.reshape(nl, -1).gather(1, order), slot.reshape(nl, -1).gather(1, order)
        if self.gr < 1:
            score = (1.0 - self.gr) + self.gr * score
        tobj[slot.reshape(-1)] = score.reshape(-1)

        if nc == 1:  # a single class needs no class loss
            return lbox, torch.zeros(1, device=self.device)
        t = torch.where(cand["tcls"][..., None] == self._class_ids, self.cp, self.cn).to(ps.dtype)
        bce = _elementwise(self.BCEcls, ps[..., 5:5 + nc], t.expand(ps.shape[:-1] + (nc,)))  # (mask columns follow)
        lcls = (bce.masked_fill(invalid[..., None], 0.0).sum((1, 2, 3, 4)) / (count * nc)).sum().view(1)
        return lbox, lcls

    # ------------------------------------------------------------------------------------------------ targets
    def _grid(self, p):
        """Per level, made once per set of level shapes: grid size [nx, ny] as floats, the last cell [nx-1, ny-1]
        and [ny, nx] as longs (each (nl, 1, 1, 1, 2)), the level's start in the flat objectness buffer
        (nl, 1, 1, 1); and on the host each level's size and the buffer's level starts (plus its end)."""
        key = tuple(tuple(int(d) for d in pi.shape[:4]) for pi in p)
        if key not in self._grids:
            wh = [[s[3], s[2]] for s in key]
            sizes = [s[0] * s[1] * s[2] * s[3] for s in key]
            bases = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
            dev = p[0].device
            self._grids[key] = (torch.tensor(wh, dtype=torch.float32, device=dev).view(-1, 1, 1, 1, 2),
                                torch.tensor(wh, device=dev).view(-1, 1, 1, 1, 2) - 1,
                                torch.tensor([[s[2], s[3]] for s in key], device=dev).view(-1, 1, 1, 1, 2),
                                torch.tensor(bases[:-1], device=dev).view(-1, 1, 1, 1), sizes, bases)
        return self._grids[key]

    def _candidates(self, p, targets):
        """Every candidate match (level, neighbour offset, anchor, target) in fixed-shape tensors:
        valid (nl, 5, na, nt) bool; tbox (nl, 5, na, nt, 4) centre offset from the cell and size, in grid units;
        anchors (nl, 1, na, 1, 2); tcls, b, a, gj, gi; gather (per level: flat index of the cell in that level's
        map, 0 where invalid); slot (flat index in all levels' objectness buffer, its spare last element where
        invalid)."""
        grid_wh, grid_max, grid_hw, base, sizes, bases = self._grid(p)
        nt = targets.shape[0]
        na, nl = self.na, self.nl
        targets = targets.to(torch.float32)
        b = targets[:, 0].long()  # (nt,)
        c = targets[:, 1].long()
        gxy = targets[:, 2:4] * grid_wh  # (nl, 1, 1, nt, 2) grid units
        gwh = targets[:, 4:6] * grid_wh
        anchors = self.anchors.to(torch.float32).view(nl, 1, na, 1, 2)
        r = gwh / anchors  # wh ratio to each anchor (nl, 1, na, nt, 2)
        match = torch.max(r, 1 / r).max(-1)[0] < self.hyp.anchor_t  # (nl, 1, na, nt)
        # neighbours: the cell left/top if the centre lies in the left/top half, right/bottom likewise
        g = 0.5
        gxi = grid_wh - gxy  # distance from the far edge
        near = (gxy % 1 < g) & (gxy > 1)  # left, top
        far = (gxi % 1 < g) & (gxi > 1)  # right, bottom
        use = torch.cat((torch.ones_like(near[..., :1]), near, far), -1)  # (nl, 1, 1, nt, 5)
        valid = match & use.squeeze(1).permute(0, 3, 1, 2) & (targets[:, 0] >= 0)  # (nl, 5, na, nt)
        gij = (gxy - self._offsets).long()  # (nl, 5, 1, nt, 2)
        # clamp to the grid (a centre exactly on the far edge); the box offset uses the clamped cell, as the
        # official code does (it clamps views of gij in place)
        gij = torch.minimum(gij.clamp(min=0), grid_max)
        size = torch.where(targets[:, 4:6] > 0, gwh, self._one)  # degenerate sizes only where invalid: no NaN
        xy = gxy - gij  # (nl, 5, 1, nt, 2)
        tbox = torch.cat((xy, size.expand(xy.shape)), -1).expand(nl, 5, na, nt, 4)
        gi, gj = gij[..., 0], gij[..., 1]  # (nl, 5, 1, nt)
        a = self._anchor_ids
        ny, nx = grid_hw[..., 0], grid_hw[..., 1]  # (nl, 1, 1, 1)
        cell = ((b * na + a) * ny + gj) * nx + gi  # (nl, 5, na, nt) within a level
        invalid = ~valid
        gather = cell.masked_fill(invalid, 0)
        slot = (cell + base).masked_fill(invalid, bases[-1])
        return {"valid": valid, "invalid": invalid, "tbox": tbox, "anchors": anchors, "tcls": c.view(1, 1, 1, nt),
                "b": b, "a": a.expand(nl, 5, na, nt), "gi": gi.expand(nl, 5, na, nt), "gj": gj.expand(nl, 5, na, nt),
                "gather": gather, "slot": slot}

    def build_targets(self, p, targets):
        """The matched targets per level as the official build_targets returns them: class, box (offset in cell,
        wh in grid units), indices (image, anchor, gy, gx), anchor wh, in the official order. Filtering by the
        validity mask reads it on the host; the loss itself never calls this."""
        cand = self._candidates(p, targets)
        nl, na, nt = self.nl, self.na, targets.shape[0]
        tcls, tbox, indices, anch = [], [], [], []
        for i in range(nl):
            keep = cand["valid"][i].reshape(-1)
            b = cand["b"].view(1, 1, nt).expand(5, na, nt).reshape(-1)[keep]
            a = cand["a"][i].reshape(-1)[keep]
            indices.append((b, a, cand["gj"][i].reshape(-1)[keep], cand["gi"][i].reshape(-1)[keep]))
            tbox.append(cand["tbox"][i].reshape(-1, 4)[keep])
            anch.append(self.anchors[i][a])
            tcls.append(cand["tcls"].view(1, 1, nt).expand(5, na, nt).reshape(-1)[keep])
        return tcls, tbox, indices, anch
