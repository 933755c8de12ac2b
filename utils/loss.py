"""YOLOv5 training loss: ComputeLoss(model) -> (loss * batch_size, (box, obj, cls)), as the official one computes it.

Targets are matched to anchors whose width and height ratios are within hyp['anchor_t'], and each match is also
assigned to the two neighbouring grid cells nearest the target centre (offset 0.5), tripling the positives.
Box loss is 1 - CIoU, objectness is BCE against the (detached, clamped) CIoU, classes are BCE with optional label
smoothing; with fl_gamma > 0 both BCEs are wrapped in a focal loss.
"""
from utils.backend import nn, torch
from utils.iou import bbox_iou

__all__ = ["ComputeLoss", "FocalLoss", "smooth_BCE"]


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

    def forward(self, pred, true):
        loss = self.loss_fcn(pred, true)
        pred_prob = torch.sigmoid(pred)
        p_t = true * pred_prob + (1 - true) * (1 - pred_prob)
        alpha_factor = true * self.alpha + (1 - true) * (1 - self.alpha)
        loss = loss * (alpha_factor * (1.0 - p_t) ** self.gamma)
        if self.reduction == "mean":
            return loss.mean()
        if self.reduction == "sum":
            return loss.sum()
        return loss


def _balance(nl):
    """Objectness weight per level: small-object levels have many more cells, so their mean BCE is scaled up."""
    return [4.0, 1.0, 0.4] if nl == 3 else [4.0, 1.0, 0.25, 0.06, 0.02][:max(nl, 0)] + [0.02] * max(nl - 5, 0)


