"""Training-loader benchmark: images/s through the real DataLoader (workers, collate, transfer to the main process)
and the per-stage cost measured in-process on one core.

    python benchmarks/loader.py                                 # coco128, 640, hyp.scratch-low, 1 worker
    python benchmarks/loader.py --data shapes.yaml --img 256 --workers 2
    python benchmarks/loader.py --classic                       # ultralytics-style canvas + full warp, to compare

--data takes a dataset YAML or an images folder; the default coco128 uses ../shared/data/coco128 when
data/coco128.yaml's own folder is missing, so it runs offline. The figures go to a results file (--json, default a
new loader_<time>.json in benchmarks/results/) besides the printed lines.
"""
import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import cv2  # noqa: E402
import yaml  # noqa: E402

from benchmarks.classic_loader import ClassicLoadImagesAndLabels  # noqa: E402
from benchmarks.results_io import write_result  # noqa: E402
from utils.data import LoadImagesAndLabels, StageTimer, make_loader  # noqa: E402
from utils.dataset_config import check_dataset  # noqa: E402


def resolve_train_path(data):
    if data == "coco128":
        shared = ROOT.parent / "shared" / "data" / "coco128"
        try:
            return check_dataset("coco128.yaml", autodownload=False)["train"]
        except FileNotFoundError:
            if shared.is_dir():
                return str(shared / "images" / "train2017")
            raise
    if Path(data).is_dir():
        return str(data)
    return check_dataset(data)["train"]


def children_cpu_seconds():
    """utime+stime of this process's live children (the loader workers), from /proc; None off Linux."""
    total, me, tick = 0.0, str(os.getpid()), os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    try:
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        parts = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if parts[1] == me:  # field 4: ppid
                    total += (int(parts[11]) + int(parts[12])) / tick  # fields 14, 15: utime, stime
    except OSError:
        return None
    return total


def build_dataset(path, opt, hyp):
    dataset = ClassicLoadImagesAndLabels if opt.classic else LoadImagesAndLabels
    return dataset(path, opt.img, opt.batch_size, augment=True, hyp=hyp, cache_images=opt.cache)


def throughput(path, opt, hyp):
    loader = make_loader(build_dataset(path, opt, hyp), opt.batch_size, workers=opt.workers, shuffle=True, seed=0)
    n = 0
    for imgs, *_ in loader:  # warm-up epoch: worker start, first reads
        n += imgs.shape[0]
    c0, m0 = children_cpu_seconds(), time.process_time()
    t0, n = time.perf_counter(), 0
    while n < opt.images:
        for imgs, *_ in loader:
            n += imgs.shape[0]
    dt = time.perf_counter() - t0
    c1, m1 = children_cpu_seconds(), time.process_time()
    workers_cpu = c1 - c0 if c0 is not None and loader.num_workers else 0.0
    return n / dt, n, dt, loader.num_workers, (workers_cpu, m1 - m0)


def stages(path, opt, hyp):
    """Per-stage cost, in this process with OpenCV sequential (what one worker does: create_dataloader switches
    OpenCV's pool off before the workers fork; thread CPU time would also miss the pool's threads)."""
    cv2.setNumThreads(0)
    timer = StageTimer(clock=time.thread_time)
    ds = timer.install(build_dataset(path, opt, hyp))
    import random
    random.seed(0)
    n, t_collate, t0 = 0, 0.0, time.thread_time()
    idx = list(range(len(ds)))
    while n < opt.images:
        random.shuffle(idx)
        for b in range(0, len(idx), opt.batch_size):
            items = [ds[i] for i in idx[b:b + opt.batch_size]]
            tc = time.thread_time()
            LoadImagesAndLabels.collate_fn(items)
            t_collate += time.thread_time() - tc
            n += len(items)
    total = time.thread_time() - t0
    t = dict(timer.t)
    t["collate"] = t_collate
    return {k: v / n * 1e3 for k, v in t.items()}, total / n * 1e3


def main(opt):
    with open(opt.hyp if Path(opt.hyp).is_file() else ROOT / "data" / "hyps" / Path(opt.hyp).name) as f:
        hyp = yaml.safe_load(f)
    path = resolve_train_path(opt.data)
    mode = "classic (canvas + full warp)" if opt.classic else "fused (one warp per tile)"
    print(f"loader benchmark: {path}  img {opt.img}  batch {opt.batch_size}  hyp {Path(opt.hyp).name}  "
          f"cache {opt.cache}  mosaic {mode}  cpus {os.cpu_count()}")
    figures = {"data": str(opt.data), "img": opt.img, "batch": opt.batch_size, "workers": opt.workers,
               "hyp": Path(opt.hyp).name, "cache": opt.cache, "formulation": "classic" if opt.classic else "project",
               "load_start": round(os.getloadavg()[0], 2)}
    ips, n, dt, nw, cpu = throughput(path, opt, hyp)
    print(f"throughput: {ips:.1f} images/s with {nw} worker(s) ({n} images in {dt:.2f}s wall, after a warm-up epoch)")
    wcpu, mcpu = cpu
    print(f"  CPU per image: workers {wcpu / n * 1e3:.2f} ms, main process {mcpu / n * 1e3:.2f} ms -> "
          f"{n / max(wcpu + mcpu, 1e-9):.1f} images per CPU-second in all"
          + (f", {n / wcpu * nw:.1f} images/s for {nw} worker(s) that each own a core" if nw and wcpu else ""))
    print(f"  (load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus: wall figures shrink when the "
          f"machine is shared, CPU figures much less)")
    figures.update(img_s=round(ips, 1), images=n, wall_s=round(dt, 3),
                   workers_cpu_ms_per_image=round(wcpu / n * 1e3, 3),
                   main_cpu_ms_per_image=round(mcpu / n * 1e3, 3), load_end=round(os.getloadavg()[0], 2))
    if not opt.no_stages:
        per, total = stages(path, opt, hyp)
        print("per-stage CPU cost, one process, OpenCV sequential like a worker (CPU ms/image, robust to other load):")
        order = ["read/decode", "mosaic", "perspective", "letterbox/perspective", "hsv", "flip/format", "collate"]
        for k in order + [k for k in per if k not in order]:
            if k in per:
                print(f"  {k:<22s}{per[k]:7.2f}")
        print(f"  {'total':<22s}{total:7.2f}  ({1e3 / total:.1f} images/s per dedicated core)")
        figures["stage_cpu_ms_per_image"] = {k: round(v, 3) for k, v in per.items()}
        figures["total_cpu_ms_per_image"] = round(total, 3)
    print(f"wrote {write_result('loader', figures, path=opt.json)}")


def parse_opt(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="coco128", help="dataset YAML, images folder, or 'coco128'")
    p.add_argument("--img", "--imgsz", type=int, default=640)
    p.add_argument("--hyp", default=str(ROOT / "data" / "hyps" / "hyp.scratch-low.yaml"))
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--images", type=int, default=512, help="images to time (after a warm-up epoch)")
    p.add_argument("--cache", default=None, choices=[None, "ram", "disk"])
    p.add_argument("--classic", action="store_true", help="ultralytics-style mosaic path, for comparison")
    p.add_argument("--no-stages", action="store_true", help="skip the per-stage measurement")
    p.add_argument("--json", default=None, help="results file (default: a new one in benchmarks/results/)")
    return p.parse_args(argv)


if __name__ == "__main__":
    main(parse_opt())
