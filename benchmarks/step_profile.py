"""Where one CPU training step's time goes, this project's against the official one: a per-operator profile
(torch.profiler) of real training steps, grouped, with a printed table and a results file.

    python benchmarks/step_profile.py --ref ../yolov5-official                       # yolov5n at 320, both sides
    python benchmarks/step_profile.py --ref ../yolov5-official --cfg yolov5s.yaml --img 640
    python benchmarks/step_profile.py --json out.json                                # this project's side alone
    python benchmarks/step_profile.py --ref ../yolov5-official --amp --cfg yolov5s.yaml --img 640   # bf16 autocast

Each side runs in its own process (the official one with --ref-python, default ../venv/bin/python beside the
checkout, so its `models`/`utils` packages never meet this project's), on the CPU, from the model YAML (from scratch,
80 classes), batch --batch, on a writable copy of coco128 read by that codebase's own training loader (mosaic and the
other augmentations of hyp.scratch-low.yaml, --workers processes). After --warmup steps, --steps steps are timed
without the profiler (wall ms per step), then the same number profiled. A step is what each train.py does on the
CPU in fp32 (--amp: this project's forward and loss under bf16 autocast, its default on CPUs that compute bf16
natively; the official trainer has no CPU autocast): the next batch from the loader (data wait) and uint8 -> float
(this project: channels_last input, its CPU default), forward, loss, backward, then the optimizer (unscale, clip at 10, step, zero_grad) and the EMA update,
both every step here (the trainers run them every 64 / batch steps: `amortised_ms` counts them that way).

Groups, per step, in ms of the operators' own (self) CPU time: data wait; forward convolution, BatchNorm,
activation and other operators; loss; backward convolution, BatchNorm, activation and other (the loss's backward
included); optimizer; EMA; and python/dispatch overhead (a phase's wall time not spent inside any operator). The
results file (benchmarks/results/step_profile_<time>.json unless --json) holds each side's groups, phase wall times,
top operators and the ratio official / project per group.
"""
import argparse
import bisect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared"
PHASES = ("data", "forward", "loss", "backward", "optimizer", "ema")
OP_KINDS = (  # (group, substrings of a lower-cased operator name), first match wins
    ("convolution", ("conv",)),
    ("batchnorm", ("batch_norm", "batchnorm")),
    ("activation", ("silu", "sigmoid", "relu", "hardswish", "mish", "gelu")),
)
GROUP_ORDER = ("data wait", "forward: convolution", "forward: batchnorm", "forward: activation", "forward: other",
               "loss", "backward: convolution", "backward: batchnorm", "backward: activation", "backward: other",
               "optimizer", "ema", "overhead")


# ----------------------------------------------------------------------------------------------------------------
# grouping (pure: tested without a profiler)
def op_kind(name):
    """convolution, batchnorm, activation or other, from an operator's name (aten ops and autograd nodes alike)."""
    low = name.lower()
    return next((group for group, keys in OP_KINDS if any(k in low for k in keys)), "other")


def group_of(phase, name):
    """The table group of an operator seen in a phase: phases data, loss, optimizer and ema are groups of their own;
    forward and backward are split by the kind of operator."""
    if phase == "data":
        return "data wait"
    if phase in ("forward", "backward"):
        return f"{phase}: {op_kind(name)}"
    return phase


def group_times(ops, phase_wall_us, steps):
    """ms per step of each group. ops: (phase, operator name, self CPU us) for every operator event inside a phase;
    phase_wall_us: {phase: wall us of its markers, all steps}. 'overhead' is phase wall time no operator accounts for
    (Python, dispatch, the profiler's own cost) outside the data wait (whose Python is the loader's)."""
    out = {g: 0.0 for g in GROUP_ORDER}
    inside = {p: 0.0 for p in PHASES}
    for phase, name, self_us in ops:
        out[group_of(phase, name)] += self_us
        inside[phase] += self_us
    out["data wait"] = phase_wall_us.get("data", 0.0)  # the wait itself, in or out of operators
    out["overhead"] = sum(max(phase_wall_us.get(p, 0.0) - inside[p], 0.0) for p in PHASES if p != "data")
    return {g: round(v / steps / 1e3, 3) for g, v in out.items()}


