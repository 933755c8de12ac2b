"""The GPU kit: one command that tests, times and profiles the trainer on a CUDA GPU, side by side with the
official ultralytics/yolov5 code, on a remote GPU machine without network access. scripts/stage_gpu_kit.sh gathers
what it needs beforehand.

    python benchmarks/gpu_kit.py --out DIR --ref .gpu_kit/official --data .gpu_kit/shared/data/coco128 \\
        --weights .gpu_kit/shared/weights/yolov5n.pt [--quick] [--device 0|cpu] [--dry-run]

Writes DIR/gpu_kit.json (rewritten after every section, so a section that fails or runs out of time loses nothing
of the others; a results file of benchmarks/results_io.py: copy it into benchmarks/results/) and DIR/gpu_kit.log
(each child's output). Sections, each in its own child processes with its own time budget, each with `status`
ok / failed / skipped and a `reason` when not ok:
  cuda_tests  `pytest -m cuda` (tests marked cuda: the CUDA code paths); passed / failed / skipped, failures named
  train       train.py of both codebases, alternating, on the same GPU: yolov5s from scratch at 640, batch 16 and 64,
              coco128 repeated to ~1000 images (distinct symlinks in a list file, so neither label cache folds the
              repeats), --noval --noplots, 8 workers, default AMP; a warm-up epoch, then timed epochs
              (benchmarks/train_clock.py). This project with and without --bbox_iou_optim --multi_tensor_optimizer.
              Images/s, s/epoch, peak GPU memory (PyTorch's allocator, and nvidia-smi), the ratio project / official,
              and whether the official run really had AMP on (its check_amp needs yolov5n.pt and data/images).
  profile     one training step of each under torch.profiler (benchmarks/gpu_profile.py): kernels, host ms per
              step, GPU busy/idle, host-device syncs
  loader      benchmarks/loader.py with 8 and 16 workers, this project's formulation and the official one (--classic),
              against the training step rate: does a step wait on data?
  candidates  benchmarks/speed.py's CUDA candidates: channels_last, fp16 vs bf16 AMP, torch.compile, the whole step
              as one CUDA graph (padded targets)
--quick: smaller (fewer images, one timed epoch, only the flags-on run beside the official, no slow tests, no
compile): under 3 minutes on an H100; the full kit under 8. --dry-run (with --device cpu): tiny sizes, to check the
kit itself on a machine without a GPU; every section runs at a toy size or says why it is skipped. Without --ref the
official side is skipped, with the reason.
"""
import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.results_io import run_metadata  # noqa: E402

SECTIONS = ("cuda_tests", "train", "profile", "loader", "candidates")
FLAGS_ON = ("--bbox_iou_optim", "--multi_tensor_optimizer")
# environment of this project's children; the official children get neither these nor the launcher variables
OWN_ENV = {"YOLO_BACKEND": "torch", "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg"}
DROP_FOR_OFFICIAL = ("YOLO_BACKEND", "_YOLO_BACKEND_ANNOUNCED", "YOLO_QUIET", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                     "MASTER_ADDR", "MASTER_PORT", "GPU_KIT_TEST_DEVICE")


# ----------------------------------------------------------------------------------------------------------------
# sizes
def plan(opt):
    """Sizes and time budgets (seconds) of each section for the chosen mode."""
    if opt.dry_run:
        return dict(mode="dry-run", total_s=420, cfg="yolov5n.yaml", img=64, batches=[8], images=16, epochs=2,
                    val_images=8, workers=2, project_flags=[False, True], rounds=1, tests_expr="cuda and not slow",
                    profile_configs=["2:on"], profile_img=64, profile_cfg="yolov5n.yaml", loader_workers=[2],
                    loader_img=128, loader_images=32, compile=False,
                    speed_args=["--small", "--img", "64", "--batch", "1", "--iters", "1", "--threads", "1"],
                    budgets=dict(cuda_tests=120, train=180, profile=90, loader=60, candidates=90))
    if opt.quick:
        return dict(mode="quick", total_s=175, cfg="yolov5s.yaml", img=640, batches=[16, 64], images=512, epochs=2,
                    val_images=32, workers=8, project_flags=[True], rounds=1, tests_expr="cuda and not slow",
                    profile_configs=["16:on"], profile_img=640, profile_cfg="yolov5s.yaml", loader_workers=[8],
                    loader_img=640, loader_images=512, compile=False,
                    speed_args=["--batch", "16", "--img", "640", "--iters", "10"],
                    budgets=dict(cuda_tests=45, train=90, profile=25, loader=20, candidates=30))
    return dict(mode="full" if opt.device != "cpu" else "full-cpu", total_s=470, cfg="yolov5s.yaml", img=640,
                batches=[16, 64], images=1024, epochs=3, val_images=128, workers=8, project_flags=[False, True],
                rounds=1, tests_expr="cuda", profile_configs=["16:on", "16:off", "64:on"], profile_img=640,
                profile_cfg="yolov5s.yaml", loader_workers=[8, 16], loader_img=640, loader_images=1024, compile=True,
                speed_args=["--batch", "16", "--img", "640", "--iters", "10"],
                budgets=dict(cuda_tests=150, train=220, profile=75, loader=45, candidates=120))


