"""One training step under torch.profiler, this project's or the official code's: the measured counterpart of the
launch and sync counts of benchmarks/launches.py (run by benchmarks/gpu_kit.py, one process per codebase).

    python benchmarks/gpu_profile.py --side project --device 0 --configs 16:on 16:off 64:on --json p.json
    python benchmarks/gpu_profile.py --side official --ref .gpu_kit/official --device 0 --configs 16 64 --json o.json

The step is yolov5s (--cfg) at --img on synthetic data made on the device (uint8 images, 8 targets an image): the
uint8 -> float conversion, forward and loss under the trainer's default precision (fp16 autocast with the
GradScaler on CUDA, fp32 on the CPU), backward, unscale, clip at 10, optimizer step, EMA update. The optimizer and
EMA run every step here (the trainers run them every 64 / batch steps). This project's step is
benchmarks/speed_steps.make_train_step with the seed's flags on or off (its loss read-back every 10 steps is not part of
it); the official step is the one its train.py runs, with the per-step progress-bar read of the mean losses
(a host sync) that its loop does on rank 0.

Figures per configuration: host_ms (host time to issue one step, no sync inside), wall_ms (per step with the
device drained at the end), kernels (CUDA kernels launched in one profiled step; memcpy/memset counted apart),
gpu_busy_ms (union of the step's kernel and copy intervals), gpu_window_ms (from the step's first host op to its
last device op), gpu_idle_ms (window - busy), busy_fraction, sync_calls (cudaStreamSynchronize,
cudaDeviceSynchronize, cudaEventSynchronize and synchronous cudaMemcpy calls inside the step) and sync_warnings (what
torch.cuda.set_sync_debug_mode('warn') reports for one step). On the CPU only host_ms, wall_ms and cpu_ops.
"""
import argparse
import contextlib
import io
import json
import os
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


def _union_ms(intervals):
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total / 1e3