def top_ops(ops, steps, n=15):
    """The n operators of the most self time: [name, ms per step, calls per step]."""
    agg = {}
    for _, name, self_us in ops:
        t, c = agg.get(name, (0.0, 0))
        agg[name] = (t + self_us, c + 1)
    rows = sorted(agg.items(), key=lambda kv: -kv[1][0])[:n]
    return [[name, round(t / steps / 1e3, 3), round(c / steps, 1)] for name, (t, c) in rows]


# ----------------------------------------------------------------------------------------------------------------
# profiling one side (in its own process)
def profile_steps(step, warmup, steps):
    """Run step(phase) warmup times, time `steps` of them, then profile as many; phase(name) is a context maker."""
    import contextlib

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    for _ in range(warmup):
        step(lambda name: contextlib.nullcontext())
    t0 = time.perf_counter()
    for _ in range(steps):
        step(lambda name: contextlib.nullcontext())
    wall_ms = (time.perf_counter() - t0) / steps * 1e3
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step(lambda name: record_function(f"phase::{name}"))
    events = list(prof.events())
    markers = [(e.name.split("::", 1)[1], e.time_range.start, e.time_range.end) for e in events
               if e.name.startswith("phase::")]
    phase_wall = {}
    for name, a, b in markers:
        phase_wall[name] = phase_wall.get(name, 0.0) + (b - a)
    markers.sort(key=lambda m: m[1])
    starts = [m[1] for m in markers]
    ops = []
    for e in events:
        if e.name.startswith("phase::") or e.device_type != torch.autograd.DeviceType.CPU:
            continue
        i = bisect.bisect_right(starts, e.time_range.start) - 1
        if i >= 0 and e.time_range.start <= markers[i][2]:
            ops.append((markers[i][0], e.name, e.self_cpu_time_total))
    return {"wall_ms_per_step": round(wall_ms, 2), "groups_ms": group_times(ops, phase_wall, steps),
            "phase_wall_ms": {p: round(phase_wall.get(p, 0.0) / steps / 1e3, 3) for p in PHASES},
            "top_ops": top_ops(ops, steps), "threads": torch.get_num_threads(), "torch": torch.__version__}


def batch_source(loader):
    """next() over a loader, epoch after epoch."""
    it = iter(loader)

    def next_batch():
        nonlocal it
        try:
            return next(it)
        except StopIteration:
            it = iter(loader)
            return next(it)
    return next_batch


def project_side(opt):
    sys.path.insert(0, str(ROOT))
    from benchmarks.speed_steps import _hyp, _training_parts
    from utils import backend
    from utils.backend import clip_grad_norm_, torch
    from utils.data.loader import create_dataloader
    from utils.log import LOGGER
    LOGGER.setLevel("WARNING")
    dev = torch.device("cpu")
    model, compute_loss, optimizer, ema, accumulate = _training_parts(opt.cfg, opt.batch, opt.img, dev, False, False)
    channels_last = backend.channels_last_pays(dev, None)  # train.py's CPU default: channels_last input
    loader, _ = create_dataloader(opt.images, opt.img, opt.batch, 32, hyp=_hyp(3, 80, opt.img), augment=True,
                                  workers=opt.workers, shuffle=True, seed=0)
    next_batch = batch_source(loader)
    scaler = backend.grad_scaler(dev, enabled=False)

    def step(phase):
        with phase("data"):
            imgs, targets = next_batch()[:2]
            imgs = imgs.to(dev).float() / 255
            if channels_last:
                imgs = backend.to_channels_last(imgs)
        with phase("forward"), backend.autocast(dev, enabled=opt.amp, dtype=torch.bfloat16):
            pred = model(imgs)
        with phase("loss"), backend.autocast(dev, enabled=opt.amp, dtype=torch.bfloat16):
            loss, _ = compute_loss(pred, targets.to(dev))
        with phase("backward"):
            scaler.scale(loss).backward()
        with phase("optimizer"):
            scaler.unscale_(optimizer)
            clip_grad_norm_(model.parameters(), 10.0, fused=False)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        with phase("ema"):
            ema.update(model)
    return step, accumulate