# ----------------------------------------------------------------------------------------------------------------
# pure parts (unit-tested)
def ratio(official, project):
    """project images/s over official images/s (above 1: this project is faster); None when either is missing."""
    if not official or not project or official <= 0 or project <= 0:
        return None
    return round(project / official, 3)


def make_repeated_dataset(src, dst, n_images, names, n_val=None):
    """A dataset of n_images distinct paths over coco128's images: symlinks r{k}_{name} in dst/images/train (and the
    labels beside them in dst/labels/train), listed in dst/train.txt. Distinct names matter: both trainers key
    their label caches by path, so a list repeating one path would fold back to 128 images. Validation is the first
    n_val originals (all by default; the trainers validate the final epoch even with --noval, after the timed
    window). Returns the data YAML's path."""
    src, dst = Path(src), Path(dst)
    ims = sorted((src / "images" / "train2017").glob("*.jpg"))
    if not ims:
        raise FileNotFoundError(f"no images in {src / 'images' / 'train2017'}: --data must be a coco128 folder")
    (dst / "images" / "train").mkdir(parents=True, exist_ok=True)
    (dst / "labels" / "train").mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n_images):
        im = ims[i % len(ims)]
        name = f"r{i // len(ims)}_{im.name}"
        link = dst / "images" / "train" / name
        if not link.exists():
            link.symlink_to(im.resolve())
        lb = src / "labels" / "train2017" / f"{im.stem}.txt"
        if lb.exists() and not (dst / "labels" / "train" / f"{Path(name).stem}.txt").exists():
            (dst / "labels" / "train" / f"{Path(name).stem}.txt").symlink_to(lb.resolve())
        lines.append(str(link))
    (dst / "train.txt").write_text("\n".join(lines) + "\n")
    val = dst / "val"
    if not val.exists():
        (val / "images").mkdir(parents=True)
        (val / "labels").mkdir()
        for im in ims[:n_val]:
            (val / "images" / im.name).symlink_to(im.resolve())
            lb = src / "labels" / "train2017" / f"{im.stem}.txt"
            if lb.exists():
                (val / "labels" / lb.name).symlink_to(lb.resolve())
    y = dst / "data.yaml"
    import yaml
    y.write_text(yaml.safe_dump({"path": str(dst), "train": str(dst / "train.txt"), "val": str(val / "images"),
                                 "names": list(names)}, sort_keys=False))
    return y


def train_rows(runs, cfg, img, batches, flag_sets):
    """The acceptance table: one row per (batch, this project's flags), the official run of the same batch beside it.
    runs: list of {'side': 'official'|'project', 'batch', 'flags': bool, 'img_s', 'peak_mib', 'amp', ...}; with
    several rounds the median images/s and the largest peak are taken."""
    def pick(side, bs, flags=None):
        rs = [r for r in runs if r["side"] == side and r["batch"] == bs and (flags is None or r["flags"] == flags)]
        ok = [r for r in rs if r.get("img_s")]
        med = _median([r["img_s"] for r in ok])
        peak = max((r["peak_mib"] for r in ok if r.get("peak_mib") is not None), default=None)
        spe = _median([r["s_per_epoch"] for r in ok if r.get("s_per_epoch")])
        amp = [r.get("amp") for r in rs if r.get("amp") is not None]
        smi = max((r["smi_peak_mib"] for r in ok if r.get("smi_peak_mib") is not None), default=None)
        return med, peak, spe, (all(amp) if amp else None), smi, [r.get("error") for r in rs if r.get("error")]
    rows = []
    for bs in batches:
        o_ips, o_peak, o_spe, o_amp, o_smi, o_err = pick("official", bs)
        for flags in flag_sets:
            p_ips, p_peak, p_spe, p_amp, p_smi, p_err = pick("project", bs, flags)
            rows.append({"model": Path(cfg).stem, "img": img, "batch": bs, "flags": " ".join(FLAGS_ON) if flags else "",
                         "official_img_s": o_ips, "project_img_s": p_ips, "ratio": ratio(o_ips, p_ips),
                         "official_s_epoch": o_spe, "project_s_epoch": p_spe,
                         "official_peak_mib": o_peak, "project_peak_mib": p_peak,
                         "official_smi_peak_mib": o_smi, "project_smi_peak_mib": p_smi,
                         "official_amp": o_amp, "project_amp": p_amp,
                         "errors": o_err + p_err})
    return rows


