"""A CPU training step's BatchNorm + SiLU as one C kernel against PyTorch's kernels, per layer and per whole step.

    python benchmarks/bn_silu.py                                            # yolov5s 640, batch 16
    eval "$(python benchmarks/cpu_hold.py avx2)"; python benchmarks/bn_silu.py     # an AVX2-only CPU's kernels
    python benchmarks/bn_silu.py --cfg yolov5n.yaml --img 320
    python benchmarks/bn_silu.py --amp                                      # bf16 autocast (native-bf16 CPUs)

The kernel (utils/native/bn_silu.c through utils/backend/torch_bn_silu.py) runs every Conv's BatchNorm (training
statistics) and SiLU of a channels-last CPU step in one forward pass and one backward pair of passes, over fp32
activations or, under bf16 autocast (--amp, the trainer's default where the CPU computes bf16), bf16 ones.

  layers  each Conv's BatchNorm + SiLU alone at its real output shape (random data): forward and backward through
          the modules (PyTorch's kernels) against the kernel; best of --reps calls each, alternating.
  step    forward and backward of the whole model (train mode, channels_last batch, a sum-of-squares loss) with
          YOLO_FUSED_BN_SILU=0 and with the kernel, alternating, median of --reps.

Writes benchmarks/results/bn_silu_<time>.json (or --json) with the instruction-set caps in effect.
"""
import argparse
import contextlib
import logging
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("YOLO_BACKEND", "torch")

from benchmarks.conv_grad import best_ms, build, step_medians  # noqa: E402
from benchmarks.results_io import cpu_caps, write_result  # noqa: E402
from utils.backend import torch  # noqa: E402
from utils.backend.torch_bn_silu import bn_silu, kernel_library  # noqa: E402  (the kernel, PyTorch only)

POLICIES = ("modules", "kernel")


@contextlib.contextmanager
def policy(name, amp=False):
    """The trainer's setting for one policy (modules = YOLO_FUSED_BN_SILU=0), under bf16 autocast with amp."""
    old = os.environ.get("YOLO_FUSED_BN_SILU")
    os.environ["YOLO_FUSED_BN_SILU"] = "0" if name == "modules" else "1"
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            yield
    finally:
        if old is None:
            os.environ.pop("YOLO_FUSED_BN_SILU")
        else:
            os.environ["YOLO_FUSED_BN_SILU"] = old


def bn_shapes(model, convs, x):
    """Distinct (BatchNorm input shape) of the model's Conv layers, with how many layers have each, forward order."""
    counts = {}
    hooks = [c.conv.register_forward_hook(lambda m, i, o: counts.__setitem__(tuple(o.shape),
                                                                            counts.get(tuple(o.shape), 0) + 1))
             for c in convs]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return list(counts.items())


def layer_rows(shapes, reps, dtype=torch.float32):
    rows = []
    for shape, count in shapes:
        bn, act = torch.nn.BatchNorm2d(shape[1], eps=1e-3, momentum=0.03), torch.nn.SiLU()
        x = torch.randn(shape).to(dtype).contiguous(memory_format=torch.channels_last).requires_grad_()
        g = torch.randn(shape).to(dtype).contiguous(memory_format=torch.channels_last)
        ms = {}
        for name in POLICIES * 2:  # alternating, the best of both rounds
            with policy(name):
                t = best_ms(lambda: (setattr(x, "grad", None), bn_silu(bn, act, x).backward(g)), reps)
            ms[name] = min(t, ms.get(name, t))
        rows.append({"shape": list(shape), "layers": count, "modules_ms": round(ms["modules"], 2),
                     "kernel_ms": round(ms["kernel"], 2), "x": round(ms["modules"] / ms["kernel"], 3)})
    return rows


def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cfg", default="yolov5s.yaml")
    p.add_argument("--img", type=int, default=640)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--amp", action="store_true", help="bf16 autocast: bf16 activations (layers in bf16 too)")
    p.add_argument("--reps", type=int, default=5, help="steps per policy (layers: timed calls per layer and round)")
    p.add_argument("--no-layers", action="store_true", help="skip the per-layer table")
    p.add_argument("--json", default=None, help="results file (default: a new one in benchmarks/results/)")
    return p.parse_args(argv)


def main(opt):
    from utils.log import LOGGER
    LOGGER.setLevel(logging.WARNING)
    if kernel_library() is None:
        sys.exit("bn_silu.py: the kernel cannot be built here (no C compiler?): nothing to compare")
    model, convs = build(opt.cfg)
    x = torch.rand(opt.batch, 3, opt.img, opt.img).contiguous(memory_format=torch.channels_last)
    result = {"cfg": opt.cfg, "img": opt.img, "batch": opt.batch, "threads": torch.get_num_threads(),
              "amp": "bf16" if opt.amp else None, "isa_env": cpu_caps(), "layers": [], "step": {}}
    if not opt.no_layers:
        result["layers"] = layer_rows(bn_shapes(model, convs, x), opt.reps,
                                      torch.bfloat16 if opt.amp else torch.float32)
        print(f"{'BatchNorm input':>22} layers  modules ms  kernel ms      x")
        for r in result["layers"]:
            print(f"{str(tuple(r['shape'])):>22} {r['layers']:>6}{r['modules_ms']:>12.2f}{r['kernel_ms']:>11.2f}"
                  f"{r['x']:>7.2f}")
        total = {k: sum(r[f"{k}_ms"] * r["layers"] for r in result["layers"]) for k in POLICIES}
        result["layers_total_ms"] = {k: round(v, 1) for k, v in total.items()}
        print(f"{'all layers':>22} {'':>6}{total['modules']:>12.1f}{total['kernel']:>11.1f}"
              f"{total['modules'] / total['kernel']:>7.2f}")
    result["step"] = step_medians(model, x, POLICIES, opt.reps, policy_of=lambda name: policy(name, opt.amp))
    base = result["step"]["modules"]["median_ms"]
    print(f"\nforward + backward, {opt.cfg} {opt.img} px batch {opt.batch}{' bf16 autocast' if opt.amp else ''} "
          f"(median of {opt.reps}, alternating)")
    for n, s in result["step"].items():
        print(f"  {n:<10}{s['median_ms']:>10.1f} ms  {base / s['median_ms']:.3f}x against modules")
    print(f"wrote {write_result('bn_silu', result, path=opt.json)}")
    return result


if __name__ == "__main__":
    main(parse_opt())
