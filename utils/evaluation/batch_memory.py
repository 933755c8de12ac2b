"""How many images of a validation batch the model runs at once: all of them while memory is plentiful, fewer when
the headroom (utils.memory_limits.memory_available: the host's or the memory cgroup's) is small.

A batch's forward pass is the validation's memory peak: yolov5n at batch 32 and 672x672 grows the process by about
1.9 GB, so a 2.5 GB container was killed in its final validation. Run in chunks, the peak shrinks with the chunk.
The need is estimated once per validation from a 64x64 probe: the bytes of every leaf module's output per input
pixel (yolov5n: 274 B/px, 118 MB an image at 672x672, about twice what the forward really holds at once, so the
estimate errs on the safe side). With enough headroom nothing changes: the whole batch runs as one, as before.
A chunk's outputs agree with the whole batch's to float rounding (the convolution kernels may differ with the
batch size, by 1e-8 relative); detections and figures are the same."""
from utils.backend import torch
from utils.memory_limits import memory_available

PROBE_SIDE = 64  # a multiple of every YOLOv5 stride (P6 models: 64)
HEADROOM_SHARE = 0.5  # the forward may use this share of the headroom; the rest is for NMS, loader workers, plots
# No YOLOv5 model's leaf outputs reach this many bytes per input pixel (yolov5n 274, yolov5x about 5x that): with
# headroom for this much, no probe is needed to know that the whole batch fits
MAX_BYTES_PER_PIXEL = 4096


def forward_chunk_size(batch, per_image_bytes, available_bytes, share=HEADROOM_SHARE):
    """Images per forward pass: batch when its estimated need fits share of the available bytes (or either figure
    is unknown), else as many as fit, at least 1."""
    if available_bytes is None or not per_image_bytes or batch * per_image_bytes <= share * available_bytes:
        return batch
    return max(1, min(batch, int(share * available_bytes // per_image_bytes)))


def _tensors(out):
    if isinstance(out, (list, tuple)):
        for o in out:
            yield from _tensors(o)
    elif hasattr(out, "numel") and hasattr(out, "element_size"):
        yield out


def activation_bytes_per_pixel(model, dtype=None, device=None, side=PROBE_SIDE):
    """Bytes that the leaf modules of model output for one side x side image, per pixel (0 when model has no
    modules to probe, as an exported model's wrapper). Each leaf's forward is wrapped for the probe and restored
    after (forward hooks cannot be removed the same way under every backend)."""
    total = [0]

    def counting(forward):
        def wrapped(*args, **kwargs):
            out = forward(*args, **kwargs)
            total[0] += sum(t.numel() * t.element_size() for t in _tensors(out))
            return out
        return wrapped

    modules = list(model.modules()) if hasattr(model, "modules") else []
    leaves = [m for m in modules if m is not model and not any(True for _ in m.children())]
    for m in leaves:
        m.forward = counting(m.forward)  # an instance attribute: deleting it restores the class's forward
    try:
        if leaves:
            model(torch.zeros((1, 3, side, side), dtype=dtype, device=device))
    finally:
        for m in leaves:
            del m.forward
    return total[0] / (side * side)


class ForwardBudget:
    """chunk_size(im) for each batch of one validation; the probe runs once, at the first batch that needs it.
    available: a function returning a MemoryLimit or None (None: this module's memory_available, looked up at
    each call)."""

    def __init__(self, model, available=None):
        self.model, self.available = model, available
        self.bytes_per_pixel = None

    def chunk_size(self, im):
        nb, _, height, width = im.shape
        if nb <= 1:
            return nb
        limit = (self.available or memory_available)()
        if limit is None or nb * height * width * MAX_BYTES_PER_PIXEL <= HEADROOM_SHARE * limit.available:
            return nb
        if self.bytes_per_pixel is None:
            self.bytes_per_pixel = activation_bytes_per_pixel(self.model, im.dtype, im.device)
        return forward_chunk_size(nb, self.bytes_per_pixel * height * width, limit.available)


def _place(whole, out, start, batch):
    """Copy one chunk's output into the batch's (allocated at the first chunk; same nesting as out)."""
    if out is None:
        return None
    if isinstance(out, (list, tuple)):
        whole = whole if whole is not None else [None] * len(out)
        return type(out)(_place(w, o, start, batch) for w, o in zip(whole, out))
    if whole is None:
        whole = torch.zeros((batch, *out.shape[1:]), dtype=out.dtype, device=out.device)
    whole[start:start + out.shape[0]] = out
    return whole


def forward_in_chunks(model, im, chunk, augment=False, keep=None):
    """model(im) run chunk images at a time, each chunk's output copied into one batch-sized output (no list of
    chunks joined at the end: that would hold the outputs twice). keep: how many leading items of a tuple output
    to keep (the rest, such as the raw maps that only a loss needs, is dropped chunk by chunk); None keeps all."""
    batch, whole = im.shape[0], None
    for start in range(0, batch, chunk):
        out = model(im[start:start + chunk], augment=True) if augment else model(im[start:start + chunk])
        if keep is not None and isinstance(out, (list, tuple)):
            out = tuple(out[:keep])
        whole = _place(whole, out, start, batch)
        del out  # this chunk's activations and outputs go before the next chunk runs
    return whole
