"""A CPU training step's 3x3 convolution weight gradients from NCHW copies, per layer and per whole step.

    python benchmarks/conv_grad.py                                         # yolov5s 640, batch 16
    eval "$(python benchmarks/cpu_hold.py avx2)"; python benchmarks/conv_grad.py   # an AVX2-only CPU's kernels
    python benchmarks/conv_grad.py --cfg yolov5n.yaml --img 320 --no-layers --reps 12

Training feeds channels_last batches on the CPU (channels_last_pays). Where oneDNN has no AVX-512 kernels (AMD Zen 3,
or oneDNN held to AVX2 as above) its channels_last weight gradient of a 3x3 convolution takes another path than the
NCHW one. The split (utils/backend/torch_conv_grad.py): compute only that gradient from NCHW copies of the input and
the output gradient (the forward and the input gradient stay channels_last). The trainer uses it where oneDNN runs
AVX2 kernels, for layers of at least MIN_WEIGHT_GRAD_FLOPS whose input needs a gradient; the per-layer table here is
what that threshold was read from. On a 2-core AMD Zen 4 with oneDNN held to AVX2 (conv_grad_20261128T2115Z_*,
conv_grad_20261129T*): every 3x3 of yolov5s 640 faster (1.03x-1.39x, steps 1.03x-1.08x), most of yolov5n 320's slower
(0.65x-1.14x, steps 0.95x-0.97x) and the image batch's first convolution 0.6x; with the AVX-512 kernels yolov5s 640
steps 0.94x-0.96x.

  layers  each 3x3 (or larger) convolution of the model alone (its real input shape, random data): the input and
          weight gradients in one channels_last call, against the input gradient in channels_last plus the weight
          gradient from NCHW copies (copies included); best of --reps / 2 calls.
  step    forward and backward of the whole model (train mode, channels_last batch, a sum-of-squares loss) under
          each policy, alternating, median of --reps: native (oneDNN's channels_last everywhere), nchw (the split
          for inputs of at most MAX_PIXELS pixels, whose copies are cheap), nchw-all (every 3x3), trainer (the
          trainer's rule, on whatever the CPU).

Writes benchmarks/results/conv_grad_<time>.json (or --json) with the instruction-set caps in effect.
"""
import argparse
import contextlib
import logging
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("YOLO_BACKEND", "torch")

from benchmarks.results_io import cpu_caps, write_result  # noqa: E402
from utils.backend import bn_silu, torch  # noqa: E402
from utils.backend.torch_conv_grad import ConvNCHWWeightGrad  # noqa: E402  (the trainer's split, PyTorch only)

F = torch.nn.functional
# Inputs up to 80x80 pixels (yolov5s 640: every 3x3 from the third stage on), whose copies are cheap. Above it the
# transposed copy of a 16x32x320x320 batch (210 MB, into a fresh buffer) took about 0.2 s in a training step's
# profile, near what the faster gradient saves; nchw-all measures whether the large layers gain anyway.
MAX_PIXELS = 80 * 80
# policy -> largest input (pixels) the benchmark's own split applies to; "trainer": none of its own, the trainer's
# rule (utils/backend/torch_conv_grad.py) turned on whatever the CPU; every other policy runs with the trainer's off
POLICIES = {"native": None, "nchw": MAX_PIXELS, "nchw-all": 1 << 40, "trainer": None}


def lever_applies(conv, x, max_pixels):
    return (conv.kernel_size != (1, 1) and conv.bias is None and isinstance(conv.padding, tuple)
            and x.shape[2] * x.shape[3] <= max_pixels and x.is_contiguous(memory_format=torch.channels_last))


@contextlib.contextmanager
def policy(name):
    """models.common.Conv.forward and YOLO_NCHW_WEIGHT_GRAD under one policy (both restored afterwards)."""
    from models.common import Conv
    max_pixels, plain = POLICIES[name], Conv.forward
    setting = os.environ.get("YOLO_NCHW_WEIGHT_GRAD")
    os.environ["YOLO_NCHW_WEIGHT_GRAD"] = "1" if name == "trainer" else "0"

    def forward(self, x):
        c = self.conv
        if max_pixels and torch.is_grad_enabled() and lever_applies(c, x, max_pixels):
            return bn_silu(self.bn, self.act, ConvNCHWWeightGrad.apply(x, c.weight, c.stride, c.padding, c.dilation,
                                                                       c.groups))
        return plain(self, x)

    Conv.forward = forward
    try:
        yield
    finally:
        Conv.forward = plain
        if setting is None:
            os.environ.pop("YOLO_NCHW_WEIGHT_GRAD", None)
        else:
            os.environ["YOLO_NCHW_WEIGHT_GRAD"] = setting