def official_side(opt):
    import contextlib
    import io

    ref = str(Path(opt.ref).resolve())
    sys.path = [ref] + [x for x in sys.path if x not in (str(HERE), "")]  # the official `utils` must win
    os.chdir(ref)
    import torch
    import yaml
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        from models.yolo import Model
        from utils.dataloaders import create_dataloader
        from utils.loss import ComputeLoss
        from utils.torch_utils import ModelEMA, smart_optimizer
    with open(Path(ref) / "data" / "hyps" / "hyp.scratch-low.yaml") as f:
        hyp = yaml.safe_load(f)
    torch.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        model = Model(str(Path(ref) / "models" / opt.cfg), ch=3, nc=80).train()
    nl = model.model[-1].nl  # as the official train.py scales its loss gains
    hyp["box"] *= 3 / nl
    hyp["cls"] *= 3 / nl
    hyp["obj"] *= (opt.img / 640) ** 2 * 3 / nl
    hyp["label_smoothing"] = 0.0
    accumulate = max(round(64 / opt.batch), 1)
    hyp["weight_decay"] *= opt.batch * accumulate / 64
    model.nc, model.hyp = 80, hyp
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        compute_loss = ComputeLoss(model)
        optimizer = smart_optimizer(model, "SGD", hyp["lr0"], hyp["momentum"], hyp["weight_decay"])
        ema = ModelEMA(model)
        loader, _ = create_dataloader(opt.images, opt.img, opt.batch, 32, hyp=hyp, augment=True,
                                      workers=opt.workers, shuffle=True, seed=0)
    scaler = torch.amp.GradScaler("cuda", enabled=False)  # what its train.py makes on the CPU
    next_batch = batch_source(loader)
    state = {"i": 0, "mloss": torch.zeros(3)}

    def step(phase):
        with phase("data"):
            imgs, targets = next_batch()[:2]
            imgs = imgs.float() / 255
        with phase("forward"):
            pred = model(imgs)
        with phase("loss"):
            loss, loss_items = compute_loss(pred, targets)
        with phase("backward"):
            scaler.scale(loss).backward()
        with phase("optimizer"):
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        with phase("ema"):
            ema.update(model)
        i = state["i"]
        state["mloss"] = (state["mloss"] * i + loss_items) / (i + 1)  # its progress bar's running mean
        state["i"] += 1
    return step, accumulate


def measure_side(opt):
    step, accumulate = (project_side if opt.side == "project" else official_side)(opt)
    out = profile_steps(step, opt.warmup, opt.steps)
    g = out["groups_ms"]
    every_step = sum(v for k, v in g.items() if k not in ("optimizer", "ema"))
    out.update(side=opt.side, cfg=opt.cfg, img=opt.img, batch=opt.batch, workers=opt.workers, accumulate=accumulate,
               amp="bf16" if opt.amp and opt.side == "project" else None,
               amortised_ms=round(every_step + (g["optimizer"] + g["ema"]) / accumulate, 3))
    Path(opt.json).write_text(json.dumps(out, indent=1))
    return 0


# ----------------------------------------------------------------------------------------------------------------
# both sides, from this project's Python
def print_table(sides):
    names = list(sides)
    print(f"\none training step on the CPU, ms per step (operators' self time), {'  /  '.join(names)}")
    print(f"{'group':<24}" + "".join(f"{n:>12}" for n in names) + ("   official/project" if len(names) == 2 else ""))
    for g in GROUP_ORDER + ("wall_ms_per_step", "amortised_ms"):
        vals = [sides[n]["groups_ms"][g] if g in GROUP_ORDER else sides[n][g] for n in names]
        ratio = f"{vals[1] / vals[0]:>19.2f}" if len(vals) == 2 and vals[0] else ""
        print(f"{g:<24}" + "".join(f"{v:>12.1f}" for v in vals) + ratio)


def ratios(sides):
    if set(sides) != {"project", "official"}:
        return None
    p, o = sides["project"], sides["official"]
    out = {g: round(o["groups_ms"][g] / p["groups_ms"][g], 3) if p["groups_ms"][g] else None for g in GROUP_ORDER}
    for k in ("wall_ms_per_step", "amortised_ms"):
        out[k] = round(o[k] / p[k], 3) if p[k] else None
    return out


