"""Send SIGINT / SIGTERM to a real train.py at a random moment of training or of validation and record what it did.
Used by tests/test_utils/test_signals.py, and by hand for the repeated figure:

    python tests/helpers/signal_trials.py --backend oneflow --trials 10            # Ctrl-C (the whole process group)
    python tests/helpers/signal_trials.py --backend torch --trials 10 --signal TERM --to pid

Each trial prints its exit code, where the signal landed, the stop line and what last.pt holds.
"""
import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

VAL_START = "mAP50-95:   0%"  # the validation bar's first render: one per validation run
VAL_RESULT = re.compile(r"^\s+all\s+\d+\s+\d+", re.M)  # its result line: that validation has ended
TRAIN_HEADER = "box_loss"  # an epoch's header: its training has started
STOP_LINE = re.compile(r"^train: stopped (?:at once )?by (?:a second )?SIG(?:INT|TERM); (.*)$")


def train_args(data, project, name, epochs=30):
    """A tiny run that trains and validates a few batches per epoch, with DataLoader workers."""
    return [str(ROOT / "train.py"), "--data", str(data), "--cfg", "yolov5n.yaml", "--weights", "", "--img", "64",
            "--batch-size", "4", "--epochs", str(epochs), "--device", "cpu", "--workers", "2", "--project",
            str(project), "--name", name, "--noplots", "--noautoanchor"]