def _median(values):
    """The middle value (the upper one of an even count: a measured run, not an average of two); None if empty."""
    return sorted(values)[len(values) // 2] if values else None


def parse_pytest_summary(text):
    """passed/failed/skipped/errors counts and failing test ids from pytest's -rfE summary."""
    counts = {k: 0 for k in ("passed", "failed", "skipped", "errors", "deselected")}
    tail = text.strip().splitlines()[-1] if text.strip() else ""
    for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", tail):
        counts["errors" if word.startswith("error") else word] = int(n)
    failures = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, re.M)
    return counts, failures


def official_check_amp(log):
    """'passed', 'failed' or 'not run' (the CPU, or AMP not asked for), from the official train.py's output, whose
    logger colours the prefix: '\x1b[34m\x1b[1mAMP: \x1b[0mchecks passed'."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", log)
    return "passed" if "AMP: checks passed" in plain else "failed" if "AMP: checks failed" in plain else "not run"


def loader_verdict(loader_rows, train_img_s):
    """Whether a training step waits on data: the best of this project's loader rates (its own formulation, GPU
    idle) against the training rate. Below 1.1x headroom the loader, not the GPU, sets the pace."""
    own = [r["img_s"] for r in loader_rows if r.get("formulation") == "project" and r.get("img_s")]
    if not own or not train_img_s:
        return None, None
    headroom = round(max(own) / train_img_s, 3)
    return headroom, headroom < 1.1


def assemble(meta, sections):
    """The JSON document: the machine's figures first, then every section (missing ones marked not run)."""
    doc = {"device": meta.get("device"), "torch": meta.get("torch"), "cuda": meta.get("cuda"),
           "triton": meta.get("triton"), "kit": meta.get("kit", {})}
    for name in SECTIONS:
        doc[name] = sections.get(name, {"status": "skipped", "reason": "not run (the kit stopped before it)"})
    return doc


