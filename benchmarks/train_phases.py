"""Where a train.py run spends its wall time, phase by phase, for this project or the official trainer.

    python benchmarks/train_phases.py -- .venv-torch/bin/python train.py --data coco128.yaml --cfg yolov5s.yaml \
        --weights '' --img 640 --epochs 2 --batch-size 16 --workers 2 --noval --device cpu
    python benchmarks/train_phases.py --cwd ../yolov5-official -- ../yolov5-official/.venv/bin/python train.py ...

The command's output (stdout and stderr together; progress bars redraw with carriage returns) is read as it comes
and every line or redraw is stamped with the time since the start. Both trainers print the same markers, so the
phases are found in either's output:
  setup            start -> 'Starting training'  (imports, model, dataset scan, loader workers)
  first batch      'Starting training' -> the first training step done (the loader's first batch + one step)
  epoch k          from the previous epoch's end (or the first step) to the last step of epoch k
  validate k       epoch k's last step -> the end of the validation that follows it (none if not validated)
  checkpoints      the end of the last training phase -> 'Validating ...best.pt' (saves, stripping)
  best.pt          'Validating ...best.pt' -> the end of its validation table
  finish           -> the process exit (plots, results.png)
The total also gives the CPU time (user + system) of the run and its loader workers: on a shared machine it moves
less with the load than the wall time. --json FILE writes the phases and every stamped line.
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

# "  0/1   0G  0.1 ...  640:  38%|███▊   | 3/8 [00:26<..." (this project) or "...640: 37% ━━━━── 3/8 32.9s/it" (newer tqdm)
TRAIN_BAR = re.compile(r"^\s*(\d+)/(\d+)\s+\S+\s.*?\d+%.*?\s(\d+)/(\d+)\s")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
VAL_BAR = re.compile(r"Class\s+Images\s+Instances.*?\d+%.*?\s(\d+)/(\d+)\s")


def stamp_output(cmd, cwd=None, env=None):
    """Run cmd; -> (returncode, [(seconds since start, text)] for every line or carriage-return redraw, CPU seconds
    (user + system) of the process and the children it waited for, its loader workers included)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}  # lines as they are printed
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    stamped, buf = [], b""
    while True:
        chunk = p.stdout.read1(65536)
        now = time.perf_counter() - t0
        if not chunk:
            break
        buf += chunk
        *done, buf = re.split(rb"[\r\n]", buf)
        stamped += [(now, s.decode("utf-8", "replace")) for s in done if s.strip()]
    if buf.strip():
        stamped.append((time.perf_counter() - t0, buf.decode("utf-8", "replace")))
    rc = p.wait()
    stamped.append((time.perf_counter() - t0, "<exit>"))
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return rc, stamped, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def phases(stamped):
    """[(phase name, seconds)] from the stamped output of one train.py run (see the module docstring)."""
    started = next((t for t, s in stamped if "Starting training" in s), None)
    if started is None:
        return [("total (no 'Starting training' line)", round(stamped[-1][0], 2))]
    events = [(started, "setup")]  # (time a phase ends, its name)
    first_step, epochs_done, val_done_pending = False, set(), False
    epoch = best = None
    for t, s in stamped:
        if t < started:
            continue
        s = ANSI.sub("", s)
        m = TRAIN_BAR.match(s)
        if m:
            epoch, done, total = int(m.group(1)), int(m.group(3)), int(m.group(4))
            if done >= 1 and not first_step:
                first_step = True
                events.append((t, "first batch"))
            if done == total and epoch not in epochs_done:
                epochs_done.add(epoch)
                events.append((t, f"epoch {epoch}"))
            continue
        v = VAL_BAR.search(s)
        if v and v.group(1) == v.group(2):
            val_done_pending = True  # its end is the table's 'all' line that follows
        elif val_done_pending and re.match(r"^\s*all\s", s):
            val_done_pending = False
            events.append((t, "best.pt validation" if best is not None else f"validate {epoch}"))
        elif "Validating" in s and "best" in s:
            best = t
            events.append((t, "checkpoints"))
    events.append((stamped[-1][0], "finish"))
    out, mark = [], 0.0
    for t, name in events:
        out.append((name, round(t - mark, 2)))
        mark = t
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cwd", default=None, help="folder to run the command in")
    ap.add_argument("--json", default=None)
    ap.add_argument("--show", action="store_true", help="print every stamped line")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    opt = ap.parse_args(argv)
    cmd = opt.cmd[1:] if opt.cmd[:1] == ["--"] else opt.cmd
    rc, stamped, cpu = stamp_output(cmd, cwd=opt.cwd)
    if opt.show or rc:
        for t, s in stamped:
            print(f"{t:8.2f}  {s[:160]}")
    ph = phases(stamped)
    for name, sec in ph:
        print(f"{name:<22}{sec:8.2f} s")
    print(f"{'total':<22}{stamped[-1][0]:8.2f} s   CPU {cpu:.1f} s (user + system, workers included)   rc {rc}")
    if opt.json:
        Path(opt.json).write_text(json.dumps({"cmd": cmd, "rc": rc, "cpu_s": cpu, "phases": ph, "lines": stamped},
                                             indent=0))
    return rc


if __name__ == "__main__":
    sys.exit(main())
