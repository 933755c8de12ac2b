"""Fused CIoU for PyTorch on CUDA: one Triton kernel forward, one backward, with its own autograd.Function.

Part of the PyTorch backend, imported only by torch_ciou.load_triton_ciou (this module imports triton at the top;
triton is optional).
The backward is the hand derivative of the plain ultralytics formula with autograd's conventions, so the gradients
equal the unfused ones: alpha is a constant, min/max split the gradient in half on ties, clamp(0) passes it at 0,
xyxy heights are clamped to eps. atan is computed with Cephes' single-precision reduction and polynomial (error
~1e-7), which needs no libdevice and therefore also runs under TRITON_INTERPRET=1 on the CPU for tests.
"""
import math

import torch
import triton
import triton.language as tl

_K = 4.0 / math.pi ** 2
BLOCK = 512


@triton.jit
def _atan(x):
    ax = tl.abs(x)
    big = ax > 2.414213562373095  # tan(3 pi / 8)
    mid = ax > 0.4142135623730950  # tan(pi / 8)
    safe = tl.where(big, ax, 1.0)
    r = tl.where(big, -1.0 / safe, tl.where(mid, (ax - 1.0) / (ax + 1.0), ax))
    base = tl.where(big, 1.5707963267948966, tl.where(mid, 0.7853981633974483, 0.0))
    z = r * r
    p = (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1) * z * r + r
    y = base + p
    return tl.where(x < 0, -y, y)


@triton.jit
def _load(b_ptr, offs, mask, XYWH: tl.constexpr, eps):
    """-> x1, x2, y1, y2 (corners), w, h, and the raw height before the xyxy clamp (for its gradient mask)."""
    p = b_ptr + offs * 4
    a0 = tl.load(p + 0, mask=mask, other=0.0).to(tl.float32)
    a1 = tl.load(p + 1, mask=mask, other=0.0).to(tl.float32)
    a2 = tl.load(p + 2, mask=mask, other=1.0).to(tl.float32)
    a3 = tl.load(p + 3, mask=mask, other=1.0).to(tl.float32)
    if XYWH:
        x1 = a0 - a2 / 2
        x2 = a0 + a2 / 2
        y1 = a1 - a3 / 2
        y2 = a1 + a3 / 2
        w = a2
        h = a3
        hr = a3
    else:
        x1 = a0
        y1 = a1
        x2 = a2
        y2 = a3
        w = a2 - a0
        hr = a3 - a1
        h = tl.maximum(hr, eps)
    return x1, x2, y1, y2, w, h, hr