def run_both(opt):
    from benchmarks.compare_train import dataset_copy
    from benchmarks.results_io import write_result
    want = ["project"] + (["official"] if opt.ref else [])
    if not opt.ref:
        print("step_profile: the official side skipped: no --ref (the official checkout)")
    elif not Path(opt.ref_python).exists():
        print(f"step_profile: the official side skipped: no Python at {opt.ref_python} (--ref-python)")
        want = ["project"]
    sides = {}
    with tempfile.TemporaryDirectory(prefix="step_profile_") as tmp:
        tmp = Path(tmp)
        for side in want:
            dataset_copy(Path(opt.data), tmp / f"coco128_{side}")
            python = opt.python if side == "project" else opt.ref_python
            cmd = [python, str(Path(__file__).resolve()), "--side", side, "--json", str(tmp / f"{side}.json"),
                   "--images", str(tmp / f"coco128_{side}" / "images" / "train2017"), "--cfg", opt.cfg,
                   "--img", str(opt.img), "--batch", str(opt.batch), "--workers", str(opt.workers),
                   "--warmup", str(opt.warmup), "--steps", str(opt.steps)] + (["--ref", opt.ref] if opt.ref else [])
            if opt.amp and side == "project":
                cmd.append("--amp")
            drop = ("PYTHONPATH", "YOLO_BACKEND", "RANK", "LOCAL_RANK", "WORLD_SIZE")
            env = {k: v for k, v in os.environ.items() if k not in drop}
            if side == "official":
                env["YOLO_OFFLINE"] = "1"  # ultralytics' switch: no connectivity probe at import
                env.update(kv.split("=", 1) for kv in opt.ref_env)
            r = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=opt.timeout)
            if r.returncode != 0:
                print(f"step_profile: {side} failed (rc {r.returncode}):\n{(r.stdout + r.stderr)[-2000:]}")
                continue
            sides[side] = json.loads((tmp / f"{side}.json").read_text())
            print(f"  {side}: {sides[side]['wall_ms_per_step']:.1f} ms per step (unprofiled)", flush=True)
    if not sides:
        return 1
    print_table(sides)
    result = {"cfg": opt.cfg, "img": opt.img, "batch": opt.batch, "workers": opt.workers, "steps": opt.steps,
              "amp": "bf16" if opt.amp else None,
              "ref_env": opt.ref_env, "load_average": os.getloadavg()[0],
              "warmup": opt.warmup, "sides": sides, "ratio_official_over_project": ratios(sides)}
    print(f"wrote {write_result('step_profile', result, path=opt.json)}")
    return 0


def parse_opt(argv=None):
    own = ROOT / ".venv-torch" / "bin" / "python"
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--side", choices=["both", "project", "official"], default="both")
    p.add_argument("--ref", default=None, help="official ultralytics/yolov5 checkout")
    p.add_argument("--ref-python", default=None, help="its Python (default: ../venv/bin/python beside it)")
    p.add_argument("--python", default=str(own if own.exists() else sys.executable), help="this project's Python")
    p.add_argument("--cfg", default="yolov5n.yaml")
    p.add_argument("--img", type=int, default=320)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--amp", action="store_true", help="this project's side under bf16 autocast (its default where the "
                   "CPU computes bf16 natively)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--data", default=str(SHARED / "data" / "coco128"), help="coco128 folder (copied per side)")
    p.add_argument("--images", default=None, help="(one side) the training images folder")
    p.add_argument("--ref-env", nargs="*", default=[], help="KEY=VALUE for the official side, e.g. "
                   "OMP_WAIT_POLICY=PASSIVE (this project's own CPU default)")
    p.add_argument("--timeout", type=int, default=1800)
    p.add_argument("--json", default=None, help="results file (both sides; default: a new one in benchmarks/results/)"
                   "; with --side, where that side's figures go")
    opt = p.parse_args(argv)
    if opt.ref:
        opt.ref = str(Path(opt.ref).absolute())
    opt.ref_python = str(Path(opt.ref_python or Path(opt.ref or ".").parent / "venv" / "bin" / "python").absolute())
    if opt.side != "both" and not opt.json:
        p.error("--side project/official needs --json (where that side's figures go)")
    if opt.side == "official" and not opt.ref:
        p.error("--side official needs --ref (the official checkout)")
    opt.images = opt.images or str(Path(opt.data) / "images" / "train2017")
    return opt


def main(opt):
    if opt.side == "both":
        sys.path.insert(0, str(ROOT))
        return run_both(opt)
    return measure_side(opt)


if __name__ == "__main__":
    sys.exit(main(parse_opt()))
