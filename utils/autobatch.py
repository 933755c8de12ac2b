"""AutoBatch (`train.py --batch-size -1`): the training batch size that fills a fraction of the GPU's memory, as
ultralytics estimates it. A training step (forward and backward) is profiled at batch sizes 1, 2, 4, 8 and 16; the
memory the allocator holds after each is fitted with a line, and the line is solved for `fraction` of the free
memory. Without a CUDA device (or with a framework that cannot report its allocator's use) it falls back to the
default batch size, saying so in one line.

Units follow the official estimate exactly: device memory (total, reserved, allocated, free) in GiB, the profiled
memory in GB (1e9 bytes), so the same measurements give the same batch size.
"""
import time
from copy import deepcopy

import numpy as np

from utils import backend
from utils.backend import torch
from utils.log import LOGGER, colorstr
from utils.model_stats import count_flops

PREFIX = colorstr("AutoBatch: ")
BATCH_SIZES = (1, 2, 4, 8, 16)


def check_train_batch_size(model, imgsz=640, amp=True):
    """The batch size for `model` (a copy is profiled in training mode) at `imgsz`, with mixed precision if amp."""
    device = next(model.parameters()).device
    with backend.autocast(device, enabled=amp):
        return autobatch(deepcopy(model).train(), imgsz)


def autobatch(model, imgsz=640, fraction=0.8, batch_size=16):
    LOGGER.info(f"{PREFIX}Computing optimal batch size for --imgsz {imgsz}")
    device = next(model.parameters()).device
    if not backend.is_cuda(device):
        LOGGER.info(f"{PREFIX}CUDA not detected, using default CPU batch-size {batch_size}")
        return batch_size
    if backend.cudnn_benchmark_enabled():
        LOGGER.warning(f"{PREFIX}Requires torch.backends.cudnn.benchmark=False, using default batch-size {batch_size}")
        return batch_size
    if not backend.can_report_cuda_memory(device):
        LOGGER.warning(f"{PREFIX}{backend.BACKEND} {backend.VERSION} cannot report its CUDA memory use, using default "
                       f"batch-size {batch_size}")
        return batch_size

    gib = 1 << 30
    name, total, reserved, allocated = backend.cuda_memory(device)
    t, r, a = total / gib, reserved / gib, allocated / gib
    f = t - (r + a)
    d = str(device).upper()
    LOGGER.info(f"{PREFIX}{d} ({name}) {t:.2f}G total, {r:.2f}G reserved, {a:.2f}G allocated, {f:.2f}G free")
    try:
        mem = profile_memory(model, imgsz, device)
    except Exception as e:  # a model that cannot run at all: the caller's default is as good as any
        LOGGER.warning(f"{PREFIX}{e}")
        return batch_size
    b, used = fit_batch_size(mem, t, r, a, fraction, batch_size)
    LOGGER.info(f"{PREFIX}Using batch-size {b} for {d} {t * used:.2f}G/{t:.2f}G ({used * 100:.0f}%) ✅")
    return b


def fit_batch_size(mem, total, reserved, allocated, fraction=0.8, batch_size=16, batch_sizes=BATCH_SIZES):
    """(batch size, predicted share of the device's memory) from the GB held after each profiled batch size (None
    where that size failed, e.g. out of memory) and the device's total/reserved/allocated GiB."""
    y = [m for m in mem if m is not None]
    if len(y) < 2:  # no line through fewer than two points
        LOGGER.warning(f"{PREFIX}too few batch sizes could be profiled, using default batch-size {batch_size}")
        return batch_size, (reserved + allocated) / total
    free = total - (reserved + allocated)
    p = np.polyfit(batch_sizes[:len(y)], y, deg=1)  # memory = p[0] * batch + p[1]
    b = int((free * fraction - p[1]) / p[0])
    if None in mem:
        i = mem.index(None)
        if b >= batch_sizes[i]:  # the line says more fits than the first size that failed: stay below it
            b = batch_sizes[max(i - 1, 0)]
    if b < 1 or b > 1024:
        b = batch_size
        LOGGER.warning(f"{PREFIX}CUDA anomaly detected, recommend restart environment and retry command.")
    return b, (np.polyval(p, b) + reserved + allocated) / total


def profile_memory(model, imgsz, device, n=3, batch_sizes=BATCH_SIZES):
    """GB the allocator holds after n training steps (forward, backward) at each batch size; None for a size that
    fails. Prints one table row per size."""
    LOGGER.info(f"{'Params':>12s}{'GFLOPs':>12s}{'GPU_mem (GB)':>14s}{'forward (ms)':>14s}{'backward (ms)':>14s}"
                f"{'input':>24s}{'output':>24s}")
    try:
        gflops = count_flops(model, imgsz)
    except Exception:
        gflops = 0.0
    n_params = sum(x.numel() for x in model.parameters())
    out = []
    for bs in batch_sizes:
        try:
            x = torch.empty(bs, 3, imgsz, imgsz).to(device)
            x.requires_grad = True
            tf = tb = 0.0
            for _ in range(n):
                t0 = time.perf_counter()
                y = model(x)
                backend.synchronize(device)
                t1 = time.perf_counter()
                (sum(yi.sum() for yi in y) if isinstance(y, (list, tuple)) else y.sum()).backward()
                backend.synchronize(device)
                tf += (t1 - t0) * 1000 / n
                tb += (time.perf_counter() - t1) * 1000 / n
            mem = backend.memory_reserved_gb(device)
            LOGGER.info(f"{n_params:12}{gflops * bs:12.4g}{mem:>14.3f}{tf:14.4g}{tb:14.4g}{str(tuple(x.shape)):>24s}"
                        f"{'list':>24s}")
            out.append(mem)
        except Exception as e:  # out of memory at this size: the fit uses the sizes before it
            LOGGER.warning(f"{PREFIX}batch-size {bs}: {e}")
            out.append(None)
        backend.empty_cuda_cache()
    return out