# ----------------------------------------------------------------------------------------------------------------
# running children
class Kit:
    def __init__(self, opt):
        self.opt = opt
        self.out = Path(opt.out).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.log_file = open(self.out / "gpu_kit.log", "a")
        self.t0 = time.time()
        self.plan = plan(opt)
        self.sections = {}
        self.meta = {}
        self.run_record = run_metadata()
        self.tmp = Path(tempfile.mkdtemp(prefix="gpu_kit_"))

    def log(self, msg):
        line = f"[{time.time() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        self.log_file.write(line + "\n")
        self.log_file.flush()

    def left(self):
        return self.plan["total_s"] - (time.time() - self.t0)

    def write(self):
        self.meta["kit"]["elapsed_s"] = round(time.time() - self.t0, 1)
        doc = {"benchmark": "gpu_kit", "run": self.run_record, **assemble(self.meta, self.sections)}
        tmp = self.out / "gpu_kit.json.tmp"
        tmp.write_text(json.dumps(doc, indent=1, default=str))
        os.replace(tmp, self.out / "gpu_kit.json")

    def env(self, official=False, extra=None):
        if official:
            env = {k: v for k, v in os.environ.items() if k not in DROP_FOR_OFFICIAL and not k.startswith("YOLO_")}
            # the staged wheels sit on PYTHONPATH (/tmp/site); this project's folder must not
            paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT]
            env["PYTHONPATH"] = os.pathsep.join(paths)
            env.update(PYTHONUNBUFFERED="1", MPLBACKEND="Agg", YOLO_OFFLINE="1")  # ultralytics' own offline switch
        else:
            env = {**os.environ, **OWN_ENV}
        env.update(extra or {})
        return env

    def run(self, cmd, timeout, cwd=ROOT, env=None, label=""):
        """Run a child; its output goes to the log. Returns (returncode or None on timeout, output, seconds)."""
        timeout = max(5, min(timeout, self.left()))
        self.log(f"$ {' '.join(map(str, cmd))}  (cwd {cwd}, limit {timeout:.0f}s)")
        t0 = time.time()
        p = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env or self.env(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
        out = []

        def pump():
            for line in p.stdout:
                out.append(line)
                self.log_file.write(f"    {label}| {line}")
            self.log_file.flush()
        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(p)
            rc = None
        reader.join(timeout=10)
        dt = time.time() - t0
        self.log(f"  -> {'TIMEOUT' if rc is None else f'rc {rc}'} after {dt:.1f}s")
        return rc, "".join(out), dt

    def section(self, name, fn):
        budget = self.plan["budgets"][name]
        if self.opt.sections and name not in self.opt.sections:
            self.sections[name] = {"status": "skipped", "reason": f"not among --sections {self.opt.sections}"}
        elif self.left() < 10:
            self.sections[name] = {"status": "skipped", "reason": f"the kit's {self.plan['total_s']} s were spent"}
        else:
            self.log(f"== {name} (budget {budget}s, {self.left():.0f}s left)")
            t0 = time.time()
            try:
                result = fn(min(budget, self.left()))
            except Exception as e:  # a broken section is a finding; the others still run
                import traceback
                self.log_file.write(traceback.format_exc())
                result = {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:1000]}
            result["duration_s"] = round(time.time() - t0, 1)
            self.sections[name] = result
            self.log(f"   {name}: {result.get('status')} {result.get('reason', '')}")
        self.write()


def _kill_group(p):
    import signal
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            p.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


