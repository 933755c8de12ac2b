"""The GPU kit's sections (benchmarks/gpu_kit.py runs them in this order, each under its own time budget): the CUDA
tests, both trainers side by side, one profiled step of each, the loader against the step rate, and speed.py's CUDA
candidates. Each returns its part of gpu_kit.json."""
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.gpu_kit_children import SmiPeak, kill_group
from benchmarks.gpu_kit_tables import (FLAGS_ON, ROOT, coco128_names, loader_verdict, make_repeated_dataset,
                                       official_check_amp, parse_pytest_summary, train_rows)


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
    names = coco128_names()
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
        kill_group(p)
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
    names = coco128_names()
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