class ComputeLoss:
    sort_obj_iou = False  # official default; True would let the highest IoU win where targets share a cell

    def __init__(self, model, autobalance=False, fused_iou=None):
        """model: a DetectionModel (or a DDP/DP wrapper of one) with .hyp set. fused_iou: the --bbox_iou_optim flag
        (None reads model.bbox_iou_optim if present, else utils.iou's global default)."""
        device = next(model.parameters()).device
        m = model.module if hasattr(model, "module") else model  # de-parallel
        h = model.hyp if hasattr(model, "hyp") else m.hyp
        if fused_iou is None:
            fused_iou = getattr(m, "bbox_iou_optim", None)
        self.fused_iou = fused_iou

        BCEcls = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([float(h["cls_pw"])], device=device))
        BCEobj = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([float(h["obj_pw"])], device=device))
        self.cp, self.cn = smooth_BCE(eps=h.get("label_smoothing", 0.0))
        g = h.get("fl_gamma", 0.0)
        if g > 0:
            BCEcls, BCEobj = FocalLoss(BCEcls, g), FocalLoss(BCEobj, g)

        det = m.model[-1]  # Detect()
        self.balance = _balance(det.nl)
        self.ssi = [float(s) for s in det.stride].index(16.0) if autobalance else 0  # stride-16 level is the anchor
        self.BCEcls, self.BCEobj, self.gr, self.hyp, self.autobalance = BCEcls, BCEobj, 1.0, h, autobalance
        self.na, self.nc, self.nl = det.na, det.nc, det.nl
        self.anchors = det.anchors  # (nl, na, 2) in grid units of each level
        self.device = device

    def __call__(self, p, targets):
        """p: list of nl raw maps (bs, na, ny, nx, 5 + nc); targets: (n, 6) [image, class, x, y, w, h] normalised."""
        lcls = torch.zeros(1, device=self.device)
        lbox = torch.zeros(1, device=self.device)
        lobj = torch.zeros(1, device=self.device)
        tcls, tbox, indices, anchors = self.build_targets(p, targets)

        for i, pi in enumerate(p):
            b, a, gj, gi = indices[i]
            tobj = torch.zeros(tuple(pi.shape[:4]), dtype=pi.dtype, device=pi.device)
            n = b.shape[0]
            if n:
                pxy, pwh, _, pcls = pi[b, a, gj, gi].split((2, 2, 1, self.nc), 1)
                pxy = pxy.sigmoid() * 2 - 0.5  # centre offset in (-0.5, 1.5): neighbour cells can reach the target
                pwh = (pwh.sigmoid() * 2) ** 2 * anchors[i]  # size in (0, 4) anchors: matches anchor_t = 4
                pbox = torch.cat((pxy, pwh), 1)
                iou = bbox_iou(pbox, tbox[i], CIoU=True, fused=self.fused_iou).squeeze(-1)
                lbox = lbox + (1.0 - iou).mean()

                iou = iou.detach().clamp(0).to(tobj.dtype)
                if self.sort_obj_iou:
                    j = iou.argsort()
                    b, a, gj, gi, iou = b[j], a[j], gj[j], gi[j], iou[j]
                if self.gr < 1:
                    iou = (1.0 - self.gr) + self.gr * iou
                tobj[b, a, gj, gi] = iou  # objectness target is the box quality, not 1

                if self.nc > 1:  # a single class needs no class loss
                    t = torch.full_like(pcls, self.cn)
                    t[torch.arange(n, device=pcls.device), tcls[i]] = self.cp
                    lcls = lcls + self.BCEcls(pcls, t)

            obji = self.BCEobj(pi[..., 4], tobj)
            lobj = lobj + obji * self.balance[i]
            if self.autobalance:
                self.balance[i] = self.balance[i] * 0.9999 + 0.0001 / obji.detach().item()

        if self.autobalance:
            self.balance = [x / self.balance[self.ssi] for x in self.balance]
        lbox = lbox * self.hyp["box"]
        lobj = lobj * self.hyp["obj"]
        lcls = lcls * self.hyp["cls"]
        bs = tobj.shape[0]
        return (lbox + lobj + lcls) * bs, torch.cat((lbox, lobj, lcls)).detach()

    def build_targets(self, p, targets):
        """Per level: class, box (offset in cell, wh in grid units), indices (image, anchor, gy, gx), anchor wh."""
        na, nt = self.na, targets.shape[0]
        dev = targets.device
        tcls, tbox, indices, anch = [], [], [], []
        gain = torch.ones(7, device=dev)  # scales normalised xywh to grid units
        ai = torch.arange(na, device=dev).float().view(na, 1).repeat(1, nt)  # anchor index per copy
        targets = torch.cat((targets.repeat(na, 1, 1), ai[..., None]), 2)  # (na, nt, 7): img, cls, xywh, anchor

        g = 0.5  # neighbour-cell offset
        off = torch.tensor([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]], device=dev).float() * g  # self, l, t, r, b

        for i in range(self.nl):
            anchors, shape = self.anchors[i], p[i].shape
            ny, nx = int(shape[2]), int(shape[3])
            gain[2:6] = torch.tensor([nx, ny, nx, ny], dtype=torch.float32, device=dev)
            t = targets * gain
            if nt:
                r = t[..., 4:6] / anchors[:, None]  # wh ratio to each anchor
                j = torch.max(r, 1 / r).max(2)[0] < self.hyp["anchor_t"]
                t = t[j]
                # neighbours: the cell left/top if the centre lies in the left/top half, right/bottom likewise
                gxy = t[:, 2:4]
                gxi = gain[2:4] - gxy  # distance from the far edge
                j, k = ((gxy % 1 < g) & (gxy > 1)).T
                l, m = ((gxi % 1 < g) & (gxi > 1)).T
                j = torch.stack((torch.ones_like(j), j, k, l, m))
                t = t.repeat((5, 1, 1))[j]
                offsets = (torch.zeros_like(gxy)[None] + off[:, None])[j]
            else:
                t = targets[0]
                offsets = 0

            bc, gxy, gwh, a = t.split((2, 2, 2, 1), 1)
            a, (b, c) = a.long().view(-1), bc.long().T
            gij = (gxy - offsets).long()
            # clamp to the grid (a centre exactly on the far edge); the box offset below uses the clamped cell, as
            # the official code does (it clamps views of gij in place)
            gi, gj = gij[:, 0].clamp(0, nx - 1), gij[:, 1].clamp(0, ny - 1)
            gij = torch.stack((gi, gj), 1)
            indices.append((b, a, gj, gi))
            tbox.append(torch.cat((gxy - gij, gwh), 1))
            anch.append(anchors[a])
            tcls.append(c)
        return tcls, tbox, indices, anch
