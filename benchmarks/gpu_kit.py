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
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gpu_kit_children import Kit, machine  # noqa: E402
from benchmarks.gpu_kit_sections import candidates, cuda_tests, loader, profile, train  # noqa: E402
from benchmarks.gpu_kit_tables import SECTIONS  # noqa: E402


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
