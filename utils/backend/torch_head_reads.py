"""What the loss reads from a level's raw map, with a backward that writes the map's gradient once (PyTorch).

The loss reads two things from each level's map pi (bs, na, ny, nx, no): the objectness logit of every cell, and
the whole rows of the few cells that candidate matches point at, both in fp32. Written as `pf = pi.float()`, then
`pf[..., 4]` and `pf.reshape(-1, no).index_select(0, idx)`, autograd builds the map's gradient from full-size
pieces: the fp32 copy of the map in the forward, a zero map for the select's gradient, another for the
index_select's, their sum, and its cast back to the map's dtype -- for yolov5n's 40x40 level at batch 16 about 240
MB of memory traffic a step for a gradient that is one channel plus a few thousand rows. head_reads makes the same
two reads without the fp32 copy, and its backward writes the gradient once: a zero map, the objectness gradient
into channel 4, then each read cell's row.

The gradient is the one autograd made, to the bit, in the deterministic mode train.py sets (outside it the two were
seen to differ in the last bits now and then): where several candidates read one cell, their row gradients
are summed in fp32 in the order index_add_ sums them (candidate order, from zero), the objectness gradient is added
to that sum, and the total is rounded to the map's dtype once. (Only the sign of a zero gradient can differ.)
"""
import math

import torch


def _first_occurrence(idx):
    """For each position i of idx, the position of the first j <= i with idx[j] == idx[i] (fixed shapes, no host
    sync)."""
    n = idx.shape[0]
    sorted_idx, order = torch.sort(idx, stable=True)  # equal cells keep their candidate order
    starts = torch.ones(n, dtype=torch.bool, device=idx.device)
    starts[1:] = sorted_idx[1:] != sorted_idx[:-1]
    pos = torch.arange(n, device=idx.device)
    group_start = torch.where(starts, pos, torch.zeros_like(pos)).cummax(0).values
    first = torch.empty_like(order)
    first[order] = order[group_start]
    return first


class _HeadReads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pi, idx):
        flat = pi.reshape(-1, pi.shape[-1])
        obj = flat[:, 4].to(torch.float32, copy=True).view(pi.shape[:-1])
        rows = flat.index_select(0, idx).to(torch.float32)
        ctx.save_for_backward(idx)
        ctx.map_shape, ctx.map_dtype = pi.shape, pi.dtype
        return obj, rows

    @staticmethod
    def backward(ctx, grad_obj, grad_rows):
        (idx,) = ctx.saved_tensors
        shape, dtype = ctx.map_shape, ctx.map_dtype
        no = shape[-1]
        grad = torch.zeros((math.prod(shape[:-1]), no), dtype=dtype, device=idx.device)
        if grad_obj is not None:
            grad[:, 4] = grad_obj.reshape(-1)  # every cell; the read cells are written whole below
        if grad_rows is not None and idx.shape[0]:
            first = _first_occurrence(idx)
            sums = torch.zeros(grad_rows.shape, dtype=torch.float32, device=idx.device)
            sums.index_add_(0, first, grad_rows.to(torch.float32))  # per cell, in candidate order, from zero
            total = sums.index_select(0, first)  # each candidate's cell total
            if grad_obj is not None:
                total[:, 4] += grad_obj.reshape(-1).to(torch.float32).index_select(0, idx)
            grad.index_put_((idx,), total.to(dtype))  # candidates of one cell write the same value
        return grad.view(shape), None


def head_reads(pi, idx):
    """(objectness logits (bs, na, ny, nx), rows (len(idx), no)) of map pi, both fp32; idx: flat cell indices
    (int64, any number, repeats allowed). Their gradients reach pi as `pi.float()` indexing would send them."""
    return _HeadReads.apply(pi, idx)
