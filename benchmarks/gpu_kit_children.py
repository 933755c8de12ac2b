"""The GPU kit's runner (benchmarks/gpu_kit.py): the Kit that runs each section's children with their time limits and
logs, rewrites gpu_kit.json after every section, and reads the machine; nvidia-smi's peak memory of one child."""
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

from benchmarks.gpu_kit_tables import ROOT, assemble, plan
from benchmarks.results_io import command_line, run_metadata

# environment of this project's children; the official children get neither these nor the launcher variables
OWN_ENV = {"YOLO_BACKEND": "torch", "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg"}
DROP_FOR_OFFICIAL = ("YOLO_BACKEND", "_YOLO_BACKEND_ANNOUNCED", "YOLO_QUIET", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                     "MASTER_ADDR", "MASTER_PORT", "GPU_KIT_TEST_DEVICE")


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
            kill_group(p)
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


def kill_group(p):
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



def machine(kit):
    code = ("import json, platform, torch\n"
            "c = torch.cuda.is_available()\n"
            "try:\n    import triton; tv = triton.__version__\nexcept Exception:\n    tv = None\n"
            "print('GPU_KIT_META ' + json.dumps({'device': torch.cuda.get_device_name(0) if c else 'cpu', "
            "'torch': torch.__version__, 'cuda': torch.version.cuda, 'triton': tv, 'cuda_available': c}))")
    rc, out, _ = kit.run([sys.executable, "-c", code], 120, label="meta")
    m = re.search(r"^GPU_KIT_META (.*)$", out, re.M)
    meta = json.loads(m.group(1)) if m else {"device": None, "torch": None, "error": out[-500:]}
    meta["kit"] = {"command": command_line(), "mode": kit.plan["mode"],
                   "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "python": platform.python_version(),
                   "cpu": _cpu_name(), "cores": os.cpu_count(), "ref": kit.opt.ref, "plan": kit.plan}
    return meta


def _cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