@triton.jit
def _ciou_fwd(b1_ptr, b2_ptr, out_ptr, n, eps, K: tl.constexpr, XYWH: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    ax1, ax2, ay1, ay2, w1, h1, hr1 = _load(b1_ptr, offs, mask, XYWH, eps)
    bx1, bx2, by1, by2, w2, h2, hr2 = _load(b2_ptr, offs, mask, XYWH, eps)
    iw = tl.maximum(tl.minimum(ax2, bx2) - tl.maximum(ax1, bx1), 0.0)
    ih = tl.maximum(tl.minimum(ay2, by2) - tl.maximum(ay1, by1), 0.0)
    inter = iw * ih
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = tl.maximum(ax2, bx2) - tl.minimum(ax1, bx1)
    ch = tl.maximum(ay2, by2) - tl.minimum(ay1, by1)
    c2 = cw * cw + ch * ch + eps
    dx = bx1 + bx2 - ax1 - ax2
    dy = by1 + by2 - ay1 - ay2
    rho2 = (dx * dx + dy * dy) / 4
    a = _atan(w2 / h2) - _atan(w1 / h1)
    v = K * a * a
    alpha = v / (v - iou + (1 + eps))
    tl.store(out_ptr + offs, iou - (rho2 / c2 + v * alpha), mask=mask)


@triton.jit
def _min_grad(a, b, g):
    """Gradient of min(a, b) to (a, b): to the smaller one, half each on a tie (autograd's convention)."""
    ga = tl.where(a < b, g, tl.where(a == b, g * 0.5, 0.0))
    return ga, g - ga


@triton.jit
def _max_grad(a, b, g):
    ga = tl.where(a > b, g, tl.where(a == b, g * 0.5, 0.0))
    return ga, g - ga


@triton.jit
def _ciou_bwd(b1_ptr, b2_ptr, g_ptr, g1_ptr, g2_ptr, n, eps, K: tl.constexpr, XYWH: tl.constexpr,
              BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    ax1, ax2, ay1, ay2, w1, h1, hr1 = _load(b1_ptr, offs, mask, XYWH, eps)
    bx1, bx2, by1, by2, w2, h2, hr2 = _load(b2_ptr, offs, mask, XYWH, eps)
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    # forward again (cheaper than saving ~10 intermediates)
    iwr = tl.minimum(ax2, bx2) - tl.maximum(ax1, bx1)
    ihr = tl.minimum(ay2, by2) - tl.maximum(ay1, by1)
    iw = tl.maximum(iwr, 0.0)
    ih = tl.maximum(ihr, 0.0)
    inter = iw * ih
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = tl.maximum(ax2, bx2) - tl.minimum(ax1, bx1)
    ch = tl.maximum(ay2, by2) - tl.minimum(ay1, by1)
    c2 = cw * cw + ch * ch + eps
    dx = bx1 + bx2 - ax1 - ax2
    dy = by1 + by2 - ay1 - ay2
    rho2 = (dx * dx + dy * dy) / 4
    r1 = w1 / h1
    r2 = w2 / h2
    a = _atan(r2) - _atan(r1)
    v = K * a * a
    alpha = v / (v - iou + (1 + eps))  # a constant for the gradient
    # ciou = iou - rho2 / c2 - alpha * v
    g_rho2 = -g / c2
    g_c2 = g * rho2 / (c2 * c2)
    g_a = -g * alpha * K * 2 * a
    g_union = -g * inter / (union * union)
    g_inter = g / union - g_union
    # sizes (union and aspect terms)
    g_w1 = g_union * h1 - g_a / (1 + r1 * r1) / h1
    g_h1 = g_union * w1 + g_a / (1 + r1 * r1) * r1 / h1
    g_w2 = g_union * h2 + g_a / (1 + r2 * r2) / h2
    g_h2 = g_union * w2 - g_a / (1 + r2 * r2) * r2 / h2
    # intersection: clamp(0) passes the gradient where the raw value is >= 0
    g_iw = tl.where(iwr >= 0, g_inter * ih, 0.0)
    g_ih = tl.where(ihr >= 0, g_inter * iw, 0.0)
    g_ax2, g_bx2 = _min_grad(ax2, bx2, g_iw)
    g_ax1, g_bx1 = _max_grad(ax1, bx1, -g_iw)
    g_ay2, g_by2 = _min_grad(ay2, by2, g_ih)
    g_ay1, g_by1 = _max_grad(ay1, by1, -g_ih)
    # enclosing box
    g_cw = g_c2 * 2 * cw
    g_ch = g_c2 * 2 * ch
    t_a, t_b = _max_grad(ax2, bx2, g_cw)
    g_ax2 += t_a
    g_bx2 += t_b
    t_a, t_b = _min_grad(ax1, bx1, -g_cw)
    g_ax1 += t_a
    g_bx1 += t_b
    t_a, t_b = _max_grad(ay2, by2, g_ch)
    g_ay2 += t_a
    g_by2 += t_b
    t_a, t_b = _min_grad(ay1, by1, -g_ch)
    g_ay1 += t_a
    g_by1 += t_b
    # centre distance
    g_dx = g_rho2 * dx / 2
    g_dy = g_rho2 * dy / 2
    g_bx1 += g_dx
    g_bx2 += g_dx
    g_ax1 -= g_dx
    g_ax2 -= g_dx
    g_by1 += g_dy
    g_by2 += g_dy
    g_ay1 -= g_dy
    g_ay2 -= g_dy
    if XYWH:  # corners and sizes -> (x, y, w, h)
        o0 = g_ax1 + g_ax2
        o1 = g_ay1 + g_ay2
        o2 = g_w1 + (g_ax2 - g_ax1) / 2
        o3 = g_h1 + (g_ay2 - g_ay1) / 2
        p0 = g_bx1 + g_bx2
        p1 = g_by1 + g_by2
        p2 = g_w2 + (g_bx2 - g_bx1) / 2
        p3 = g_h2 + (g_by2 - g_by1) / 2
    else:  # w = x2 - x1, h = clamp(y2 - y1, eps)
        gh1 = tl.where(hr1 >= eps, g_h1, 0.0)
        gh2 = tl.where(hr2 >= eps, g_h2, 0.0)
        o0 = g_ax1 - g_w1
        o1 = g_ay1 - gh1
        o2 = g_ax2 + g_w1
        o3 = g_ay2 + gh1
        p0 = g_bx1 - g_w2
        p1 = g_by1 - gh2
        p2 = g_bx2 + g_w2
        p3 = g_by2 + gh2
    q = g1_ptr + offs * 4
    tl.store(q + 0, o0, mask=mask)
    tl.store(q + 1, o1, mask=mask)
    tl.store(q + 2, o2, mask=mask)
    tl.store(q + 3, o3, mask=mask)
    q = g2_ptr + offs * 4
    tl.store(q + 0, p0, mask=mask)
    tl.store(q + 1, p1, mask=mask)
    tl.store(q + 2, p2, mask=mask)
    tl.store(q + 3, p3, mask=mask)


class CIoUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, box1, box2, xywh, eps):
        shape = box1.shape
        b1 = box1.detach().reshape(-1, 4).contiguous()
        b2 = box2.detach().reshape(-1, 4).contiguous()
        n = b1.shape[0]
        out = torch.empty(n, device=b1.device, dtype=torch.float32)
        if n:
            _ciou_fwd[(triton.cdiv(n, BLOCK),)](b1, b2, out, n, eps, K=_K, XYWH=bool(xywh), BLOCK=BLOCK)
        ctx.save_for_backward(b1, b2)
        ctx.xywh, ctx.eps, ctx.shape = bool(xywh), eps, shape
        ctx.dtypes = (box1.dtype, box2.dtype)
        return out.view(*shape[:-1], 1).to(torch.result_type(box1, box2))

    @staticmethod
    def backward(ctx, grad):
        b1, b2 = ctx.saved_tensors
        n = b1.shape[0]
        g = grad.reshape(-1).float().contiguous()
        g1 = torch.empty((n, 4), device=b1.device, dtype=torch.float32)
        g2 = torch.empty((n, 4), device=b1.device, dtype=torch.float32)
        if n:
            _ciou_bwd[(triton.cdiv(n, BLOCK),)](b1, b2, g, g1, g2, n, ctx.eps, K=_K, XYWH=ctx.xywh, BLOCK=BLOCK)
        d1 = g1.view(ctx.shape).to(ctx.dtypes[0]) if ctx.needs_input_grad[0] else None
        d2 = g2.view(ctx.shape).to(ctx.dtypes[1]) if ctx.needs_input_grad[1] else None
        return d1, d2, None, None


def ciou_triton(box1, box2, xywh=True, eps=1e-7):
    """CIoU of matched pairs box1, box2 (same shape (..., 4)) -> (..., 1), fused forward and backward."""
    return CIoUFunction.apply(box1, box2, xywh, float(eps))
