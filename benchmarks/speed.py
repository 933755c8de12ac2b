"""Speed benchmark for the seed's speed-ups (--bbox_iou_optim, --multi_tensor_optimizer, 2x nearest upsample).

One command prints a table and writes JSON; every input is generated on the device, so it needs no dataset and no
network:

    python benchmarks/speed.py                       # CUDA if present: yolov5s, batch 16 and 64, 640, FP32 and AMP
    python benchmarks/speed.py --device cpu --small  # CPU: yolov5n, batch 2, 256 px, fewer box counts

Sections
  ciou      CIoU forward+backward, plain vs fused (and, for PyTorch on the CPU, the compiled maths explicitly)
  ema       EMA update over all floating tensors of the model: per-tensor loop vs fused
  optim     SGD step (the official 3 groups, nesterov): framework default vs --multi_tensor_optimizer, plus the
            explicit per-tensor loop (PyTorch's default is already foreach on CUDA)
  upsample  nn.Upsample(2, nearest) forward+backward vs its memory-bandwidth floor (bytes moved / copy bandwidth)
  step      a training step broken into data, forward, loss, backward, optimizer, EMA (synchronised between phases)
            and the end-to-end step time without those inner syncs; flags off vs on
  variants  end-to-end step time of the candidates beyond the seed against the plain step: flags, channels_last,
            AMP fp16 / bf16, torch.compile, the whole step as one CUDA graph (CUDA); train.py adopts a candidate
            only where this shows a gain
"""
import argparse
import logging
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks.results_io import write_result  # noqa: E402
from utils import backend  # noqa: E402
from utils.backend import nn, torch  # noqa: E402


# ----------------------------------------------------------------------------------------------------------------
# timing
def _sync(dev):
    # OneFlow runs eager ops asynchronously on the CPU too: without waiting for it, time would be charged to
    # whichever later op happens to read a value
    backend.wait_for_work(dev)


def time_ms(fn, dev, iters=10, warmup=3, repeats=3):
    """Median over `repeats` blocks of the mean time of `iters` calls (ms); synchronised at block edges only."""
    for _ in range(warmup):
        fn()
    _sync(dev)
    blocks = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        _sync(dev)
        blocks.append((time.perf_counter() - t0) * 1e3 / iters)
    return statistics.median(blocks)


