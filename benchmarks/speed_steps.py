"""benchmarks/speed.py's training steps: one step built as train.py builds it (flags off or on, and the candidates
beyond the seed: channels_last, AMP fp16 / bf16, torch.compile), the whole step as one CUDA graph, and their timings.
benchmarks/cpu_levers.py and benchmarks/gpu_profile.py build their steps here too."""
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.speed_kernels import build_model, sync, time_interleaved
from utils import backend
from utils.backend import nn, torch

ROOT = Path(__file__).resolve().parents[1]


def _hyp(nl, nc, imgsz):
    import yaml
    from utils.engine.hyp import scale_hyp
    with open(ROOT / "data" / "hyps" / "hyp.scratch-low.yaml") as f:
        hyp = yaml.safe_load(f)
    return scale_hyp(hyp, nl, nc, imgsz)


def _synthetic_batch(bs, img, dev, seed, per_image=8, nc=80):
    g = np.random.default_rng(seed)
    imgs = torch.tensor(g.integers(0, 256, (bs, 3, img, img), dtype=np.uint8)).to(dev)
    n = bs * per_image
    wh = g.uniform(0.02, 0.5, (n, 2))
    xy = g.uniform(0.0, 1.0, (n, 2)) * (1 - wh) + wh / 2
    t = np.concatenate([np.repeat(np.arange(bs), per_image)[:, None], g.integers(0, nc, (n, 1)), xy, wh], 1)
    return imgs, torch.tensor(t.astype(np.float32)).to(dev)


def _training_parts(cfg, bs, img, dev, flags, channels_last):
    """Model, loss, optimizer and EMA built as train.py builds them, and the accumulation count of batch bs."""
    from utils.loss import ComputeLoss
    from utils.torch_utils import ModelEMA, smart_optimizer
    model = build_model(cfg, dev)
    if channels_last is True:  # convolutions only: Detect's 5-D grid buffers have no channels_last layout
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                m.to(memory_format=torch.channels_last)
    model.train()
    det = model.model[-1]
    model.hyp = _hyp(det.nl, det.nc, img)
    model.gr = 1.0
    compute_loss = ComputeLoss(model, fused_iou=flags)
    accumulate = max(round(64 / bs), 1)
    optimizer = smart_optimizer(model, "SGD", lr=0.01, momentum=0.937,
                                decay=model.hyp["weight_decay"] * bs * accumulate / 64, fused=flags)
    return model, compute_loss, optimizer, ModelEMA(model, fused=flags), accumulate


def make_train_step(cfg, bs, img, dev, amp, flags, channels_last=False, amp_dtype=None, compiled=False):
    """Build model, loss, optimizer, EMA and scaler as train.py does; return step(i, phases=None) and its meta.
    channels_last (True: weights and input; 'input': the input alone, the layout then spreads through the
    convolutions), amp_dtype (e.g. bfloat16, which needs no loss scaling) and compiled (torch.compile of the model)
    are the candidates of the 'variants' section and of benchmarks/cpu_levers.py; train.py uses none of them by
    default."""
    from utils.iou import fused_backend_name
    from utils.backend import clip_grad_norm_, optimizer_impl
    model, compute_loss, optimizer, ema, accumulate = _training_parts(cfg, bs, img, dev, flags, channels_last)
    scaler = backend.grad_scaler(dev, enabled=amp and amp_dtype is None)  # bf16 keeps fp32's range: no scaling
    forward = torch.compile(model) if compiled else model
    pool = [_synthetic_batch(bs, img, dev, s) for s in range(3)]
    if channels_last:
        pool = [(x.contiguous(memory_format=torch.channels_last), t) for x, t in pool]

    def step(i, phases=None):
        # the optimizer and EMA run every step here (train.py runs them every `accumulate` steps; see amortised)
        marks = []

        def mark():
            if phases is not None:  # synchronise only when attributing time to phases
                sync(dev)
                marks.append(time.perf_counter())
        mark()
        imgs_u8, targets = pool[i % len(pool)]  # generated on the device: data wait is the uint8 -> float only
        imgs = imgs_u8.float() / 255
        mark()
        with backend.autocast(dev, enabled=amp, dtype=amp_dtype):
            pred = forward(imgs)
            mark()
            loss, _ = compute_loss(pred, targets)
        mark()
        scaler.scale(loss).backward()
        mark()
        scaler.unscale_(optimizer)
        clip_grad_norm_(model.parameters(), 10.0, fused=flags)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        mark()
        ema.update(model)
        mark()
        if phases is not None:
            for k, t0, t1 in zip(("data", "forward", "loss", "backward", "optimizer", "ema"), marks, marks[1:]):
                phases.setdefault(k, []).append((t1 - t0) * 1e3)

    meta = {"model": cfg, "batch": bs, "img": img, "amp": amp, "flags": flags, "compiled": compiled,
            "layout": {True: "channels_last", "input": "channels_last input"}.get(channels_last, "nchw"),
            "dtype": (str(amp_dtype or torch.float16).replace("torch.", "").replace("oneflow.", "") if amp else "fp32"),
            "iou_impl": fused_backend_name(dev) if flags else "plain", "optim_impl": optimizer_impl(optimizer),
            "accumulate": accumulate}
    return step, meta