class SmiPeak:
    """Peak GPU memory (MiB) of one process as nvidia-smi reports it, polled every 0.5 s (None without nvidia-smi)."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, None, threading.Event()
        self.smi = shutil.which("nvidia-smi")
        if self.smi:
            self.thread = threading.Thread(target=self.poll, daemon=True)
            self.thread.start()

    def poll(self):
        while not self.stop.is_set():
            try:
                out = subprocess.run([self.smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,"
                                      "nounits"], capture_output=True, text=True, timeout=5).stdout
                for line in out.splitlines():
                    pid, mib = [x.strip() for x in line.split(",")[:2]]
                    if int(pid) == self.pid:
                        self.peak = max(self.peak or 0, int(mib))
            except Exception:
                pass
            self.stop.wait(0.5)

    def close(self):
        self.stop.set()
        return self.peak


# ----------------------------------------------------------------------------------------------------------------
# sections
def machine(kit):
    code = ("import json, platform, torch\n"
            "c = torch.cuda.is_available()\n"
            "try:\n    import triton; tv = triton.__version__\nexcept Exception:\n    tv = None\n"
            "print('GPU_KIT_META ' + json.dumps({'device': torch.cuda.get_device_name(0) if c else 'cpu', "
            "'torch': torch.__version__, 'cuda': torch.version.cuda, 'triton': tv, 'cuda_available': c}))")
    rc, out, _ = kit.run([sys.executable, "-c", code], 120, label="meta")
    m = re.search(r"^GPU_KIT_META (.*)$", out, re.M)
    meta = json.loads(m.group(1)) if m else {"device": None, "torch": None, "error": out[-500:]}
    meta["kit"] = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "mode": kit.plan["mode"],
                   "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "python": platform.python_version(),
                   "cpu": _cpu_name(), "cores": os.cpu_count(), "ref": kit.opt.ref, "plan": kit.plan}
    return meta


def cuda_tests(kit, budget):
    opt = kit.opt
    shared = kit.tmp / "shared"  # the layout tests/conftest.py reads (YOLO_SHARED_DIR): data/coco128, weights/
    (shared / "data").mkdir(parents=True, exist_ok=True)
    (shared / "weights").mkdir(exist_ok=True)
    links = [(shared / "data" / "coco128", opt.data), (shared / "weights" / "yolov5n.pt", opt.weights)]
    reference = Path(opt.data).resolve().parents[1] / "reference"  # ref_A.npz, where --data sits in a shared layout
    if reference.is_dir():
        links.append((shared / "reference", reference))
    for link, target in links:
        if not link.exists():
            link.symlink_to(Path(target).resolve())
    extra = {"YOLO_SHARED_DIR": str(shared)}
    if opt.device == "cpu":
        extra["GPU_KIT_TEST_DEVICE"] = "cpu"  # the tier's logic on the CPU (tests/helpers/cuda_helpers.py)
    expr = kit.plan["tests_expr"]
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", expr, "-rfEs", "-p", "no:cacheprovider", "--timeout", "300",
           "tests"]
    rc, out, dt = kit.run(cmd, budget, env=kit.env(extra=extra), label="pytest")
    counts, failures = parse_pytest_summary(out)
    skips = sorted(set(re.findall(r"^SKIPPED \[\d+\] [^:]+:\d+: (.*)$", out, re.M)))[:20]
    result = {**counts, "failures": failures, "skip_reasons": skips, "marker": expr,
              "swapped_to_cpu": opt.device == "cpu"}
    if rc is None:
        return {**result, "status": "failed", "reason": f"pytest ran past its {budget:.0f} s budget"}
    if rc not in (0, 1) or (rc == 1 and not failures and not counts["failed"]):
        return {**result, "status": "failed", "reason": f"pytest exited {rc}: {out[-400:]}"}
    return {**result, "status": "ok"}


def train(kit, budget):
    opt, pl = kit.opt, kit.plan
    import yaml
    names = yaml.safe_load(open(ROOT / "data" / "coco128.yaml"))["names"]
    names = [names[i] for i in sorted(names)] if isinstance(names, dict) else names
    sides = ["project"] + (["official"] if opt.ref else [])
    data = {s: make_repeated_dataset(opt.data, kit.tmp / f"data_{s}", pl["images"], names, pl["val_images"])
            for s in sides}
    why = ""
    if opt.ref:
        ref_ok, why = check_official(opt.ref)
        if not ref_ok:
            sides.remove("official")
    runs = []
    deadline = time.time() + budget
    # every (batch, side, flags) run once per round; the order alternates between batches and rounds so that a
    # machine warming up or slowing down does not favour one side
    jobs = []
    for r in range(pl["rounds"]):
        for i, bs in enumerate(pl["batches"]):
            order = [("official", None)] * ("official" in sides) + [("project", f) for f in pl["project_flags"]]
            jobs += [(bs, side, flags) for side, flags in (order if (i + r) % 2 == 0 else order[::-1])]
    for n, (bs, side, flags) in enumerate(jobs):
        left = deadline - time.time()
        if left < 15:
            runs.append({"side": side, "batch": bs, "flags": flags, "error": "skipped: the section's budget ran out"})
            continue
        runs.append(train_once(kit, side, bs, flags, data[side], min(left, left / max(1, len(jobs) - n) * 1.8)))
    rows = train_rows(runs, pl["cfg"], pl["img"], pl["batches"], pl["project_flags"])
    result = {"rows": rows, "runs": runs, "images": pl["images"], "epochs": pl["epochs"], "timed_epochs":
              pl["epochs"] - 1, "workers": pl["workers"], "status": "ok"}
    if "official" not in sides:
        result["official"] = ("skipped: " + (why if opt.ref else "no --ref (the official checkout); "
                                             "scripts/stage_gpu_kit.sh stages one"))
    elif why:
        result["official"] = why
    if not any(r.get("img_s") for r in runs):
        result.update(status="failed", reason="no run was timed: " + "; ".join(
            str(r.get("error"))[:200] for r in runs if r.get("error")))
    elif any(r.get("error") for r in runs):
        result["reason"] = "some runs failed: see runs[].error"
    return result


def check_official(ref):
    ref = Path(ref)
    if not (ref / "train.py").is_file():
        return False, f"no train.py in --ref {ref}"
    missing = [f for f in ("yolov5n.pt", "data/images/bus.jpg") if not (ref / f).exists()]
    if missing:  # check_amp would fall back to fp32 (or try to download): say so, still run
        return True, f"{missing} missing in {ref}: its check_amp may turn AMP off"
    return True, ""


def train_once(kit, side, bs, flags, data_yaml, timeout):
    opt, pl = kit.opt, kit.plan
    official = side == "official"
    repo = Path(opt.ref).resolve() if official else ROOT
    name = f"{side}_b{bs}{'_flags' if flags else ''}"
    clock = kit.tmp / f"clock_{name}.json"
    clock.unlink(missing_ok=True)
    cmd = [sys.executable, ROOT / "benchmarks" / "train_clock.py", repo / "train.py", "--data", data_yaml,
           "--cfg", repo / "models" / pl["cfg"], "--weights", "", "--img", pl["img"], "--batch-size", bs,
           "--epochs", pl["epochs"], "--workers", pl["workers"], "--noval", "--noplots", "--device",
           "cpu" if opt.device == "cpu" else opt.device, "--project", kit.tmp / "runs", "--name", name, "--exist-ok"]
    if flags:
        cmd += list(FLAGS_ON)
    env = kit.env(official=official, extra={"GPU_KIT_CLOCK_OUT": str(clock), "GPU_KIT_CLOCK_EPOCHS": str(pl["epochs"])})
    python = opt.ref_python if official and opt.ref_python else sys.executable
    cmd[0] = python
    t0 = time.time()
    smi = None
    kit.log(f"$ {' '.join(map(str, cmd))}  (cwd {repo}, limit {timeout:.0f}s)")
    p = subprocess.Popen([str(c) for c in cmd], cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, errors="replace", start_new_session=True)
    smi = SmiPeak(p.pid)
    out = []
    reader = threading.Thread(target=lambda: [out.append(x) or kit.log_file.write(f"    {name}| {x}")
                                              for x in p.stdout], daemon=True)
    reader.start()
    try:
        rc = p.wait(timeout=max(5, min(timeout, kit.left())))
    except subprocess.TimeoutExpired:
        _kill_group(p)
        rc = None
    reader.join(timeout=10)
    kit.log_file.flush()
    text = "".join(out)
    run = {"side": side, "batch": bs, "flags": flags, "rc": rc, "wall_s": round(time.time() - t0, 1),
           "smi_peak_mib": smi.close()}
    if clock.exists():
        c = json.loads(clock.read_text())
        run.update(img_s=c.get("img_s"), s_per_epoch=c.get("s_per_epoch"), peak_mib=c.get("peak_reserved_mib"),
                   peak_allocated_mib=c.get("peak_allocated_mib"), timed_steps=c.get("timed_steps"),
                   warmup_epoch_s=c.get("warmup_epoch_s"), first_batch_s=c.get("first_batch_s"),
                   autocast=c.get("autocast"), scaler_enabled=c.get("scaler_enabled"), timed=c.get("done"))
        run["amp"] = bool(c.get("scaler_enabled")) or any("float16" in a or "bfloat16" in a
                                                          for a in c.get("autocast") or [])
    if official:
        run["check_amp"] = official_check_amp(text)
    if rc is None:
        run["error"] = f"ran past {timeout:.0f} s"
    elif rc != 0 and not run.get("img_s"):
        run["error"] = f"rc {rc}: " + text[-600:]
    elif not run.get("img_s"):
        run["error"] = "finished without a timed window (too few batches?)"
    kit.log(f"  {name}: {run.get('img_s')} img/s, {run.get('s_per_epoch')} s/epoch, peak {run.get('peak_mib')} MiB,"
            f" amp {run.get('amp')}, rc {rc}, {run['wall_s']} s" + (f"  ERROR {run['error'][:300]}"
                                                                    if run.get("error") else ""))
    return run


def profile(kit, budget):
    opt, pl = kit.opt, kit.plan
    rows, errors = [], []
    dev = "cpu" if opt.device == "cpu" else opt.device
    small = ["--warmup", "1", "--iters", "1"] if opt.dry_run else []
    jobs = [("project", ["--configs", *pl["profile_configs"]])]
    if opt.ref:
        jobs.append(("official", ["--ref", Path(opt.ref).resolve(), "--configs",
                                  *sorted({c.split(":")[0] for c in pl["profile_configs"]}, key=int)]))
    deadline = time.time() + budget
    for side, args in jobs:
        out_json = kit.tmp / f"profile_{side}.json"
        cmd = [opt.ref_python if side == "official" and opt.ref_python else sys.executable,
               ROOT / "benchmarks" / "gpu_profile.py", "--side", side, "--device", dev, "--cfg", pl["profile_cfg"],
               "--img", pl["profile_img"], "--json", out_json, *small, *args]
        rc, out, _ = kit.run(cmd, (deadline - time.time()) * (0.6 if side == "project" and opt.ref else 1),
                             env=kit.env(official=side == "official"), label=f"profile-{side}")
        if out_json.exists():
            rows += json.loads(out_json.read_text())
        if rc != 0:
            errors.append(f"{side}: {'timeout' if rc is None else f'rc {rc}'} {out[-300:]}")
    result = {"rows": rows, "status": "ok" if rows else "failed"}
    if not opt.ref:
        result["official"] = "skipped: no --ref"
    if errors:
        result["reason"] = "; ".join(errors)
    if opt.device == "cpu":
        result["note"] = "CPU: host figures only (no CUDA kernels to count)"
    return result


def loader(kit, budget):
    opt, pl = kit.opt, kit.plan
    import yaml
    names = yaml.safe_load(open(ROOT / "data" / "coco128.yaml"))["names"]
    names = [names[i] for i in sorted(names)] if isinstance(names, dict) else names
    data = make_repeated_dataset(opt.data, kit.tmp / "data_loader", 128, names)  # warm-up epoch: 128 images
    rows, errors = [], []
    deadline = time.time() + budget
    jobs = [(w, form) for w in pl["loader_workers"] for form in ("project", "official")]
    for n, (w, form) in enumerate(jobs):
        cmd = [sys.executable, ROOT / "benchmarks" / "loader.py", "--data", data, "--img", pl["loader_img"],
               "--batch-size", "16", "--workers", w, "--images", pl["loader_images"], "--no-stages",
               "--json", kit.tmp / f"loader_{form}_{w}.json"]
        if form == "official":
            cmd.append("--classic")
        rc, out, dt = kit.run(cmd, (deadline - time.time()) / (len(jobs) - n), label=f"loader-{form}-{w}")
        m = re.search(r"throughput: ([\d.]+) images/s with (\d+) worker", out)
        rows.append({"formulation": form, "workers": w, "img_s": float(m.group(1)) if m else None,
                     "workers_used": int(m.group(2)) if m else None, "img": pl["loader_img"]})
        if not m:
            errors.append(f"{form}/{w}: {'timeout' if rc is None else f'rc {rc}'} {out[-300:]}")
    train_rows_ = (kit.sections.get("train") or {}).get("rows") or []
    b16 = [r for r in train_rows_ if r["batch"] == min(pl["batches"]) and r.get("project_img_s")]
    train_ips = max((r["project_img_s"] for r in b16), default=None)
    official_ips = next((r["official_img_s"] for r in b16 if r.get("official_img_s")), None)
    headroom, waits = loader_verdict(rows, train_ips)
    result = {"rows": rows, "train_img_s": train_ips, "official_train_img_s": official_ips, "headroom": headroom,
              "waits_on_data": waits, "status": "ok" if any(r["img_s"] for r in rows) else "failed",
              "note": "loader.py alone (GPU idle) at batch 16 against this project's fastest training rate at the "
                      "same batch; below 1.1x headroom the step waits on data"}
    if errors:
        result["reason"] = "; ".join(errors)
    if train_ips is None:
        result["verdict"] = "no training rate to compare with (train section failed or skipped)"
    else:
        result["verdict"] = "a step waits on data" if waits else "the loader keeps ahead of the step"
    return result


def candidates(kit, budget):
    opt, pl = kit.opt, kit.plan
    dev = "cpu" if opt.device == "cpu" else opt.device
    rows, errors, calls = [], [], []
    base = [n for n in ("flags", "flags+channels_last", "flags+amp_fp16", "flags+amp_fp16+channels_last",
                        "flags+amp_bf16", "flags+amp_bf16+cuda_graph")]
    calls.append(("base", base))
    if pl["compile"]:
        calls.append(("compile", ["flags+amp_fp16", "flags+amp_fp16+compile"]))
    deadline = time.time() + budget
    for n, (label, names) in enumerate(calls):
        out_json = kit.tmp / f"speed_{label}.json"
        cmd = [sys.executable, ROOT / "benchmarks" / "speed.py", "--device", dev, "--sections", "variants",
               *pl["speed_args"], "--variants", *names, "--json", out_json]
        share = (deadline - time.time()) * (0.6 if label == "base" and len(calls) > 1 else 1.0)
        rc, out, _ = kit.run(cmd, share, label=f"speed-{label}")
        if out_json.exists():
            got = json.loads(out_json.read_text()).get("train_step_variants", [])
            rows += [{**r, "call": label} for r in got]
        if rc != 0:
            errors.append(f"{label}: {'timeout' if rc is None else f'rc {rc}'} {out[-300:]}")
    result = {"rows": rows, "status": "ok" if any(r.get("step_ms") for r in rows) else "failed"}
    if not pl["compile"]:
        result["compile"] = "skipped: " + ("--dry-run" if opt.dry_run else "--quick")
    if opt.device == "cpu":
        result["note"] = "CPU: the CUDA candidates (AMP, torch.compile, CUDA graph) are not built here"
    if errors:
        result["reason"] = "; ".join(errors)
    return result


def _cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# ----------------------------------------------------------------------------------------------------------------
def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--out", required=True, help="folder for gpu_kit.json and gpu_kit.log")
    p.add_argument("--ref", default=None, help="official ultralytics/yolov5 checkout (staged: .gpu_kit/official)")
    p.add_argument("--ref-python", default=None, help="Python for the official side (default: this one)")
    p.add_argument("--data", required=True, help="coco128 folder (images/train2017, labels/train2017)")
    p.add_argument("--weights", required=True, help="yolov5n.pt (the tests' val.py parity run)")
    p.add_argument("--device", default="0", help="'0' (cuda:0, default) or 'cpu'")
    p.add_argument("--quick", action="store_true", help="the short kit (under 3 minutes on an H100)")
    p.add_argument("--dry-run", action="store_true", help="toy sizes: check the kit itself (with --device cpu)")
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=None, help="run only these")
    return p.parse_args(argv)


def main(opt):
    for what, path in (("--data", Path(opt.data) / "images" / "train2017"), ("--weights", Path(opt.weights))):
        if not path.exists():
            print(f"gpu_kit: {what} {path} not found: pass the coco128 folder and yolov5n.pt (scripts/stage_gpu_kit.sh "
                  f"stages both under .gpu_kit/shared)", file=sys.stderr)
            return 1
    if opt.ref and not (Path(opt.ref) / "train.py").is_file():
        print(f"gpu_kit: --ref {opt.ref} holds no train.py: pass the official checkout (staged: .gpu_kit/official)",
              file=sys.stderr)
        return 1
    kit = Kit(opt)
    kit.log(f"GPU kit, {kit.plan['mode']}, out {kit.out}, ref {opt.ref or '-'}")
    kit.meta = machine(kit)
    if kit.meta.get("device") not in (None, "cpu"):
        kit.run_record["machine"]["gpu"] = kit.meta["device"]
    if opt.device != "cpu" and not kit.meta.get("cuda_available"):
        kit.log("no CUDA GPU visible to PyTorch: every section would measure the CPU; use --device cpu --dry-run")
    kit.write()
    try:
        for name, fn in (("cuda_tests", cuda_tests), ("train", train), ("profile", profile), ("loader", loader),
                         ("candidates", candidates)):
            kit.section(name, lambda budget, fn=fn: fn(kit, budget))
    finally:
        kit.write()
        shutil.rmtree(kit.tmp, ignore_errors=True)
    summary(kit)
    return 0


def summary(kit):
    doc = json.loads((kit.out / "gpu_kit.json").read_text())
    kit.log(f"device {doc['device']}, torch {doc['torch']}, {doc['kit']['elapsed_s']} s")
    t = doc["cuda_tests"]
    kit.log(f"cuda tests: {t.get('status')} passed {t.get('passed')} failed {t.get('failed')} skipped "
            f"{t.get('skipped')} {t.get('failures') or ''}")
    for r in doc["train"].get("rows", []):
        kit.log(f"train {r['model']} {r['img']} b{r['batch']} {r['flags'] or '(no flags)':<45} official "
                f"{r['official_img_s']} img/s ({r['official_peak_mib']} MiB, amp {r['official_amp']}), project "
                f"{r['project_img_s']} img/s ({r['project_peak_mib']} MiB), ratio {r['ratio']}")
    for name in ("profile", "loader", "candidates"):
        s = doc[name]
        kit.log(f"{name}: {s.get('status')} {s.get('reason', '')[:200]}")
    kit.log(f"wrote {kit.out / 'gpu_kit.json'}")


if __name__ == "__main__":
    sys.exit(main(parse_opt()))
