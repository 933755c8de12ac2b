"""The loss's reads of the head maps: utils.backend.head_reads against plain indexing of an fp32 copy (PyTorch).

    python benchmarks/loss_reads.py                    # yolov5n 320 and yolov5s 640 level shapes, batch 16, bf16
    python benchmarks/loss_reads.py --dtype float32 --reps 20

ComputeLoss reads each level map's objectness channel and the rows of the cells its candidate matches point at.
Written as plain indexing of `pi.float()` (what the loss did before, and what OneFlow still runs), autograd makes
the map's gradient from full-size pieces; head_reads (utils/backend/torch_head_reads.py) writes it once. This times
the loss's forward and backward on random maps of the three levels (the trainer's dtype under CPU autocast: bf16)
with 200 random targets, alternating the two, median of --reps, and checks that the loss and the map gradients are
equal to the bit. It runs in the trainer's deterministic mode: outside it, the loss's write of objectness targets
where candidates share a cell (tobj[slot] = score) is a parallel scatter whose last writer varies, so two runs of
either formulation can differ. Writes benchmarks/results/loss_reads_<time>.json (or --json).
"""
import argparse
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

from benchmarks.results_io import command_line, write_result  # noqa: E402
from utils.backend import torch  # noqa: E402

CONFIGS = {"n320": ("yolov5n.yaml", 320), "s640": ("yolov5s.yaml", 640)}


def plain_reads(pi, idx):
    """The formulation before head_reads: indexing of the map's fp32 copy."""
    pf = pi.float()
    return pf[..., 4], pf.reshape(-1, pf.shape[-1]).index_select(0, idx)


def loss_case(cfg, img, batch, dtype, n_targets=200, seed=0):
    """(ComputeLoss of the model, level maps, targets): random maps of the model's level shapes."""
    import utils.loss as loss_module
    from models.yolo import Model
    from utils.yaml_files import read_yaml
    model = Model(str(ROOT / "models" / cfg))
    model.hyp = read_yaml(ROOT / "data" / "hyps" / "hyp.scratch-low.yaml")
    det = model.model[-1]
    g = torch.Generator().manual_seed(seed)
    maps = [torch.randn(batch, det.na, img // int(s), img // int(s), det.no, generator=g).to(dtype)
            for s in det.stride]
    targets = torch.cat([torch.randint(0, batch, (n_targets, 1), generator=g).float(),
                         torch.randint(0, det.nc, (n_targets, 1), generator=g).float(),
                         torch.rand(n_targets, 2, generator=g) * 0.8 + 0.1,
                         torch.rand(n_targets, 2, generator=g) * 0.3 + 0.02], 1)
    return loss_module.ComputeLoss(model), maps, targets


def run_loss(loss_fn, maps, targets, reads):
    """Forward and backward with the loss reading through `reads`; -> (loss, map gradients, seconds)."""
    import utils.loss as loss_module
    saved, loss_module.head_reads = loss_module.head_reads, reads
    try:
        p = [m.clone().requires_grad_() for m in maps]
        t0 = time.perf_counter()
        loss, _ = loss_fn(p, targets)
        loss.backward()
        return loss.detach(), [x.grad for x in p], time.perf_counter() - t0
    finally:
        loss_module.head_reads = saved


def measure(cfg, img, batch, dtype, reps, warmup=3):
    from utils.backend import head_reads
    loss_fn, maps, targets = loss_case(cfg, img, batch, dtype)
    ways = {"plain": plain_reads, "head_reads": head_reads}
    for _ in range(warmup):
        for reads in ways.values():
            run_loss(loss_fn, maps, targets, reads)
    times = {k: [] for k in ways}
    for _ in range(reps):
        for name, reads in ways.items():
            times[name].append(run_loss(loss_fn, maps, targets, reads)[2])
    (l0, g0, _), (l1, g1, _) = (run_loss(loss_fn, maps, targets, r) for r in ways.values())
    same = bool(torch.equal(l0, l1)) and all(torch.equal(a, b) for a, b in zip(g0, g1))
    ms = {k: round(statistics.median(v) * 1e3, 2) for k, v in times.items()}
    return {"cfg": cfg, "img": img, "batch": batch, "dtype": str(dtype).replace("torch.", ""),
            "levels": [list(m.shape) for m in maps], "ms": ms, "x": round(ms["plain"] / ms["head_reads"], 3),
            "bit_equal": same}


def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


def main(opt):
    from utils import backend
    from utils.log import LOGGER
    LOGGER.setLevel(logging.WARNING)
    backend.set_deterministic()  # as train.py runs its steps (and the objectness target writes need it: below)
    dtype = getattr(torch, opt.dtype)
    rows = []
    for name in opt.configs:
        cfg, img = CONFIGS[name]
        r = measure(cfg, img, opt.batch, dtype, opt.reps)
        rows.append(r)
        print(f"{name}: loss forward+backward plain {r['ms']['plain']} ms, head_reads {r['ms']['head_reads']} ms "
              f"({r['x']}x), bit-equal: {r['bit_equal']}")
    figures = {"rows": rows, "threads": torch.get_num_threads(), "command": command_line()}
    print(f"wrote {write_result('loss_reads', figures, path=opt.json)}")
    return rows


if __name__ == "__main__":
    main(parse_opt())
