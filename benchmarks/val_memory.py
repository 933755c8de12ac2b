"""Peak memory of a validation: val.py (or a tiny training, whose final validation is the heaviest part) run as a
child process while its whole process tree (loader workers, plot helpers) is sampled from /proc every 0.1 s.

    python benchmarks/val_memory.py                          # val.py, yolov5n, coco128, --img 640, CPU
    python benchmarks/val_memory.py --img 320 --batch-size 16
    python benchmarks/val_memory.py --train                  # train.py 1 epoch, then its final validation
    python benchmarks/val_memory.py --ref ../yolov5          # also an official ultralytics/yolov5 checkout's val.py

Figures: the main process's peak RSS (what the kernel's own accounting shows for it) and the tree's peak PSS
(proportional set size: a page shared by k processes counts 1/k in each, so the sum counts shared pages once, which
is close to what a memory cgroup charges), with the tree's peak RSS sum for comparison (shared pages counted in
every process). The JSON goes to benchmarks/results/val_memory[_<tag>].json. Data: ../shared/data/coco128 and
../shared/weights/yolov5n.pt beside the project (or --data / --weights).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
MB = 1 << 20


def _children_map():
    """{parent pid: [child pids]} of every process now."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the name in () may hold spaces
        kids.setdefault(ppid, []).append(int(d))
    return kids


