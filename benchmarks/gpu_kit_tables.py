"""The GPU kit's pure parts (benchmarks/gpu_kit.py runs the kit): its sizes and budgets per mode, the repeated
dataset, the acceptance table, and the readings of the children's outputs. Unit-tested in
tests/test_benchmarks/test_gpu_kit.py."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("cuda_tests", "train", "profile", "loader", "candidates")
FLAGS_ON = ("--bbox_iou_optim", "--multi_tensor_optimizer")


# ----------------------------------------------------------------------------------------------------------------
# sizes and data
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



def coco128_names():
    """The class names of data/coco128.yaml, as a list (the repeated datasets' names)."""
    import yaml
    names = yaml.safe_load(open(ROOT / "data" / "coco128.yaml"))["names"]
    return [names[i] for i in sorted(names)] if isinstance(names, dict) else names


# ----------------------------------------------------------------------------------------------------------------
# readings (unit-tested)
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

