"""Kernel launches and host-sync points of one training step, this project against the official ultralytics code.

    python benchmarks/launches.py                                   # this project only (flags on and off)
    python benchmarks/launches.py --ref ../yolov5-official --ref-python ../yolov5-official/.venv/bin/python \
        --json l.json

yolov5s, batch 16, 320 px, one full training step (forward, loss, backward, clip + optimizer step, EMA) after two
warm-up steps, fp32. Every non-view aten op dispatched is counted per stage (on a GPU each is a kernel launch or
an allocator call, and a yolov5s step at batch 16 is launch-bound), and so is every host-sync point (scalar reads,
nonzero and boolean-mask indexing, copies to the host); see benchmarks/dispatch_count.py for the rules. It runs on
the CPU and needs no GPU: where this project's code takes another branch on CUDA, the CUDA branch is counted:
* --bbox_iou_optim: the Triton CIoU kernel (utils/backend/torch_ciou_triton.py) runs in Triton's interpreter and
  each of its launches counts as one kernel;
* --multi_tensor_optimizer: the optimizer runs with fused=True (PyTorch's fused SGD, what optimizer_kwargs picks on
  CUDA; one multi-tensor op per parameter group), the EMA with its foreach ops.
The official step (benchmarks/official_step.py) runs in a subprocess with the official checkout's Python, so the two
codebases' `models` and `utils` packages never meet; it is counted with PyTorch's CPU defaults (the official
trainer's own CPU run) and with the defaults PyTorch takes for CUDA tensors (foreach clip and SGD: what a GPU run does).

--json writes the per-stage figures plus the totals official_launches (CPU defaults), official_launches_cuda,
project_launches (flags on), project_plain_launches and project_sync_points.
"""
import argparse
import contextlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if not (Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi")):
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported: its kernels then run on the CPU
os.environ.setdefault("YOLO_BACKEND", "torch")  # dispatch counting is a PyTorch feature

from benchmarks import dispatch_count as dc  # noqa: E402
from benchmarks.results_io import write_result  # noqa: E402

STAGES = dc.STAGES
READBACK_INTERVAL = 10  # the trainer's default on CUDA (utils/loss_readback.py); the counted step is not a read


# ----------------------------------------------------------------------------------------------------------------
# this project
class _CountedTriton:
    """Stands in for a Triton kernel object: ``kernel[grid](...)`` runs the real kernel (in the interpreter on a
    CPU machine) uncounted, and counts one launch."""

    def __init__(self, kernel, name, state):
        self.kernel, self.name, self.state = kernel, name, state

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            counter = self.state["counter"]
            with counter.paused():
                out = self.kernel[grid](*args, **kwargs)
            counter.add_kernels(f"triton:{self.name}")
            return out
        return launch


@contextlib.contextmanager
def cuda_branches(state):
    """Route the project's CUDA-only branches onto the CPU for counting: CIoU through the Triton kernel (chosen when
    the loss is built, launched and counted in the step)."""
    import utils.backend.torch_ciou_triton as ct
    from utils import backend
    saved = backend.fused_ciou, ct._ciou_fwd, ct._ciou_bwd
    backend.fused_ciou = lambda device: ("triton", ct.ciou_triton)  # what the loss chooses on CUDA
    ct._ciou_fwd = _CountedTriton(saved[1], "_ciou_fwd", state)
    ct._ciou_bwd = _CountedTriton(saved[2], "_ciou_bwd", state)
    try:
        yield
    finally:
        backend.fused_ciou, ct._ciou_fwd, ct._ciou_bwd = saved


def project_step(cfg="yolov5s.yaml", bs=16, img=320, flags=True):
    """The step of utils/engine/loop.py (TrainLoop.run_step + optimizer_step) built from the same pieces; returns
    step(counter)."""
    import yaml
    from models.yolo import DetectionModel
    from utils.backend import clip_grad_norm_, torch
    from utils.loss import ComputeLoss
    from utils.loss_readback import LossReadback
    from utils.torch_utils import ModelEMA, smart_optimizer
    from utils.engine.hyp import scale_hyp
    torch.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()):
        model = DetectionModel(str(ROOT / "models" / cfg)).train()
    det = model.model[-1]
    with open(ROOT / "data" / "hyps" / "hyp.scratch-low.yaml") as f:
        hyp = scale_hyp(yaml.safe_load(f), det.nl, det.nc, img)
    model.hyp = hyp
    accumulate = max(round(64 / bs), 1)
    hyp["weight_decay"] *= bs * accumulate / 64
    state = {"counter": None, "i": 0}
    with (cuda_branches(state) if flags else contextlib.nullcontext()):
        compute_loss = ComputeLoss(model, fused_iou=flags)
    optimizer = smart_optimizer(model, "SGD", hyp["lr0"], hyp["momentum"], hyp["weight_decay"], fused=flags)
    if flags:  # the CUDA choice of backend.optimizer_kwargs: PyTorch's fused kernels
        for g in optimizer.param_groups:
            g.update(fused=True, foreach=False)
    ema = ModelEMA(model, fused=flags)
    readback = LossReadback(torch.device("cpu"), interval=READBACK_INTERVAL)
    imgs_u8, targets = dc.synthetic_batch(bs, img)

    def step(c):
        state["counter"] = c
        imgs = imgs_u8.float() / 255
        with (cuda_branches(state) if flags else contextlib.nullcontext()):
            with c.stage("forward"):
                pred = model(imgs)
            with c.stage("loss"):
                loss, loss_items = compute_loss(pred, targets)
                readback.add(state["i"], loss_items, loss)  # the trainer's per-step record (two copies)
                if readback.due(state["i"], 10 ** 9):  # a read every READBACK_INTERVAL steps, not in the counted one
                    readback.read()
                state["i"] += 1
            with c.stage("backward"):
                loss.backward()
        with c.stage("optimizer"):
            clip_grad_norm_([p for p in model.parameters() if p.grad is not None], 10.0, fused=flags)
            optimizer.step()
            optimizer.zero_grad()
        with c.stage("ema"):
            ema.update(model)
    return step