def measure(step, dev, warmup=5, iters=5):
    """The figures of the module docstring for step(i) on dev (a torch.device)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    cuda = dev.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()
    for i in range(warmup):
        step(i)
    sync()
    t0 = time.perf_counter()
    for i in range(iters):
        step(i)
    host = (time.perf_counter() - t0) / iters * 1e3
    sync()
    wall = (time.perf_counter() - t0) / iters * 1e3
    out = {"host_ms": round(host, 3), "wall_ms": round(wall, 3)}
    if cuda and hasattr(torch.cuda, "set_sync_debug_mode"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                step(0)
            finally:
                torch.cuda.set_sync_debug_mode(0)
        msgs = [str(w.message) for w in caught if "synchroniz" in str(w.message).lower()]
        out["sync_warnings"] = len(msgs)
        out["sync_warning_samples"] = sorted(set(m[:160] for m in msgs))[:5]
        sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        with record_function("gpu_kit_step"):
            step(0)
        sync()
    events = list(prof.events())
    marker = next(e for e in events if e.name == "gpu_kit_step")
    s0, s1 = marker.time_range.start, marker.time_range.end
    cpu_ops = [e for e in events if e.device_type == torch.autograd.DeviceType.CPU and e.name.startswith("aten::")
               and s0 <= e.time_range.start <= s1]
    out["cpu_ops"] = len(cpu_ops)
    if not cuda:
        return out
    dev_events = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    copies = [e for e in dev_events if e.name.startswith(("Memcpy", "Memset"))]
    kernels = [e for e in dev_events if not e.name.startswith(("Memcpy", "Memset"))]
    spans = [(e.time_range.start, e.time_range.end) for e in dev_events]
    busy = _union_ms(spans)
    window = (max([b for _, b in spans] + [s1]) - s0) / 1e3
    runtime = [e for e in events if e.device_type == torch.autograd.DeviceType.CPU and s0 <= e.time_range.start <= s1]
    out.update(kernels=len(kernels), copies=len(copies), dtoh_copies=sum("DtoH" in e.name for e in copies),
               gpu_busy_ms=round(busy, 3), gpu_window_ms=round(window, 3), gpu_idle_ms=round(window - busy, 3),
               busy_fraction=round(busy / window, 4) if window > 0 else None,
               sync_calls=sum(e.name in SYNC_CALLS for e in runtime))
    return out


def project_steps(opt, dev):
    sys.path.insert(0, str(ROOT))
    from benchmarks.speed_steps import make_train_step
    from utils import backend
    from utils.log import LOGGER
    LOGGER.setLevel("WARNING")
    for bs, flags in _configs(opt.configs):
        step, meta = make_train_step(opt.cfg, bs, opt.img, dev, amp=backend.has_amp(dev), flags=flags)
        yield {"side": "project", "batch": bs, "flags": flags, "amp": meta["amp"], "iou_impl": meta["iou_impl"],
               "optim_impl": meta["optim_impl"]}, step


def official_steps(opt, dev):
    ref = str(Path(opt.ref).resolve())
    sys.path = [ref] + [x for x in sys.path if x not in (str(HERE), "")]  # the official `utils` must win
    os.chdir(ref)
    import numpy as np
    import torch
    import yaml
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        from models.yolo import Model
        from utils.loss import ComputeLoss
        from utils.torch_utils import ModelEMA, smart_optimizer
    amp = dev.type == "cuda"
    for bs, _ in _configs(opt.configs):
        with open(Path(ref) / "data" / "hyps" / "hyp.scratch-low.yaml") as f:
            hyp = yaml.safe_load(f)
        torch.manual_seed(0)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            model = Model(str(Path(ref) / "models" / opt.cfg), ch=3, nc=80).to(dev).train()
        nl = model.model[-1].nl
        hyp["box"] *= 3 / nl
        hyp["cls"] *= 3 / nl
        hyp["obj"] *= (opt.img / 640) ** 2 * 3 / nl
        hyp["label_smoothing"] = 0.0
        accumulate = max(round(64 / bs), 1)
        hyp["weight_decay"] *= bs * accumulate / 64
        model.nc, model.hyp = 80, hyp
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            compute_loss = ComputeLoss(model)
            optimizer = smart_optimizer(model, "SGD", hyp["lr0"], hyp["momentum"], hyp["weight_decay"])
            ema = ModelEMA(model)
        scaler = torch.amp.GradScaler("cuda", enabled=amp)
        g = np.random.default_rng(0)
        imgs_u8 = torch.from_numpy(g.integers(0, 256, (bs, 3, opt.img, opt.img), dtype=np.uint8)).to(dev)
        n = bs * 8
        wh = g.uniform(0.02, 0.5, (n, 2))
        xy = g.uniform(0.0, 1.0, (n, 2)) * (1 - wh) + wh / 2
        t = np.concatenate([np.repeat(np.arange(bs), 8)[:, None], g.integers(0, 80, (n, 1)), xy, wh], 1)
        targets = torch.from_numpy(t.astype(np.float32)).to(dev)
        mloss = torch.zeros(3, device=dev)

        def step(i, model=model, compute_loss=compute_loss, optimizer=optimizer, ema=ema, scaler=scaler,
                 imgs_u8=imgs_u8, targets=targets, state={"mloss": mloss}):
            imgs = imgs_u8.float() / 255
            with torch.autocast("cuda", enabled=amp):
                pred = model(imgs)
                loss, loss_items = compute_loss(pred, targets)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            ema.update(model)
            state["mloss"] = (state["mloss"] * i + loss_items) / (i + 1)
            return ("%11.4g" * 3) % tuple(state["mloss"])  # the progress bar's read: a host sync every step
        yield {"side": "official", "batch": bs, "flags": None, "amp": amp, "includes_progress_read": True}, step


def _configs(specs):
    """'16:on' -> (16, True); '64' -> (64, True)."""
    out = []
    for s in specs:
        bs, _, flags = s.partition(":")
        out.append((int(bs), flags.lower() not in ("off", "0", "false")))
    return out


def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--side", choices=["project", "official"], required=True)
    p.add_argument("--ref", default=None, help="official checkout (--side official)")
    p.add_argument("--device", default="0", help="'0' (cuda:0) or 'cpu'")
    p.add_argument("--cfg", default="yolov5s.yaml")
    p.add_argument("--img", type=int, default=640)
    p.add_argument("--configs", nargs="+", default=["16:on", "16:off", "64:on"], help="BATCH[:on|off] (flags)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--json", required=True)
    return p.parse_args(argv)


def main(opt):
    import torch
    dev = torch.device("cpu" if opt.device == "cpu" else f"cuda:{opt.device}")
    if opt.side == "official" and not opt.ref:
        raise SystemExit("gpu_profile: --side official needs --ref (the official checkout)")
    rows = []
    steps = project_steps(opt, dev) if opt.side == "project" else official_steps(opt, dev)
    for meta, step in steps:
        row = {**meta, "cfg": opt.cfg, "img": opt.img, "device": str(dev)}
        try:
            row.update(measure(step, dev, opt.warmup, opt.iters))
        except Exception as e:  # one configuration's failure (out of memory, say) is reported, the others measured
            row["error"] = f"{type(e).__name__}: {e}"[:500]
        rows.append(row)
        print(json.dumps(row), flush=True)
        Path(opt.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(parse_opt()))