def bench_step_pair(cfg, bs, img, dev, amp, iters, warmup, rounds=3):
    """Flags off and on, built side by side and timed in alternating blocks (fair on a loaded machine)."""
    variants = [make_train_step(cfg, bs, img, dev, amp, flags) for flags in (False, True)]
    for step, _ in variants:
        for i in range(warmup):
            step(i)
    phases = [{} for _ in variants]
    e2e = [[] for _ in variants]
    for _ in range(rounds):
        for (step, _), ph, e in zip(variants, phases, e2e):
            for i in range(iters):
                step(i, ph)
            sync(dev)
            t0 = time.perf_counter()  # end to end, no syncs inside the step: what the device queue really sees
            for i in range(iters):
                step(i)
            sync(dev)
            e.append((time.perf_counter() - t0) * 1e3 / iters)
    rows = []
    for (_, meta), ph, e in zip(variants, phases, e2e):
        med = {k: statistics.median(v) for k, v in ph.items()}
        amortised = sum(med[k] for k in ("data", "forward", "loss", "backward")) + \
            (med["optimizer"] + med["ema"]) / meta["accumulate"]
        rows.append({**meta, **{f"{k}_ms": v for k, v in med.items()}, "phases_sum_ms": sum(med.values()),
                     "step_e2e_ms": statistics.median(e), "amortised_step_ms": amortised})
    return rows


def make_graph_step(cfg, bs, img, dev, amp_dtype=None, rows_per_image=20):
    """The whole training step (forward, loss, backward, clip, fused SGD, EMA) captured once as a CUDA graph and
    replayed: one launch from the host per step. Targets are padded to a fixed row count (utils.loss.pad_targets)
    and each batch is copied into static input buffers before a replay, so every replay sees the same shapes.
    bf16 autocast or fp32 only: the fp16 loss scaler decides on the host whether to skip a step. For timing only:
    the learning rate and the EMA decay are frozen at capture (a trainer would keep both in device tensors)."""
    from utils.backend import clip_grad_norm_
    from utils.loss import ComputeLoss, pad_targets
    from utils.torch_utils import ModelEMA, smart_optimizer
    model = build_model(cfg, dev).train()
    det = model.model[-1]
    model.hyp = _hyp(det.nl, det.nc, img)
    model.gr = 1.0
    compute_loss = ComputeLoss(model, fused_iou=True)
    optimizer = smart_optimizer(model, "SGD", lr=0.01, momentum=0.937, decay=model.hyp["weight_decay"], fused=True)
    ema = ModelEMA(model, fused=True)
    rows = bs * rows_per_image
    pool = [(x, pad_targets(t, rows)) for x, t in (_synthetic_batch(bs, img, dev, s) for s in range(3))]
    static_x, static_t = pool[0][0].clone(), pool[0][1].clone()

    import contextlib
    # autocast's cache of cast weights is freed when the context exits, under the captured graph's feet: capture
    # needs it off (what torch.cuda.make_graphed_callables requires too)
    cast = (torch.autocast("cuda", dtype=amp_dtype, cache_enabled=False) if amp_dtype is not None
            else contextlib.nullcontext())

    def body():
        with cast:
            pred = model(static_x.float() / 255)
            loss, _ = compute_loss(pred, static_t)
        loss.backward()
        clip_grad_norm_(model.parameters(), 10.0, fused=True)
        optimizer.step()
        ema.update(model)

    side = torch.cuda.Stream()  # warm-up on a side stream, as capture requires (cuDNN/cuBLAS workspaces, grids)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            body()
            optimizer.zero_grad(set_to_none=True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)  # backward then writes .grad from the graph's own memory pool
    with torch.cuda.graph(graph):
        body()

    def step(i, phases=None):
        x, t = pool[i % len(pool)]
        static_x.copy_(x)
        static_t.copy_(t)
        graph.replay()
    return step


