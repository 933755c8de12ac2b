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
import platform
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.results_io import command_line, write_result  # noqa: E402
from benchmarks.speed_kernels import bench_ciou, bench_ema_optim, bench_upsample  # noqa: E402
from benchmarks.speed_steps import bench_step_pair, bench_step_variants  # noqa: E402
from utils import backend  # noqa: E402
from utils.backend import torch  # noqa: E402


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


def _sizes(opt, dev):
    """What each section measures: the defaults of a CUDA run, or of a CPU-sized one with --small."""
    small = opt.small
    return SimpleNamespace(
        small=small, cuda=backend.is_cuda(dev), cfg=opt.cfg or ("yolov5n.yaml" if small else "yolov5s.yaml"),
        batches=opt.batch or ([2] if small else [16, 64]), img=opt.img or (256 if small else 640),
        counts=[int(c) for c in (opt.boxes or ([1e3, 1e4, 1e5] if small else [1e3, 1e4, 1e5, 1e6]))],
        iters=opt.iters or (5 if small else 20), warmup=3 if small else 10)


def _run_info(dev):
    cuda = backend.is_cuda(dev)
    gpu = torch.cuda.get_device_name(0) if cuda and hasattr(torch.cuda, "get_device_name") else None
    return {"backend": backend.BACKEND, "version": backend.VERSION, "device": str(dev), "gpu": gpu,
            "cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads()
            if hasattr(torch, "get_num_threads") else None, "python": platform.python_version(),
            "command": command_line(),
            "time": time.strftime("%Y-%m-%d %H:%M:%S")}


def ciou_section(result, dev, size, opt):
    result["ciou_fwd_bwd_ms"] = bench_ciou(dev, size.counts, size.iters)
    print_table("CIoU forward+backward (ms)", result["ciou_fwd_bwd_ms"])


def ema_section(result, dev, size, opt):
    result["ema_optimizer_ms"] = bench_ema_optim(size.cfg, dev, size.iters)
    print_table(f"EMA update and optimizer step, {size.cfg} (ms)", [result["ema_optimizer_ms"]])


def upsample_section(result, dev, size, opt):
    shapes = [(2, 32, 40, 40), (2, 128, 16, 16)] if size.small else [(16, 32, 80, 80), (16, 256, 20, 20),
                                                                     (16, 128, 40, 40), (64, 128, 40, 40)]
    result["upsample"] = bench_upsample(dev, shapes, size.iters, bw_numel=(1 << 22) if size.small else (1 << 26))
    print_table("nn.Upsample(2, nearest) fp32 vs bandwidth floor", result["upsample"])
    worst = max(r["x_floor"] for r in result["upsample"])
    result["upsample_decision"] = (
        ("needs a specialised kernel (> 1.5x the floor)" if worst > 1.5 else "framework kernel is within 1.5x")
        if size.cuda else "decision needs a CUDA run (the 1.5x rule applies to the GPU kernel)")
    print(f"upsample: worst {worst:.2f}x the floor -> {result['upsample_decision']}")


def step_section(result, dev, size, opt):
    rows, cfg = [], size.cfg
    for bs in size.batches:
        for amp in ([False, True] if backend.has_amp(dev) else [False]):
            pair = bench_step_pair(cfg, bs, size.img, dev, amp, iters=size.iters, warmup=size.warmup)
            rows += pair
            print(f"  step {cfg} bs{bs} {size.img} {'AMP' if amp else 'FP32'}: flags off "
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


def variants_section(result, dev, size, opt):
    result["train_step_variants"] = []
    for bs in size.batches[:1]:  # the seed's headline batch (16 on a GPU)
        result["train_step_variants"] += bench_step_variants(size.cfg, bs, size.img, dev, iters=size.iters,
                                                             warmup=size.warmup, names=opt.variants)
    print_table(f"training step variants beyond the seed, {size.cfg} (ms, end to end)", result["train_step_variants"])


# the sections in the order they run and write their keys into the JSON
SECTIONS = {"ciou": ciou_section, "ema": ema_section, "upsample": upsample_section, "step": step_section,
            "variants": variants_section}


def main(opt):
    from utils.log import LOGGER  # imported first: it sets its own level at import
    LOGGER.setLevel(logging.WARNING)  # model summaries and optimizer lines would flood the table
    dev = backend.select_device(opt.device)
    if opt.threads and hasattr(torch, "set_num_threads"):
        torch.set_num_threads(opt.threads)
    size = _sizes(opt, dev)
    info = _run_info(dev)
    print(f"speed benchmark: {info}")
    result = {"info": info}
    for name, section in SECTIONS.items():
        if name in opt.sections:
            section(result, dev, size, opt)
    out = write_result("speed", result, path=opt.json, tag=f"{backend.BACKEND}_{dev.type}", gpu=info["gpu"],
                       default=float)
    print(f"\nwrote {out}")
    return result


if __name__ == "__main__":
    main(parse_opt())
