"""CPU training and validation speed under PyTorch: each lever alone and together, per step.

    python benchmarks/cpu_levers.py                                   # yolov5n 320, yolov5s 320 and 640, batch 16
    python benchmarks/cpu_levers.py --cfg yolov5n.yaml --img 320 --variants fp32 bf16 bf16+cl --json levers.json

Training step (the trainer's: forward, loss, backward, clip + optimizer, EMA; --multi_tensor_optimizer and
--bbox_iou_optim on, as on CPU they change no number) for these variants (any '+' combination of the levers
cl, bf16, compile, 1thread, fill can be asked for, e.g. --variants 1thread cl+1thread):
  fp32        the default: fp32, NCHW, all intra-op threads
  cl          channels_last model and input
  clin        channels_last input only (the layout spreads from the first convolution; the weights stay NCHW)
  bf16        bf16 autocast (what train.py --amp does on a CPU with native bf16; fp32 weights, no loss scaling)
  bf16+cl     both
  compile     torch.compile of the model (fp32); the first call compiles, which is not timed
  bf16+cl+compile
  1thread     fp32 with one intra-op thread (the other core free for a loader worker)
  bf16+cl+1thread
  fill        with torch's fill_uninitialized_memory on: every new tensor NaN-filled first, which deterministic mode
              does by default (the official trainer's init_seeds leaves it on); every variant runs in deterministic
              mode as train.py sets it (utils.backend.set_deterministic), without the fills unless asked
Validation (eval forward of the BN-folded model, batch 32, no grad): fp32, cl, bf16, bf16+cl, 1thread.

Variants are timed in alternating blocks (round robin), so load from others on a shared machine hits all alike;
the figures are medians of the blocks. The machine's CPU and thread count are printed and saved.
"""
import argparse
import contextlib
import io
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
os.environ.setdefault("YOLO_BACKEND", "torch")

from benchmarks.results_io import command_line, write_result  # noqa: E402
from utils import backend  # noqa: E402
from utils.backend import torch  # noqa: E402

TRAIN_VARIANTS = ["fp32", "cl", "clin", "bf16", "bf16+cl", "bf16+clin", "compile", "bf16+cl+compile", "1thread",
                  "bf16+clin+1thread"]
VAL_VARIANTS = ["fp32", "cl", "clin", "bf16", "bf16+cl", "bf16+clin", "1thread"]


TOKENS = {"fp32", "cl", "clin", "bf16", "compile", "1thread", "fill"}


def variant(name):
    """argparse type: 'fp32' or a '+'-joined combination of cl, bf16, compile, 1thread."""
    if not set(name.split("+")) <= TOKENS:
        raise argparse.ArgumentTypeError(f"{name!r}: combine {', '.join(sorted(TOKENS - {'fp32'}))} with '+'")
    return name


def _spec(name):
    parts = set(name.split("+"))
    layout = True if "cl" in parts else "input" if "clin" in parts else False
    return {"channels_last": layout, "bf16": "bf16" in parts, "compiled": "compile" in parts,
            "threads": 1 if "1thread" in parts else None, "fill": "fill" in parts}


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@contextlib.contextmanager
def threads(n):
    saved = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


@contextlib.contextmanager
def uninitialized_fill(on):
    """Deterministic mode's NaN fill of new tensors on or off while a variant runs."""
    saved = torch.utils.deterministic.fill_uninitialized_memory
    torch.utils.deterministic.fill_uninitialized_memory = on
    try:
        yield
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = saved


def train_steps(cfg, bs, img, variants):
    from benchmarks.speed_steps import make_train_step
    dev = torch.device("cpu")
    steps = {}
    for name in variants:
        s = _spec(name)
        step, _ = make_train_step(cfg, bs, img, dev, amp=s["bf16"], flags=True, channels_last=s["channels_last"],
                                  amp_dtype=torch.bfloat16 if s["bf16"] else None, compiled=s["compiled"])
        steps[name] = (step, s["threads"], s["fill"])
    return steps


