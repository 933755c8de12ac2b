"""Results files: every benchmark writes its figures as one JSON file in benchmarks/results/ through this module, and
benchmarks/render_results.py makes docs/benchmarks.md and the README's headline table from those files only.

A results file is the benchmark's own JSON (its keys as before, so the readers of each format keep working) with two
keys added:
  "benchmark"  the kind: compare_train, train_clock, loader, cpu_levers, speed, launches, gpu_kit, demo
  "run"        how the figures were made: date (UTC, ISO 8601), commit (and whether the tree had local changes),
               machine (CPU model, its vector/matrix flags, cores, GPU name), versions (Python, torch, oneflow,
               numpy), the exact command, and source: "measured" for a file a benchmark wrote, or "transcribed from
               <commit> ..." for figures copied from an earlier record (a README or a commit message), never to be
               taken for a fresh run.

Standard library only at import: benchmarks/train_clock.py loads this file into the official trainer's process,
where `utils` is the official package. Versions are read from the installed distributions, so nothing is imported
to learn them."""
import datetime
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"
SCHEMA = 1
# the CPU features that decide which kernels run (AVX2, AVX-512, native bf16, AMX tiles), as /proc/cpuinfo names them
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
NATIVE_BF16 = {"avx512_bf16", "amx_bf16"}  # either one: the CPU computes bf16 natively (else it is emulated, slower)
VERSIONED = ("torch", "oneflow", "numpy")
# Variables that cap the instruction sets the libraries use (ATen's vector kernels, oneDNN, MKL, OpenCV, NumPy): set,
# the machine measures as a lesser CPU (how an AVX2-only CPU is emulated on a newer one; benchmarks/cpu_hold.py), so a
# results file names them and counts as a variant, apart from the headline figures of CPUs as they are. The first four
# name an instruction set to stay at; the last two list AVX-512 targets to leave out.
CPU_CAP_VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS",
                     "OPENCV_CPU_DISABLE", "NPY_DISABLE_CPU_FEATURES")
ISA_CAP_VARIABLES = CPU_CAP_VARIABLES[:4]


def utc_now():
    """The current time as UTC ISO 8601 to the second, e.g. 2026-11-27T12:00:00Z."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cpu_info(cpuinfo="/proc/cpuinfo"):
    """(model name, the CPU_FLAGS it has) from /proc/cpuinfo; (platform's name, None) where that file is missing."""
    model, flags = None, None
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model is None:
                    model = value.strip()
                elif key == "flags" and flags is None:
                    have = set(value.split())
                    flags = [f for f in CPU_FLAGS if f in have]
                if model is not None and flags is not None:
                    break
    except OSError:
        pass
    return model or platform.processor() or platform.machine() or "unknown", flags


def gpu_name():
    """The first CUDA GPU's name when PyTorch is already imported and sees one; None otherwise (never imports it)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:  # OneFlow's torch alias or a broken driver: no GPU name, not a failed benchmark
        pass
    return None


def versions():
    """Python and the installed torch / oneflow / numpy versions (None where one is not installed)."""
    out = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit(root=ROOT):
    """(short commit, whether tracked files differ from it), or (None, None) outside a git checkout."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10).stdout.strip()
        if not commit:
            return None, None
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                 capture_output=True, text=True, timeout=30).stdout.strip()
        return commit, bool(changed)
    except (OSError, subprocess.SubprocessError):
        return None, None


def command_line(argv=None):
    """The command as typed, with every absolute path written relative to the project (a results file is committed:
    it names no folder of the machine that measured it): "python benchmarks/x.py --ref ../yolov5"."""
    argv = list(sys.argv if argv is None else argv)
    if argv:  # the script, however it was reached
        argv[0] = os.path.abspath(argv[0])
    return " ".join(["python", *(_relative_arg(a) for a in argv)])


def _relative_arg(arg):
    """One argument with its absolute path (bare, or after --flag=) made relative to the project."""
    flag, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
    if not os.path.isabs(value):
        return arg
    try:
        value = os.path.relpath(os.path.abspath(value), ROOT)
    except ValueError:  # another drive (Windows)
        return arg
    return f"{flag}{eq}{value}"


def cpu_caps(environ=None):
    """The CPU_CAP_VARIABLES set in the environment, {name: value}."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in CPU_CAP_VARIABLES if environ.get(k)}


def held_to(caps):
    """How a results file's cpu_caps read in a table: the instruction sets named ("AVX2") and the libraries held
    besides oneDNN and ATen ("AVX2; MKL, OpenCV, NumPy too"); "" for none."""
    isas = " / ".join(dict.fromkeys(caps[k].upper() for k in ISA_CAP_VARIABLES if caps.get(k)))
    others = [name for key, name in (("MKL_ENABLE_INSTRUCTIONS", "MKL"), ("OPENCV_CPU_DISABLE", "OpenCV"),
                                     ("NPY_DISABLE_CPU_FEATURES", "NumPy")) if caps.get(key)]
    if not others:
        return isas
    return f"{isas}; {', '.join(others)} too" if isas else f"no AVX-512 in {', '.join(others)}"


def run_metadata(gpu=None, argv=None):
    """The "run" record of a measured results file: date, commit, machine, versions, command, source; and, where
    the instruction sets were capped, the caps and a variant naming them."""
    model, flags = cpu_info()
    commit, dirty = git_commit()
    run = {"schema": SCHEMA, "date": utc_now(), "commit": commit, "local_changes": dirty,
           "machine": {"cpu": model, "cpu_flags": flags, "cores": os.cpu_count(), "gpu": gpu or gpu_name()},
           "versions": versions(), "command": command_line(argv), "source": "measured"}
    caps = cpu_caps()
    if caps:
        run["machine"]["cpu_caps"] = caps
        run["variant"] = ("a lesser CPU emulated on both sides (" + ", ".join(f"{k}={v}" for k, v in caps.items())
                          + ")")
    return run


def result_document(benchmark, figures, gpu=None, argv=None):
    """The results file's content: the benchmark's figures (its own keys) with "benchmark" and "run" added."""
    clash = {"benchmark", "run"} & set(figures)
    if clash:
        raise ValueError(f"the figures of {benchmark} use the reserved key(s) {sorted(clash)}")
    return {"benchmark": benchmark, "run": run_metadata(gpu=gpu, argv=argv), **figures}


def default_path(benchmark, tag=None, results_dir=None):
    """benchmarks/results/<benchmark>[_<tag>]_<UTC date and time>.json: a new name for every run."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name = "_".join(x for x in (benchmark, tag, stamp) if x)
    return Path(results_dir or RESULTS_DIR) / f"{name}.json"


def write_result(benchmark, figures, path=None, tag=None, gpu=None, default=None):
    """Write a results file (to path, or a new name in benchmarks/results/) whole or not at all; return its path.
    default: json.dumps' fallback for values it cannot encode (numpy scalars)."""
    import json

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from utils.atomic_files import write_text  # the one write module (imported here: see the module docstring)
    doc = result_document(benchmark, figures, gpu=gpu)
    out = Path(path) if path else default_path(benchmark, tag)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, json.dumps(doc, indent=1, default=default) + "\n")
    return out
