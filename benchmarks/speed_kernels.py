"""benchmarks/speed.py's timers and its micro-benchmarks: CIoU forward+backward, the EMA update and the optimizer
step, nn.Upsample against its bandwidth floor."""
import statistics
import time
from pathlib import Path

import numpy as np

from utils import backend
from utils.backend import nn, torch

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------------------------------------------
# timing
def sync(dev):
    # OneFlow runs eager ops asynchronously on the CPU too: without waiting for it, time would be charged to
    # whichever later op happens to read a value
    backend.wait_for_work(dev)


def time_ms(fn, dev, iters=10, warmup=3, repeats=3):
    """Median over `repeats` blocks of the mean time of `iters` calls (ms); synchronised at block edges only."""
    for _ in range(warmup):
        fn()
    sync(dev)
    blocks = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync(dev)
        blocks.append((time.perf_counter() - t0) * 1e3 / iters)
    return statistics.median(blocks)


def time_interleaved(fns, dev, iters=10, warmup=3, rounds=5):
    """Like time_ms for several variants, alternating blocks of each (round robin) so that load changes on a
    shared machine hit every variant alike. Returns {name: median block mean in ms}."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    sync(dev)
    blocks = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            sync(dev)
            blocks[k].append((time.perf_counter() - t0) * 1e3 / iters)
    return {k: statistics.median(v) for k, v in blocks.items()}


# ----------------------------------------------------------------------------------------------------------------
# CIoU
def _rand_boxes(n, dev, seed):
    g = np.random.default_rng(seed)
    xy = g.uniform(0, 40, (n, 2))
    wh = g.uniform(0.5, 8, (n, 2))
    return torch.tensor(np.concatenate([xy, wh], 1).astype(np.float32)).to(dev)


def bench_ciou(dev, counts, iters):
    from utils.iou import bbox_iou, fused_backend_name
    ciou_compiled = backend.compiled_ciou()  # None where the framework cannot compile
    rows = []
    for n in counts:
        b1, b2 = _rand_boxes(n, dev, 0), _rand_boxes(n, dev, 1)
        b1 = b1.requires_grad_(True)
        variants = [("plain", lambda a, b: bbox_iou(a, b, CIoU=True, fused=False)),
                    (f"fused ({fused_backend_name(dev)})", lambda a, b: bbox_iou(a, b, CIoU=True, fused=True))]
        if ciou_compiled is not None and fused_backend_name(dev) != "torch-compile":
            # the other PyTorch option, measured explicitly (on the CPU bbox_iou never routes to it)
            variants.append((f"torch.compile ({dev.type})", lambda a, b: ciou_compiled(a, b)))
        def make(fn):
            def step():
                b1.grad = None
                fn(b1, b2).sum().backward()
            return step
        it = max(2, min(iters * 10, int(2e6 / n)))  # more iterations for small counts
        res = {"boxes": n}
        res.update(time_interleaved({name: make(fn) for name, fn in variants}, dev, iters=it, warmup=2))
        rows.append(res)
    return rows


# ----------------------------------------------------------------------------------------------------------------
# EMA and optimizer
def build_model(cfg, dev):
    import contextlib
    import io
    from models.yolo import DetectionModel
    backend.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()):  # the layer table
        return DetectionModel(str(ROOT / "models" / cfg)).to(dev)


def bench_ema_optim(cfg, dev, iters):
    from utils.backend import ema_impl, ema_update_, optimizer_impl
    from utils.torch_utils import smart_optimizer
    import copy
    model = build_model(cfg, dev)
    ema = copy.deepcopy(model)
    msd = model.state_dict()
    e_list = [v for k, v in ema.state_dict().items() if v.dtype.is_floating_point]
    m_list = [msd[k] for k, v in ema.state_dict().items() if v.dtype.is_floating_point]
    out = {"model": cfg, "tensors": len(e_list), "elements": int(sum(t.numel() for t in e_list))}
    with backend.no_grad():
        out.update(time_interleaved({f"ema {ema_impl(e_list, fused)} (flag {'on' if fused else 'off'})":
                                     (lambda fused=fused: ema_update_(e_list, m_list, 0.999, fused))
                                     for fused in (False, True)}, dev, iters=iters))
    # optimizer: the official three groups, SGD nesterov; gradients set once (the step does not need fresh ones)
    for p in model.parameters():
        p.grad = torch.randn(tuple(p.shape), device=dev) * 1e-3
    # and the framework's other step implementations (PyTorch: the explicit loop; on the CPU its fused kernel,
    # faster but not bit-identical to the loop, so the flag does not use it)
    variants = [("off", False, None), ("on", True, None)]
    variants += [(label, False, settings) for label, settings in backend.optimizer_variants(dev).items()]
    steps = {}
    for label, fused, override in variants:
        opt = smart_optimizer(model, "SGD", lr=0.01, momentum=0.937, decay=5e-4, fused=fused)
        if override is not None:
            for g in opt.param_groups:
                g.update(override)
        steps[f"optimizer {label} ({optimizer_impl(opt)})"] = opt.step
    out.update(time_interleaved(steps, dev, iters=iters))
    return out


# ----------------------------------------------------------------------------------------------------------------
# Upsample vs bandwidth floor
def copy_bandwidth_gbs(dev, numel):
    x = torch.randn(numel, device=dev)
    y = torch.empty_like(x)
    ms = time_ms(lambda: y.copy_(x), dev, iters=10)
    return 2 * numel * 4 / (ms / 1e3) / 1e9


def bench_upsample(dev, shapes, iters, bw_numel):
    bw = copy_bandwidth_gbs(dev, bw_numel)
    up = nn.Upsample(scale_factor=2.0, mode="nearest")
    rows = []
    for shape in shapes:
        x = torch.randn(*shape, device=dev).requires_grad_(True)
        n = x.numel()
        gy = torch.randn(shape[0], shape[1], shape[2] * 2, shape[3] * 2, device=dev)
        fwd = time_ms(lambda: up(x), dev, iters=iters)

        def fb():
            x.grad = None
            up(x).backward(gy)
        total = time_ms(fb, dev, iters=iters)
        floor = 2 * (5 * n * 4) / (bw * 1e9) * 1e3  # fwd reads n writes 4n, bwd reads 4n writes n (fp32)
        rows.append({"shape": list(shape), "fwd_ms": fwd, "fwd_bwd_ms": total, "floor_ms": floor,
                     "x_floor": total / floor, "copy_bw_gbs": bw})
    return rows