def val_forwards(cfg, bs, img, variants):
    from benchmarks.speed_kernels import build_model as _build_model
    dev = torch.device("cpu")
    g = torch.Generator().manual_seed(0)
    x = torch.rand(bs, 3, img, img, generator=g)
    fns = {}
    for name in variants:
        s = _spec(name)
        with contextlib.redirect_stdout(io.StringIO()):
            model = _build_model(cfg, dev).eval().fuse()
        xi = x
        if s["channels_last"] is True:  # convolutions only: Detect's 5-D grids have no channels_last layout
            for m in model.modules():
                if isinstance(m, torch.nn.Conv2d):
                    m.to(memory_format=torch.channels_last)
        if s["channels_last"]:
            xi = x.contiguous(memory_format=torch.channels_last)

        def fwd(i, model=model, xi=xi, bf16=s["bf16"]):
            with torch.no_grad(), backend.autocast(dev, enabled=bf16, dtype=torch.bfloat16 if bf16 else None):
                model(xi)
        fns[name] = (fwd, s["threads"], s["fill"])
    return fns


def time_round_robin(fns, rounds, iters, warmup):
    """{name: median ms per call over `rounds` blocks of `iters` calls}, blocks alternating between variants."""
    counters = {k: 0 for k in fns}

    def call(name):
        fn, n_threads, fill = fns[name]
        with threads(n_threads), uninitialized_fill(fill):
            fn(counters[name])  # the iteration: training steps cycle through 3 batches
        counters[name] += 1

    for name in fns:
        for _ in range(warmup):
            call(name)
    blocks = {k: [] for k in fns}
    for _ in range(rounds):
        for name in fns:
            t0 = time.perf_counter()
            for _ in range(iters):
                call(name)
            blocks[name].append((time.perf_counter() - t0) * 1e3 / iters)
    return {k: statistics.median(v) for k, v in blocks.items()}


def rows(ms, base="fp32"):
    return [{"variant": k, "ms": round(v, 1), "x_vs_fp32": round(ms[base] / v, 3) if base in ms else None}
            for k, v in ms.items()]


def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cfg", nargs="+", default=None, help="model yamls (with --img, one size for all)")
    p.add_argument("--img", type=int, default=None)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--val-batch", type=int, default=32)
    p.add_argument("--val-img", type=int, default=640)
    p.add_argument("--variants", nargs="+", default=TRAIN_VARIANTS, type=variant)
    p.add_argument("--val-variants", nargs="*", default=VAL_VARIANTS, type=variant)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--json", default=None, help="results file (default: a new one in benchmarks/results/)")
    return p.parse_args(argv)


def main(opt):
    from utils.log import LOGGER
    LOGGER.setLevel(logging.WARNING)
    backend.set_deterministic()  # as train.py runs its steps
    configs = [(c, opt.img) for c in opt.cfg] if opt.cfg else \
        [("yolov5n.yaml", 320), ("yolov5s.yaml", 320), ("yolov5s.yaml", 640)]
    info = {"cpu": cpu_name(), "cores": os.cpu_count(), "threads": torch.get_num_threads(), "torch": torch.__version__,
            "native_bf16": backend.cpu_has_native_bf16(), "deterministic": True,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": command_line()}
    print(f"CPU levers: {info}")
    result = {"info": info, "train": [], "val": []}
    for cfg, img in configs:
        ms = time_round_robin(train_steps(cfg, opt.batch, img, opt.variants), opt.rounds, opt.iters, opt.warmup)
        result["train"].append({"cfg": cfg, "img": img, "batch": opt.batch, "rows": rows(ms)})
        print(f"\ntraining step {cfg} {img} px batch {opt.batch} (ms, median of {opt.rounds} blocks)")
        for r in rows(ms):
            print(f"  {r['variant']:<18}{r['ms']:>10.1f}{r['x_vs_fp32'] or '':>8}")
    cfgs = list(dict.fromkeys(c for c, _ in configs))
    for cfg in cfgs if opt.val_variants else []:
        ms = time_round_robin(val_forwards(cfg, opt.val_batch, opt.val_img, opt.val_variants), opt.rounds,
                              opt.iters, opt.warmup)
        result["val"].append({"cfg": cfg, "img": opt.val_img, "batch": opt.val_batch, "rows": rows(ms)})
        print(f"\nvalidation forward {cfg} {opt.val_img} px batch {opt.val_batch} (ms)")
        for r in rows(ms):
            print(f"  {r['variant']:<18}{r['ms']:>10.1f}{r['x_vs_fp32'] or '':>8}")
    print(f"wrote {write_result('cpu_levers', result, path=opt.json)}")
    return result


if __name__ == "__main__":
    main(parse_opt())