def step_variant_specs(dev):
    """name -> make_train_step keywords (or 'graph': make_graph_step keywords) of the candidates this device has."""
    cuda = backend.is_cuda(dev)
    layouts = hasattr(torch, "channels_last")  # OneFlow 0.9.0 has no memory formats
    specs = {"plain": dict(amp=False, flags=False), "flags": dict(amp=False, flags=True)}
    if layouts:
        specs["flags+channels_last"] = dict(amp=False, flags=True, channels_last=True)
    if backend.has_amp(dev):
        specs["flags+amp_fp16"] = dict(amp=True, flags=True)
        if layouts:
            specs["flags+amp_fp16+channels_last"] = dict(amp=True, flags=True, channels_last=True)
        if getattr(torch.cuda, "is_bf16_supported", lambda: False)():
            specs["flags+amp_bf16"] = dict(amp=True, flags=True, amp_dtype=torch.bfloat16)
            if cuda and hasattr(torch.cuda, "CUDAGraph"):
                specs["flags+amp_bf16+cuda_graph"] = dict(graph=dict(amp_dtype=torch.bfloat16))
        if cuda and hasattr(torch, "compile"):
            specs["flags+amp_fp16+compile"] = dict(amp=True, flags=True, compiled=True)
    return specs


def bench_step_variants(cfg, bs, img, dev, iters, warmup, rounds=3, names=None):
    """End-to-end step time of the candidates beyond the seed, against the plain step (flags off, fp32, NCHW):
    flags on, + channels_last, + AMP fp16 or bf16, + torch.compile, + the whole step as one CUDA graph (the last
    four on CUDA only). A candidate is worth adopting only where this shows a gain on the GPU it will run on (and
    the loss curve is unchanged). names: run only these (plus 'plain', the reference); a candidate that fails to
    build (a capture or compile error) is reported with its error instead of a time."""
    specs = step_variant_specs(dev)
    if names:
        unknown = [n for n in names if n not in specs]
        if unknown:
            print(f"variants not available on {dev}: {unknown} (known here: {list(specs)})")
        specs = {k: v for k, v in specs.items() if k == "plain" or k in names}
    steps, failed = {}, []
    for name, kw in specs.items():
        try:
            if "graph" in kw:
                step = make_graph_step(cfg, bs, img, dev, **kw["graph"])
            else:
                step, _ = make_train_step(cfg, bs, img, dev, **kw)
            for i in range(warmup):
                step(i)
            sync(dev)
        except Exception as e:  # one candidate's failure is a finding, not the end of the benchmark
            failed.append({"variant": name, "batch": bs, "img": img, "error": f"{type(e).__name__}: {e}"[:500]})
            print(f"  variant {name} failed: {failed[-1]['error']}", flush=True)
            continue
        steps[name] = step
    counter = {"i": 0}

    def runner(step):
        def run():
            step(counter["i"])
            counter["i"] += 1
        return run
    ms = time_interleaved({k: runner(v) for k, v in steps.items()}, dev, iters=iters, warmup=0, rounds=rounds)
    base = ms.get("plain")
    return [{"variant": k, "batch": bs, "img": img, "step_ms": v, "x_vs_plain": base / v if base else None}
            for k, v in ms.items()] + failed