def count_project(flags, cfg, bs, img):
    from utils.log import LOGGER
    LOGGER.setLevel(logging.WARNING)
    r = dc.count_step(project_step(cfg, bs, img, flags))
    r.update(code="project", flags=flags, cfg=cfg, batch=bs, img=img, amp=False)
    return r


# ----------------------------------------------------------------------------------------------------------------
# the official code
REF_HELP = ("--ref: an official ultralytics/yolov5 checkout with its own environment, e.g.\n"
            "  git clone https://github.com/ultralytics/yolov5 ../yolov5-official\n"
            "  python -m venv ../yolov5-official/.venv\n"
            "  ../yolov5-official/.venv/bin/pip install -r ../yolov5-official/requirements.txt\n"
            "then: python benchmarks/launches.py --ref ../yolov5-official "
            "--ref-python ../yolov5-official/.venv/bin/python")


def count_official(ref, ref_python, cfg, bs, img, cuda_defaults):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "official.json"
        cmd = [ref_python, str(ROOT / "benchmarks" / "official_step.py"), "--ref", str(ref), "--json", str(out),
               "--cfg", cfg, "--batch", str(bs), "--img", str(img)] + (["--cuda-defaults"] if cuda_defaults else [])
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "YOLO_BACKEND")}
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        if p.returncode:
            raise RuntimeError(f"official step failed ({p.returncode}): {p.stderr[-2000:]}")
        return json.loads(out.read_text())


def default_ref_python(ref):
    for cand in (Path(ref).parent / "venv" / "bin" / "python", Path(ref) / ".venv" / "bin" / "python",
                 Path(ref) / "venv" / "bin" / "python"):
        if cand.exists():
            return str(cand)
    return sys.executable