def process_tree(pid):
    """pid and all its descendants."""
    kids, out, todo = _children_map(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def rollup(pid):
    """(rss, pss) in bytes from /proc/<pid>/smaps_rollup; None when the process is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            text = f.read()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss"):
            values[key] = int(rest.split()[0]) * 1024
    return values.get("Rss", 0), values.get("Pss", 0)


class TreeSampler(threading.Thread):
    """Samples the tree under pid every interval seconds until stop(); keeps the peaks and the process count."""

    def __init__(self, pid, interval=0.1):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_main_rss = self.peak_tree_pss = self.peak_tree_rss = 0
        self.peak_at_tree_pss = {}  # {pid: (rss, pss)} at the tree's PSS peak
        self.max_processes = 0
        self._done = threading.Event()

    def run(self):
        while not self._done.is_set():
            sizes = {p: r for p in process_tree(self.pid) if (r := rollup(p)) is not None}
            if sizes:
                self.max_processes = max(self.max_processes, len(sizes))
                self.peak_main_rss = max(self.peak_main_rss, sizes.get(self.pid, (0, 0))[0])
                self.peak_tree_rss = max(self.peak_tree_rss, sum(r for r, _ in sizes.values()))
                pss = sum(p for _, p in sizes.values())
                if pss > self.peak_tree_pss:
                    self.peak_tree_pss, self.peak_at_tree_pss = pss, sizes
            self._done.wait(self.interval)

    def stop(self):
        self._done.set()
        self.join()


def measure(cmd, cwd, env=None, interval=0.1):
    """Run cmd, sampling its tree. Returns a dict of figures in MB (and the exit status, wall time)."""
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = TreeSampler(proc.pid, interval)
    sampler.start()
    out = proc.communicate()[0]
    sampler.stop()
    at_peak = sampler.peak_at_tree_pss
    main = at_peak.get(proc.pid, (0, 0))
    return {
        "rc": proc.returncode,
        "wall_s": round(time.time() - t0, 1),
        "peak_main_rss_mb": round(sampler.peak_main_rss / MB),
        "peak_tree_pss_mb": round(sampler.peak_tree_pss / MB),
        "peak_tree_rss_sum_mb": round(sampler.peak_tree_rss / MB),
        "at_tree_peak": {"main_pss_mb": round(main[1] / MB),
                         "children_pss_mb": sorted((round(p / MB) for q, (_, p) in at_peak.items() if q != proc.pid),
                                                   reverse=True)},
        "max_processes": sampler.max_processes,
        # official NMS stops at 0.5 + 0.05 * batch s and leaves the rest of the batch empty: on a loaded machine the
        # figures then vary from run to run, whatever the memory does
        "nms_time_limit_cuts": out.count("NMS time limit"),
        "output_tail": out[-1500:],
    }


def data_yaml(folder, data_root):
    """A data YAML naming the coco128 copy beside the project (the bundled data/coco128.yaml downloads)."""
    names = {i: f"class{i}" for i in range(80)}
    f = Path(folder) / "coco128_local.yaml"
    lines = [f"path: {data_root}", "train: images/train2017", "val: images/train2017", "names:"]
    lines += [f"  {i}: {n}" for i, n in names.items()]
    f.write_text("\n".join(lines) + "\n")
    return f


def with_headroom(python, folder, mb):
    """A command prefix that runs a script with utils.memory_limits reading MemAvailable = mb and no cgroup."""
    meminfo = Path(folder) / "meminfo"
    meminfo.write_text(f"MemAvailable: {mb * 1024} kB\n")
    code = ("import runpy, sys; sys.path.insert(0, '.'); import utils.memory_limits as m; "
            f"m.MEMINFO = {str(meminfo)!r}; m.CGROUP_ROOT = m.PROC_SELF_CGROUP = {str(folder)!r}; "
            "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    return [python, "-c", code]


def val_command(python, script, opt, data, project, prefix=None):
    return (prefix or [python]) + [str(script), "--weights", str(opt.weights), "--data", str(data), "--img", str(opt.img),
            "--batch-size", str(opt.batch_size), "--device", "cpu", "--workers", str(opt.workers),
            "--project", str(project), "--name", "exp"]


def train_command(python, opt, data, project, prefix=None):
    return (prefix or [python]) + [str(ROOT / "train.py"), "--weights", str(opt.weights), "--data", str(data), "--img",
            str(opt.img), "--batch-size", str(opt.batch_size), "--epochs", "1", "--device", "cpu", "--workers",
            str(opt.workers), "--project", str(project), "--name", "exp"]


def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", default=str(SHARED / "weights" / "yolov5n.pt"))
    p.add_argument("--data-root", default=str(SHARED / "data" / "coco128"), help="a coco128-layout folder")
    p.add_argument("--img", type=int, default=640)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--train", action="store_true", help="a 1-epoch train.py run instead of val.py")
    p.add_argument("--ref", default=None, help="an official ultralytics/yolov5 checkout: measure its val.py too")
    p.add_argument("--ref-python", default=sys.executable, help="the Python that runs --ref's val.py")
    p.add_argument("--tag", default="", help="suffix of the JSON file name (before/after figures side by side)")
    p.add_argument("--interval", type=float, default=0.1)
    p.add_argument("--headroom-mb", type=int, default=None,
                   help="simulate a container: the run reads this fixed figure as its available memory (its "
                        "utils.memory_limits is pointed at a made-up meminfo and no cgroup), so chunking shows")
    return p.parse_args(argv)


def main(opt):
    results = {"command": "train" if opt.train else "val", "img": opt.img, "batch_size": opt.batch_size,
               "workers": opt.workers, "python": sys.executable, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        data = data_yaml(tmp, opt.data_root)
        prefix = None if opt.headroom_mb is None else with_headroom(sys.executable, tmp, opt.headroom_mb)
        results["simulated_headroom_mb"] = opt.headroom_mb
        cmd = (train_command(sys.executable, opt, data, Path(tmp) / "runs", prefix) if opt.train else
               val_command(sys.executable, ROOT / "val.py", opt, data, Path(tmp) / "runs", prefix))
        results["project"] = measure(cmd, ROOT, interval=opt.interval)
        if opt.ref:
            ref = Path(opt.ref).resolve()
            cmd = val_command(opt.ref_python, ref / "val.py", opt, data, Path(tmp) / "ref_runs")
            results["official"] = measure(cmd, ref, interval=opt.interval)
    for side in ("project", "official"):
        if side in results:
            r = results[side]
            print(f"{side:9s} rc={r['rc']} {r['wall_s']:6.1f}s  main peak RSS {r['peak_main_rss_mb']} MB, "
                  f"tree peak PSS {r['peak_tree_pss_mb']} MB (main {r['at_tree_peak']['main_pss_mb']} + children "
                  f"{r['at_tree_peak']['children_pss_mb']}), tree RSS sum {r['peak_tree_rss_sum_mb']} MB, "
                  f"{r['max_processes']} processes at most")
            if r["rc"]:
                print(r["output_tail"])
    out = ROOT / "benchmarks" / "results" / f"val_memory{'_' + opt.tag if opt.tag else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from utils.atomic_files import write_text  # the project's one write path (whole file or nothing)
    write_text(out, json.dumps(results, indent=1) + "\n")
    print(f"saved {out}")
    return results


if __name__ == "__main__":
    main(parse_opt())