class Trial:
    """One train.py process in its own session (so a signal can go to its whole process group, as a terminal's
    Ctrl-C does), its output collected as it comes."""

    def __init__(self, python, backend, args):
        env = {**os.environ, "YOLO_BACKEND": backend, "YOLO_QUIET": "1", "PYTHONUNBUFFERED": "1",
               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        self.p = subprocess.Popen([str(python), *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        self.out, self.lock = [], threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for chunk in iter(lambda: self.p.stdout.read1(4096), b""):
            with self.lock:
                self.out.append(chunk.decode(errors="replace"))

    def text(self):
        with self.lock:
            return "".join(self.out)

    def wait_for(self, phase, count=1, timeout=300):
        """Block until `phase` has begun `count` times (per the output); False if the process ended first."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            if phase_counts(self.text())[phase] >= count:
                return True
            if self.p.poll() is not None:
                return False
            time.sleep(0.01)
        return False

    def wait_for_text(self, text, timeout=300):
        t0 = time.time()
        while time.time() - t0 < timeout:
            if text in self.text():
                return True
            if self.p.poll() is not None:
                return False
            time.sleep(0.01)
        return False

    def send(self, sig, to="group"):
        if to == "group":
            os.killpg(self.p.pid, sig)
        else:
            self.p.send_signal(sig)

    def finish(self, timeout=120):
        """(exit code, seconds it took); 'hang' if it outlived timeout (then it is killed)."""
        t0 = time.time()
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
            rc = "hang"
        self.reader.join(5)
        return rc, time.time() - t0

    def group_alive(self):
        """Whether any process of its group (DataLoader workers) is still there."""
        try:
            os.killpg(self.p.pid, 0)
            return True
        except ProcessLookupError:
            return False


def phase_counts(text):
    """How many times training epochs, validations and post-validation steps (results.csv row, checkpoint save)
    have begun, read from train.py's output."""
    results = len(VAL_RESULT.findall(text.replace("\r", "\n")))
    return {"train": text.count(TRAIN_HEADER), "val": text.count(VAL_START), "save": results}


def landed_in(text):
    n = phase_counts(text)
    if n["val"] > n["save"]:
        return "val"
    return "save" if n["save"] and n["save"] >= n["train"] else "train"


def read_epoch(last):
    """The epoch last.pt holds, read with the project's reader (raises if it is unreadable)."""
    from utils.checkpoint import load_any
    return int(load_any(last)["epoch"])


def run_trial(python, backend, data, project, name, phase="train", sig=signal.SIGINT, to="group", rng=random,
              epochs=30, second_after=None):
    """Start train.py, wait for `phase` ('train', 'val' or 'save': what follows a validation) of a random early
    epoch, sleep a random moment into it and send `sig` (and, with second_after, the same signal again that many
    seconds later). Returns a dict."""
    t = Trial(python, backend, train_args(data, project, name, epochs))
    started = t.wait_for(phase, count=rng.randint(1, 3))
    time.sleep(rng.uniform(0.0, {"train": 0.6, "val": 0.25, "save": 1.0}[phase]))
    out_before = t.text()
    t.send(sig, to)
    if second_after is not None:
        time.sleep(second_after)
        if t.p.poll() is None:
            t.send(sig, to)
    rc, secs = t.finish()
    time.sleep(0.5)
    text = t.text()
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines()]
    stop_lines = [ln for ln in lines if STOP_LINE.match(ln)]
    last = Path(project) / name / "weights" / "last.pt"
    try:
        last_epoch = read_epoch(last) if last.exists() else None
        readable = True
    except Exception as e:  # the point of the trial: report, do not crash
        last_epoch, readable = f"unreadable: {e}", False
    return {"rc": rc, "secs": round(secs, 1), "started": started, "phase": landed_in(out_before),
            "stop_lines": stop_lines, "last_exists": last.exists(), "last_epoch": last_epoch, "readable": readable,
            "traceback": "Traceback" in text, "workers_left": t.group_alive(),
            "tail": "\n".join(lines[-int(os.environ.get("TAIL_LINES", 40)):])}  # enough for a whole traceback


def explain(result, sig=signal.SIGINT):
    """A failed trial as a test reports it: the broken promises, then the output's last lines (a traceback shows
    whole there, where pytest would shorten the result dict to its first keys)."""
    return (f"{'; '.join(check(result, sig))} (exit {result['rc']} after {result['secs']} s, signal landed in "
            f"{result['phase']}); the output ended:\n{result['tail']}")


def check(result, sig=signal.SIGINT):
    """The promises, as a list of broken ones (empty when all held)."""
    bad = []
    if result["rc"] != 128 + sig:
        bad.append(f"exit code {result['rc']} (expected {128 + sig})")
    if len(result["stop_lines"]) != 1:
        bad.append(f"{len(result['stop_lines'])} stop lines")
    elif result["last_exists"]:
        if not result["readable"]:
            bad.append(f"last.pt {result['last_epoch']}")
        elif f"holds epoch {result['last_epoch']};" not in result["stop_lines"][0]:
            bad.append(f"line does not say last.pt holds epoch {result['last_epoch']}")
    elif "no checkpoint was written yet" not in result["stop_lines"][0]:
        bad.append("no last.pt, but the line does not say so")
    if result["traceback"]:
        bad.append("a traceback was printed")
    if result["workers_left"]:
        bad.append("a process of its group outlived it")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="oneflow", choices=["oneflow", "torch"])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--signal", default="INT", choices=["INT", "TERM"])
    ap.add_argument("--to", default="group", choices=["group", "pid"], help="the process group (Ctrl-C) or the pid")
    ap.add_argument("--phases", default="train,val", help="where to aim, in turn: train, val, save")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    from tests.helpers.train_helpers import make_tiny_dataset
    rng = random.Random(a.seed)
    sig = getattr(signal, f"SIG{a.signal}")
    python = ROOT / f".venv-{a.backend}" / "bin" / "python"
    held = 0
    with tempfile.TemporaryDirectory() as tmp:
        data = make_tiny_dataset(Path(tmp) / "data", n_train=16, n_val=16, size=96)
        for i in range(a.trials):
            phases = a.phases.split(",")
            phase = phases[i % len(phases)]
            r = run_trial(python, a.backend, data, Path(tmp) / "runs", f"t{i}", phase, sig, a.to, rng)
            bad = check(r, sig)
            held += not bad
            print(f"trial {i + 1}: aimed at {phase}, landed in {r['phase']}: exit {r['rc']} after {r['secs']} s, "
                  f"last.pt {'epoch ' + str(r['last_epoch']) if r['last_exists'] else 'absent'}; "
                  f"{'OK' if not bad else 'BROKEN: ' + '; '.join(bad)}\n    {r['stop_lines'] or r['tail']}", flush=True)
    print(f"{held}/{a.trials} trials kept every promise ({a.backend}, SIG{a.signal} to the {a.to})")
    return 0 if held == a.trials else 1


if __name__ == "__main__":
    sys.exit(main())