# ----------------------------------------------------------------------------------------------------------------
def table(columns):
    """columns: {label: summary}. One row per stage, then totals and sync points."""
    labels = list(columns)
    lines = [f"{'stage':<12}" + "".join(f"{x:>26}" for x in labels)]
    for s in STAGES:
        lines.append(f"{s:<12}" + "".join(f"{columns[k]['stages'][s]['launches']:>26,}" for k in labels))
    lines.append(f"{'total':<12}" + "".join(f"{columns[k]['launches']:>26,}" for k in labels))
    lines.append(f"{'host syncs':<12}" + "".join(f"{columns[k]['syncs']:>26}" for k in labels))
    lines.append(f"{'host data':<12}" + "".join(f"{columns[k]['host_data']:>26}" for k in labels))
    return "\n".join(lines)


def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ref", default=None, help="official ultralytics/yolov5 checkout (skipped without it)")
    p.add_argument("--ref-python", default=None, help="its Python (default: ../venv/bin/python beside it, if any)")
    p.add_argument("--json", default=None, help="results file (default: a new one in benchmarks/results/)")
    p.add_argument("--cfg", default="yolov5s.yaml")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--img", type=int, default=320)
    p.add_argument("--no-plain", action="store_true", help="skip the flags-off count of this project")
    return p.parse_args(argv)


def main(opt):
    columns, result = {}, {"cfg": opt.cfg, "batch": opt.batch, "img": opt.img, "amp": False}
    if opt.ref:
        if not (Path(opt.ref) / "models" / "yolo.py").is_file():
            print(f"--ref {opt.ref} is not an ultralytics/yolov5 checkout (no models/yolo.py).\n{REF_HELP}",
                  file=sys.stderr)
            return 2
        ref_python = opt.ref_python or default_ref_python(opt.ref)
        columns["official (CPU defaults)"] = result["official"] = count_official(
            opt.ref, ref_python, opt.cfg, opt.batch, opt.img, cuda_defaults=False)
        columns["official (CUDA defaults)"] = result["official_cuda"] = count_official(
            opt.ref, ref_python, opt.cfg, opt.batch, opt.img, cuda_defaults=True)
    else:
        print(f"official code: skipped (no --ref). {REF_HELP}\n")
    if not opt.no_plain:
        columns["project plain"] = result["project_plain"] = count_project(False, opt.cfg, opt.batch, opt.img)
    columns["project flags"] = result["project"] = count_project(True, opt.cfg, opt.batch, opt.img)

    print(f"launches (non-view aten ops) and host-sync points per training step: {opt.cfg}, batch {opt.batch}, "
          f"{opt.img} px, fp32")
    print(table(columns))
    for label, col in columns.items():
        kinds = {s: v["sync_kinds"] for s, v in col["stages"].items() if v["sync_kinds"]}
        if kinds:
            print(f"  {label} sync points: {kinds}")
    p = result["project"]
    result.update(project_launches=p["launches"], project_sync_points=p["syncs"],
                  project_loss_readback_every=READBACK_INTERVAL)
    print(f"  project: plus one host sync every {READBACK_INTERVAL} steps to read the losses back (official: every "
          "step, for its progress bar)")
    if "project_plain" in result:
        result["project_plain_launches"] = result["project_plain"]["launches"]
    if "official" in result:
        o, oc = result["official"]["launches"], result["official_cuda"]["launches"]
        result.update(official_launches=o, official_launches_cuda=oc, official_sync_points=result["official"]["syncs"],
                      project_vs_official=p["launches"] / o, project_vs_official_cuda=p["launches"] / oc)
        print(f"project (flags) / official: {p['launches'] / o:.3f} (CPU defaults), {p['launches'] / oc:.3f} "
              "(CUDA defaults)")
    print(f"wrote {write_result('launches', result, path=opt.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(parse_opt()))