def build(cfg):
    from models.common import Conv
    from models.yolo import Model
    torch.manual_seed(0)
    model = Model(str(ROOT / "models" / cfg), ch=3, nc=80).train()
    return model, [m for m in model.modules() if isinstance(m, Conv)]


def conv_inputs(model, convs, x):
    """[(input shape, nn.Conv2d)] of each Conv in forward order."""
    seen = []
    hooks = [c.register_forward_hook(lambda m, i, o: seen.append((tuple(i[0].shape), m.conv))) for c in convs]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return seen


def best_ms(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def layer_rows(shapes, reps):
    rows = []
    for shape, conv in shapes:
        if conv.kernel_size == (1, 1):
            continue
        x = torch.randn(shape).contiguous(memory_format=torch.channels_last)
        w = conv.weight.detach()
        conf = (list(conv.stride), list(conv.padding), list(conv.dilation), False, [0, 0], conv.groups)
        g = torch.randn_like(torch.nn.functional.conv2d(x, w, None, *conf[:3], conf[5]))
        need_x = shape[1] != 3  # the image batch needs no gradient

        def grads(g, x, mask):
            return torch.ops.aten.convolution_backward(g, x, w, None, *conf, mask)

        native = best_ms(lambda: grads(g, x, [need_x, True, False]), reps)
        split = best_ms(lambda: (need_x and grads(g, x, [True, False, False]),
                                 grads(g.contiguous(), x.contiguous(), [False, True, False])), reps)
        rows.append({"input": list(shape), "weight": list(w.shape), "stride": list(conv.stride),
                     "native_ms": round(native, 1), "nchw_ms": round(split, 1), "x": round(native / split, 3)})
    return rows


def step_medians(model, x, names, reps, policy_of=None):
    """{policy name: median and every ms} of forward + backward steps under each policy (policy_of(name): its
    context manager, this benchmark's policy by default), alternating after one warm-up step each."""
    policy_of = policy_of or policy

    def step():
        loss = sum(o.float().square().mean() for o in model(x))
        loss.backward()
        model.zero_grad(set_to_none=True)

    times = {n: [] for n in names}
    for n in names:  # one warm-up step each
        with policy_of(n):
            step()
    for _ in range(reps):
        for n in names:
            with policy_of(n):
                t0 = time.perf_counter()
                step()
                times[n].append((time.perf_counter() - t0) * 1e3)
    return {n: {"median_ms": round(statistics.median(v), 1), "ms": [round(t, 1) for t in v]} for n, v in times.items()}


def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cfg", default="yolov5s.yaml")
    p.add_argument("--img", type=int, default=640)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--reps", type=int, default=5, help="steps per policy (layers: timed calls per layer)")
    p.add_argument("--policies", nargs="+", default=list(POLICIES), choices=list(POLICIES))
    p.add_argument("--no-layers", action="store_true", help="skip the per-layer table")
    p.add_argument("--json", default=None, help="results file (default: a new one in benchmarks/results/)")
    return p.parse_args(argv)


def main(opt):
    from utils.log import LOGGER
    LOGGER.setLevel(logging.WARNING)
    model, convs = build(opt.cfg)
    x = torch.rand(opt.batch, 3, opt.img, opt.img).contiguous(memory_format=torch.channels_last)
    isa = cpu_caps()  # the instruction-set caps in effect (the run record carries them too)
    result = {"cfg": opt.cfg, "img": opt.img, "batch": opt.batch, "threads": torch.get_num_threads(), "isa_env": isa,
              "max_pixels": MAX_PIXELS, "layers": [], "step": {}}
    if not opt.no_layers:
        result["layers"] = layer_rows(conv_inputs(model, convs, x), max(2, opt.reps // 2))
        print(f"{'input':>22} {'weight':>18} stride  native ms  nchw ms      x")
        for r in result["layers"]:
            print(f"{str(tuple(r['input'])):>22} {str(tuple(r['weight'])):>18} {r['stride'][0]:>6}"
                  f"{r['native_ms']:>11.1f}{r['nchw_ms']:>9.1f}{r['x']:>7.2f}")
    result["step"] = step_medians(model, x, opt.policies, opt.reps)
    base = result["step"].get("native", {}).get("median_ms")
    print(f"\nforward + backward, {opt.cfg} {opt.img} px batch {opt.batch} (median of {opt.reps}, alternating)")
    for n, s in result["step"].items():
        ratio = f"  {base / s['median_ms']:.3f}x against native" if base else ""
        print(f"  {n:<10}{s['median_ms']:>10.1f} ms{ratio}")
    print(f"wrote {write_result('conv_grad', result, path=opt.json)}")
    return result


if __name__ == "__main__":
    main(parse_opt())