def time_interleaved(fns, dev, iters=10, warmup=3, rounds=5):
    """Like time_ms for several variants, alternating blocks of each (round robin) so that load changes on a
    shared machine hit every variant alike. Returns {name: median block mean in ms}."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    _sync(dev)
    blocks = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            _sync(dev)
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
def _build_model(cfg, dev):
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
    model = _build_model(cfg, dev)
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


# ----------------------------------------------------------------------------------------------------------------
# Training step
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


def make_train_step(cfg, bs, img, dev, amp, flags, channels_last=False, amp_dtype=None, compiled=False):
    """Build model, loss, optimizer, EMA and scaler as train.py does; return step(i, phases=None) and its meta.
    channels_last (True: weights and input; 'input': the input alone, the layout then spreads through the
    convolutions), amp_dtype (e.g. bfloat16, which needs no loss scaling) and compiled (torch.compile of the model)
    are the candidates of the 'variants' section and of benchmarks/cpu_levers.py; train.py uses none of them by
    default."""
    from utils.iou import fused_backend_name
    from utils.loss import ComputeLoss
    from utils.backend import clip_grad_norm_, optimizer_impl
    from utils.torch_utils import ModelEMA, smart_optimizer
    model = _build_model(cfg, dev)
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
    ema = ModelEMA(model, fused=flags)
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
                _sync(dev)
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
            _sync(dev)
            t0 = time.perf_counter()  # end to end, no syncs inside the step: what the device queue really sees
            for i in range(iters):
                step(i)
            _sync(dev)
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
    model = _build_model(cfg, dev).train()
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
            _sync(dev)
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


# ----------------------------------------------------------------------------------------------------------------
def _fmt(v):
    return f"{v:9.3f}" if isinstance(v, float) else f"{v!s:>9}"


def print_table(title, rows):
    if not rows:
        return
    print(f"\n== {title}")
    keys = list(dict.fromkeys(k for r in rows for k in r))
    print(" | ".join(f"{k:>14}" for k in keys))
    for r in rows:
        print(" | ".join(f"{_fmt(r.get(k, '')):>14}" for k in keys))


def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="", help="'' (CUDA if present, else CPU), 'cpu', '0'")
    p.add_argument("--small", action="store_true", help="CPU-sized run: yolov5n, batch 2, 256 px, up to 1e5 boxes")
    p.add_argument("--cfg", default=None, help="model yaml (default yolov5s.yaml, yolov5n.yaml with --small)")
    p.add_argument("--batch", type=int, nargs="+", default=None, help="training-step batch sizes (default 16 64)")
    p.add_argument("--img", type=int, default=None, help="training-step image size (default 640)")
    p.add_argument("--boxes", type=float, nargs="+", default=None, help="CIoU box counts (default 1e3..1e6)")
    p.add_argument("--iters", type=int, default=None, help="timed iterations per measurement")
    p.add_argument("--sections", nargs="+", default=["ciou", "ema", "upsample", "step", "variants"],
                   choices=["ciou", "ema", "upsample", "step", "variants"])
    p.add_argument("--variants", nargs="+", default=None, help="'variants' section: only these candidates (and "
                   "'plain'), e.g. flags+amp_fp16 flags+amp_fp16+compile")
    p.add_argument("--threads", type=int, default=0, help="CPU intra-op threads (0: framework default); 1 is "
                   "steadier on a shared machine, where spinning OpenMP threads can make small ops ~50x slower")
    p.add_argument("--json", default=None, help="results file (default: a new "
                   "speed_<backend>_<device>_<time>.json in benchmarks/results/)")
    return p.parse_args(argv)


def main(opt):
    from utils.log import LOGGER  # imported first: it sets its own level at import
    LOGGER.setLevel(logging.WARNING)  # model summaries and optimizer lines would flood the table
    dev = backend.select_device(opt.device)
    if opt.threads and hasattr(torch, "set_num_threads"):
        torch.set_num_threads(opt.threads)
    cuda = backend.is_cuda(dev)
    small = opt.small
    cfg = opt.cfg or ("yolov5n.yaml" if small else "yolov5s.yaml")
    batches = opt.batch or ([2] if small else [16, 64])
    img = opt.img or (256 if small else 640)
    counts = [int(c) for c in (opt.boxes or ([1e3, 1e4, 1e5] if small else [1e3, 1e4, 1e5, 1e6]))]
    iters = opt.iters or (5 if small else 20)
    gpu = torch.cuda.get_device_name(0) if cuda and hasattr(torch.cuda, "get_device_name") else None
    info = {"backend": backend.BACKEND, "version": backend.VERSION, "device": str(dev), "gpu": gpu,
            "cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads()
            if hasattr(torch, "get_num_threads") else None, "python": platform.python_version(),
            "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
            "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    print(f"speed benchmark: {info}")
    result = {"info": info}

    if "ciou" in opt.sections:
        result["ciou_fwd_bwd_ms"] = bench_ciou(dev, counts, iters)
        print_table("CIoU forward+backward (ms)", result["ciou_fwd_bwd_ms"])
    if "ema" in opt.sections:
        result["ema_optimizer_ms"] = bench_ema_optim(cfg, dev, iters)
        print_table(f"EMA update and optimizer step, {cfg} (ms)", [result["ema_optimizer_ms"]])
    if "upsample" in opt.sections:
        shapes = [(2, 32, 40, 40), (2, 128, 16, 16)] if small else [(16, 32, 80, 80), (16, 256, 20, 20),
                                                                    (16, 128, 40, 40), (64, 128, 40, 40)]
        result["upsample"] = bench_upsample(dev, shapes, iters, bw_numel=(1 << 22) if small else (1 << 26))
        print_table("nn.Upsample(2, nearest) fp32 vs bandwidth floor", result["upsample"])
        worst = max(r["x_floor"] for r in result["upsample"])
        result["upsample_decision"] = (
            ("needs a specialised kernel (> 1.5x the floor)" if worst > 1.5 else "framework kernel is within 1.5x")
            if cuda else "decision needs a CUDA run (the 1.5x rule applies to the GPU kernel)")
        print(f"upsample: worst {worst:.2f}x the floor -> {result['upsample_decision']}")
    if "step" in opt.sections:
        rows = []
        for bs in batches:
            for amp in ([False, True] if backend.has_amp(dev) else [False]):
                pair = bench_step_pair(cfg, bs, img, dev, amp, iters=iters, warmup=3 if small else 10)
                rows += pair
                print(f"  step {cfg} bs{bs} {img} {'AMP' if amp else 'FP32'}: flags off "
                      f"{pair[0]['step_e2e_ms']:.1f} ms, on {pair[1]['step_e2e_ms']:.1f} ms", flush=True)
        result["train_step"] = rows
        print_table(f"training step {cfg} (ms, median; phases synchronised)", rows)
        speedups = []
        for off, on in zip(rows[::2], rows[1::2]):
            speedups.append({"batch": off["batch"], "amp": off["amp"],
                             "e2e_speedup": off["step_e2e_ms"] / on["step_e2e_ms"],
                             "amortised_speedup": off["amortised_step_ms"] / on["amortised_step_ms"]})
        result["train_step_speedup_flags"] = speedups
        print_table("flags on vs off (x faster)", speedups)

    if "variants" in opt.sections:
        result["train_step_variants"] = []
        for bs in batches[:1]:  # the seed's headline batch (16 on a GPU)
            result["train_step_variants"] += bench_step_variants(cfg, bs, img, dev, iters=iters,
                                                                 warmup=3 if small else 10, names=opt.variants)
        print_table(f"training step variants beyond the seed, {cfg} (ms, end to end)", result["train_step_variants"])

    out = write_result("speed", result, path=opt.json, tag=f"{backend.BACKEND}_{dev.type}", gpu=gpu, default=float)
    print(f"\nwrote {out}")
    return result


if __name__ == "__main__":
    main(parse_opt())
