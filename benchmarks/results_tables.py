"""The tables of docs/benchmarks.md: the cells (figures, machine, date, source) and one function per results kind that
turns a results file into (header, rows) (benchmarks/render_results.py lays them out on the page)."""
from pathlib import Path

from benchmarks.results_io import held_to

FLAG_NAMES = {"avx2": "AVX2", "avx512f": "AVX-512", "avx512_bf16": "AVX512-BF16", "amx_tile": "AMX"}
# the titles and introductions of each kind's section
TITLES = {
    "compare_train": ("Whole runs against the official scripts (`compare_train.py`)",
                      "Wall time of whole `train.py` / `val.py` runs (and the segment/classify ones) on coco128 "
                      "copies, this project and the official code alternating; medians. Ratio: official time over "
                      "this project's (above 1: this project is faster). Peak memory: the process tree's "
                      "proportional set size (PSS), or its resident set size where marked RSS (sampling PSS slowed "
                      "the runs, so files from 2026-11-28 on read RSS; shared pages count in each process, on both "
                      "sides alike)."),
    "gpu_kit": ("The GPU kit's training rows (`gpu_kit.py`)",
                "Images/s over the timed epochs of yolov5s from scratch on one GPU, both trainers timed from "
                "outside by `train_clock.py`; ratio: this project over official."),
    "train_clock": ("Steady-state training images/s (`train_clock.py`)",
                    "Images/s over the epochs after a warm-up epoch, each trainer clocked from outside its code; "
                    "ratio: this project over official in each alternating pair."),
    "loader": ("Training loader (`loader.py`)",
               "Images/s through the real DataLoader after a warm-up epoch, and the CPU cost per image of one "
               "worker. Wall rates shrink on a shared machine; the CPU figures much less."),
    "cpu_levers": ("CPU levers per step (`cpu_levers.py`)",
                   "Each lever alone and together against the fp32 NCHW step (x: times faster)."),
    "conv_grad": ("3x3 weight gradients from NCHW copies, where oneDNN runs AVX2 kernels (`conv_grad.py`)",
                  "Forward and backward of the whole model on a channels_last batch, median ms of alternating steps: "
                  "oneDNN's channels_last gradients (native), the weight gradient of 3x3 convolutions on inputs of at "
                  "most 80x80 pixels from NCHW copies (nchw), of every 3x3 (nchw-all). x: native over the policy."),
    "bn_silu": ("BatchNorm + SiLU as one C kernel (`bn_silu.py`)",
                "Forward and backward of the whole model on a channels_last batch (fp32, or under bf16 autocast), "
                "median ms of alternating steps: PyTorch's BatchNorm and SiLU kernels (modules) against the fused "
                "kernel; and the sum over the model's layers of each BatchNorm + SiLU alone (best of its calls). "
                "x: modules over kernel."),
    "loss_reads": ("The loss's reads of the head maps (`loss_reads.py`)",
                   "The loss's forward and backward on random maps of the three levels (batch 16, 200 targets), "
                   "median ms of alternating runs: plain indexing of each map's fp32 copy (the formulation before, "
                   "OneFlow's) against head_reads, whose backward writes the map's gradient once. x: plain over "
                   "head_reads; bit-equal: the same loss and map gradients."),
    "speed": ("Kernels and steps (`speed.py`)", "Training step with `--bbox_iou_optim --multi_tensor_optimizer` "
                                                "against without (x: times faster)."),
    "launches": ("Launches per training step (`launches.py`)",
                 "Non-view aten ops of one training step, counted with PyTorch's dispatch mode (the same on any "
                 "machine); fewer is better on a launch-bound GPU."),
    "learning_study": ("Does it learn the same? (`learning_study.py`)",
                       "The same training under each configuration and several seeds, alternating; each run's figures "
                       "are its last epoch's validation (results.csv). Per configuration: mean ± std over the seeds, "
                       "and the lowest and highest run; per pair: the difference of the means with 95% intervals "
                       "(Welch's t and the bootstrap; with few seeds the bootstrap's is too narrow, read Welch's). An "
                       "interval that includes 0 means the runs cannot tell the two apart."),
    "step_profile": ("Where a CPU training step's time goes (`step_profile.py`)",
                     "Operators' own CPU time per step under torch.profiler, grouped; official / this project."),
    "sliced_vs_sahi": ("Sliced prediction against SAHI (`sliced_vs_sahi.py`)",
                       "The same weights, images and slice/merge settings through sahi 0.12.8 and this project, the "
                       "two alternating image by image; boxes matched one to one (docs/sliced-inference.md)."),
    "sliced_demo": ("Small objects: plain against sliced validation (`sliced_demo.py`)",
                    "yolov5n trained on tiles of shapes canvases with small objects, then val.py on the whole "
                    "canvases plain and with --slice: pycocotools' AP by object size."),
    "twin_replay": ("One step against the official step (`twin_replay.py`)",
                    "Both trainers from one initial model (built and fp16-rounded by the official code) on the "
                    "official loader's recorded batches, this project with NCHW input; gaps are relative loss "
                    "differences from the official run, against a second official run with lr0 nudged by 1e-7 (how "
                    "fast a rounding-sized difference grows). The lr of every epoch must be equal."),
    "demo": ("The demos (`make train-demo`)", "What the 30-epoch shapes demo (10 for classification) learns, and its "
                                              "wall time."),
}

SCRIPTS = {"detect": "", "segment": "segment/", "classify": "classify/"}


# ----------------------------------------------------------------------------------------------------------------
# cells
def num(x, nd=1, suffix=""):
    return "-" if x is None else f"{x:.{nd}f}{suffix}" if isinstance(x, (int, float)) else str(x)


def ratio(x):
    return num(x, 2, "x")


def machine(run):
    m = run.get("machine") or {}
    if m.get("gpu"):
        return m["gpu"]
    flags = m.get("cpu_flags")
    feats = ", ".join(FLAG_NAMES[f] for f in FLAG_NAMES if flags and f in flags)
    cores = f", {m['cores']} cores" if m.get("cores") else ""
    caps = m.get("cpu_caps") or {}
    held = f", held to {held_to(caps)}" if caps else ""
    return f"{m.get('cpu') or 'unknown CPU'}{cores}" + (f" ({feats}{held})" if feats or held else "")


def day(run):
    return (run.get("date") or "?")[:10]


def source(run):
    commit = run.get("commit") or "?"
    if run.get("source", "measured") == "measured":
        return f"measured at {commit}" + (" + local changes" if run.get("local_changes") else "")
    return f"transcribed ({commit})"


def table(header, rows):
    """A Markdown table; header cells starting with '>' are right-aligned numbers."""
    names = [h.lstrip(">") for h in header]
    align = ["---:" if h.startswith(">") else "---" for h in header]
    lines = ["| " + " | ".join(names) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------------
# one function per kind: (header, rows) from one file
def compare_train_rows(doc):
    task = doc.get("task", "detect")
    folder = SCRIPTS.get(task, "")
    lines = [(f"`{folder}train.py` {_model_name(v)} {v.get('img')}", v) for v in (doc.get("train") or {}).values()]
    if doc.get("val"):
        v = doc["val"]
        lines.append((f"`{folder}val.py` {_model_name(v, weights_first=True)} {v.get('img', '?')}", v))
    rows = []
    for what, v in lines:
        o, p = v.get("official") or {}, v.get("project") or {}
        rows.append([what, num(o.get("median_s"), 1, " s"), num(p.get("median_s"), 1, " s"),
                     ratio(v.get("ratio_official_over_project")),
                     f"{num(o.get('median_cpu_s'))} / {num(p.get('median_cpu_s'))}",
                     f"{num(o.get('peak_mib'), 0)} / {num(p.get('peak_mib'), 0)}{memory_mark(doc)}", trained_in(p)])
    return ["run", ">official", ">project", ">ratio", ">CPU s off. / proj.", ">peak MiB off. / proj.",
            "project trained in"], rows


def memory_mark(doc):
    """' RSS' for files whose peak memory is the process tree's resident set size; files from before compare_train
    wrote its metric hold PSS (unmarked)."""
    return " RSS" if "RSS" in str(doc.get("memory") or "") else ""


def trained_in(side):
    """What one side's training runs computed in ("bf16", "fp32", "bf16, fp32" when they differed), from the runs'
    records; "-" for validation rows and for files from before compare_train recorded it."""
    kinds = sorted({r["precision"] for r in side.get("runs") or [] if r.get("precision")})
    return ", ".join(kinds) or "-"


def _cfg_name(v):
    """yolov5s for yolov5s.yaml or models/yolov5s.yaml; '?' when there is none."""
    return Path(str(v.get("cfg"))).stem if v.get("cfg") else "?"


def _model_name(v, weights_first=False):
    """The model a row ran: its YAML's name (training from a YAML), else its weights' name (a checkpoint)."""
    weights = Path(str(v.get("weights") or "")).stem
    weights = weights if weights and not weights.startswith("(") else ""
    cfg = Path(str(v["cfg"])).stem if v.get("cfg") else ""
    return (weights or cfg if weights_first else cfg or weights) or "?"


def gpu_kit_rows(doc):
    rows = []
    for r in (doc.get("train") or {}).get("rows") or []:
        rows.append([f"{r.get('model')} {r.get('img')} b{r.get('batch')}", r.get("flags") or "(no flags)",
                     num(r.get("official_img_s")), num(r.get("project_img_s")), ratio(r.get("ratio")),
                     f"{num(r.get('official_peak_mib'), 0)} / {num(r.get('project_peak_mib'), 0)}"])
    return ["run", "flags", ">official img/s", ">project img/s", ">ratio", ">peak MiB off. / proj."], rows


def train_clock_rows(doc):
    what = f"{_cfg_name(doc) or '?'} {doc.get('img', '')} b{doc.get('batch', '?')}"
    header = ["run", ">official img/s", ">project img/s", ">ratio"]
    if "pairs" in doc:
        return header, [[what, num(p.get("official_img_s")), num(p.get("project_img_s")), ratio(_pair_ratio(p))]
                        for p in doc["pairs"]]
    trainer = str((doc.get("run") or {}).get("trainer") or "")
    return header, [[f"{Path(trainer).parent.name or '?'}/{Path(trainer).name} ({doc.get('device', '?')})", "-",
                     num(doc.get("img_s")), "-"]]


def _pair_ratio(p):
    """The ratio as recorded (of unrounded rates) where there is one, else from the two rates."""
    if p.get("ratio") is not None:
        return p["ratio"]
    o, n = p.get("official_img_s"), p.get("project_img_s")
    return n / o if o and n else None


def loader_rows(doc):
    return ["formulation", ">img", ">workers", ">img/s", ">CPU ms/image, one worker", "load average"], [[
        doc.get("formulation", "project"), doc.get("img", "-"), doc.get("workers", "-"), num(doc.get("img_s")),
        num(doc.get("total_cpu_ms_per_image"), 2),
        "-" if doc.get("load_start") is None else f"{num(doc.get('load_start'))} -> {num(doc.get('load_end'))}"]]


def cpu_levers_rows(doc):
    rows = []
    for phase, label in (("train", "training step"), ("val", "validation forward")):
        for block in doc.get(phase) or []:
            for r in block.get("rows") or []:
                if r.get("variant") != "fp32":
                    rows.append([f"{label} {_cfg_name(block)} {block.get('img')} b{block.get('batch')}",
                                 r.get("variant"), num(r.get("ms"), 1), num(r.get("x_vs_fp32"), 2, "x")])
    return ["step", "variant", ">ms", ">vs fp32"], rows


def conv_grad_rows(doc):
    isa = ", ".join(f"{k}={v}" for k, v in (doc.get("isa_env") or {}).items() if v) or "the CPU's own"
    steps = doc.get("step") or {}
    base = (steps.get("native") or {}).get("median_ms")
    rows = [[f"{_cfg_name(doc)} {doc.get('img')} b{doc.get('batch')}", isa, name, num(s.get("median_ms"), 1),
             num(base / s["median_ms"] if base and s.get("median_ms") else None, 3, "x")] for name, s in steps.items()]
    return ["step", "oneDNN / ATen ISA", "policy", ">ms", ">x"], rows


def bn_silu_rows(doc):
    isa = ", ".join(f"{k}={v}" for k, v in (doc.get("isa_env") or {}).items() if v) or "the CPU's own"
    name = f"{_cfg_name(doc)} {doc.get('img')} b{doc.get('batch')}"
    acts = "bf16 (autocast)" if doc.get("amp") == "bf16" else "fp32"
    rows = []
    layers = doc.get("layers_total_ms") or {}
    if layers.get("modules") and layers.get("kernel"):
        rows.append([name, isa, acts, "layers alone", num(layers["modules"], 1), num(layers["kernel"], 1),
                     num(layers["modules"] / layers["kernel"], 2, "x")])
    steps = doc.get("step") or {}
    a, b = (steps.get("modules") or {}).get("median_ms"), (steps.get("kernel") or {}).get("median_ms")
    if a and b:
        rows.append([name, isa, acts, "whole step", num(a, 1), num(b, 1), num(a / b, 2, "x")])
    return ["model", "ISA caps", "activations", "measured", ">modules ms", ">kernel ms", ">x"], rows


def loss_reads_rows(doc):
    rows = []
    for r in doc.get("rows") or []:
        ms = r.get("ms") or {}
        rows.append([f"{_cfg_name(r)} {r.get('img')} b{r.get('batch')}", r.get("dtype"), num(ms.get("plain"), 1),
                     num(ms.get("head_reads"), 1), num(r.get("x"), 2, "x"), "yes" if r.get("bit_equal") else "no"])
    return ["loss of", "maps", ">plain ms", ">head_reads ms", ">x", "bit-equal"], rows


def speed_rows(doc):
    info = doc.get("info") or {}
    rows = [[f"{info.get('device', '?')} b{r.get('batch')}", "AMP" if r.get("amp") else "fp32",
             num(r.get("e2e_speedup"), 2, "x"), num(r.get("amortised_speedup"), 2, "x")]
            for r in doc.get("train_step_speedup_flags") or []]
    return ["step", "precision", ">end to end", ">amortised"], rows


def launches_rows(doc):
    o, oc = doc.get("official_launches"), doc.get("official_launches_cuda")
    p, pp = doc.get("project_launches"), doc.get("project_plain_launches")
    return ["step", ">official (CPU defaults)", ">official (CUDA defaults)", ">project, flags off",
            ">project, both flags", ">both flags / official"], [[
        f"{_cfg_name(doc)} {doc.get('img')} b{doc.get('batch')}", num(o, 0), num(oc, 0), num(pp, 0), num(p, 0),
        f"{num(p / o if o and p else None, 2)} / {num(p / oc if oc and p else None, 2)}"]]


def demo_rows(doc):
    rows = []
    for r in doc.get("rows") or []:
        metrics = ", ".join(f"{k} {v}" for k, v in (r.get("metrics") or {}).items()) or "-"
        rows.append([r.get("task"), r.get("backend"), f"{r.get('img')} px, {r.get('epochs')} epochs",
                     "-" if r.get("seed") is None else r["seed"], metrics, num(r.get("wall_s"), 0, " s"),
                     num(r.get("cpu_s"), 0, " s")])
    return ["task", "backend", "size", ">seed", "figures", ">wall", ">CPU"], rows


def mean_std_text(s, nd=3):
    """'0.412 ± 0.006' from a study summary ({mean, std, ...}); '-' without one."""
    if not s or s.get("mean") is None:
        return "-"
    return f"{s['mean']:.{nd}f}" + ("" if s.get("std") is None else f" ± {s['std']:.{nd}f}")


def interval_text(r, nd=4):
    return "-" if not r or r.get("low") is None else f"[{r['low']:+.{nd}f}, {r['high']:+.{nd}f}]"


def study_name(doc):
    return f"{doc.get('dataset', '?')} {doc.get('model', '?')} {doc.get('img', '?')} px, {doc.get('epochs', '?')} ep."


def config_machine(doc, name):
    """The machine(s) one configuration of a study ran on. A study grown on several machines (--add-to) records the
    CPU with each run; a run without that record ran on the machine that wrote the file."""
    kinds = []
    for r in ((doc.get("configs") or {}).get(name) or {}).get("runs") or []:
        if "cpu_flags" in r:
            text = machine({"machine": {"cpu": r.get("cpu"), "cpu_flags": r["cpu_flags"], "cores": r.get("cores")}})
        else:
            text = machine(doc["run"])
        kinds += [text] if text not in kinds else []
    return " + ".join(kinds) or machine(doc["run"])


def learning_study_rows(doc):
    """One row per configuration: the machine it ran on, its runs, final mAP50-95 (mean ± std, lowest - highest),
    mAP50, P, R, time."""
    rows = []
    for name, block in (doc.get("configs") or {}).items():
        s = block.get("summary") or {}
        m = s.get("mAP50-95") or {}
        runs = f"{m.get('n', 0)}" + (f" (+{block['failed']} failed)" if block.get("failed") else "")
        rows.append([config_machine(doc, name), study_name(doc), name, runs, mean_std_text(m),
                     f"{num(m.get('min'), 3)} - {num(m.get('max'), 3)}",
                     mean_std_text(s.get("mAP50")), num((s.get("P") or {}).get("mean"), 3),
                     num((s.get("R") or {}).get("mean"), 3), num((s.get("wall_s") or {}).get("mean"), 0, " s")])
    return ["machine", "study", "config", ">runs", ">mAP50-95", ">lowest - highest", ">mAP50", ">P", ">R",
            ">time a run"], rows


def learning_pair_rows(doc):
    """One row per pair of configurations and figure: the difference of means and both 95% intervals."""
    rows = []
    for p in doc.get("pairs") or []:
        for metric in ("mAP50-95", "mAP50"):
            c = p.get(metric) or {}
            w, b = c.get("welch") or {}, c.get("bootstrap") or {}
            diff = w.get("diff", b.get("diff"))
            same = c.get("welch_includes_0")
            where = dict.fromkeys([config_machine(doc, p.get("a")), config_machine(doc, p.get("b"))])
            rows.append([" / ".join(where), study_name(doc), f"{p.get('a')} - {p.get('b')}", metric,
                         "-" if diff is None else f"{diff:+.4f}", interval_text(w), interval_text(b),
                         "-" if same is None else ("yes" if same else "no")])
    return ["machine", "study", "difference", "figure", ">of means", ">95% Welch", ">95% bootstrap",
            "interval holds 0"], rows


def learning_study_section(kind, files):
    """Two tables: the configurations' figures, then the pairs' differences."""
    title, intro = TITLES[kind]
    out = [f"## {title}", "", intro, ""]
    for rows_of in (learning_study_rows, learning_pair_rows):
        header, rows = None, []
        for stem, doc in files:
            header, body = rows_of(doc)
            rows += [[day(doc["run"]), *cells, f"`{stem}`"] for cells in body]
        out += [table(["date", *header, "file"], rows), ""]
    out += ["Commands and conditions (the curves of each study: the .png of the same name beside its file):", ""]
    out += [f"- `{stem}`: `{doc['run'].get('command', '?')}` ({source(doc['run'])})" for stem, doc in files]
    return out + [""]


def step_profile_rows(doc):
    """One row per group of the step (ms per step on each side, the ratio), then the whole step's wall times."""
    sides, r = doc.get("sides") or {}, doc.get("ratio_official_over_project") or {}
    o, p = sides.get("official") or {}, sides.get("project") or {}
    what = f"{_cfg_name(doc)} {doc.get('img')} b{doc.get('batch')}"
    rows = [[what, g, num((o.get("groups_ms") or {}).get(g), 1), num((p.get("groups_ms") or {}).get(g), 1),
             ratio(r.get(g))] for g in (p or o).get("groups_ms") or {}]
    rows += [[what, k, num(o.get(k), 1), num(p.get(k), 1), ratio(r.get(k))]
             for k in ("wall_ms_per_step", "amortised_ms")]
    return ["step", "group", ">official ms", ">project ms", ">ratio"], rows


def sliced_vs_sahi_rows(doc):
    s, ag = doc.get("settings") or {}, doc.get("agreement") or {}
    return ["settings", ">images", ">matched / unmatched", ">max box, score diff", ">images/s (SAHI)",
            ">CPU s/image (SAHI)", ">speed-up"], [[
        f"slice {s.get('size')} overlap {s.get('overlap')} {s.get('merge')}/{s.get('metric')} at {doc.get('imgsz')} px",
        len(doc.get("images") or []), f"{ag.get('matched')} / {ag.get('unmatched')}",
        f"{num(ag.get('max_box_diff_px'), 4)} px, {num(ag.get('max_score_diff'), 6)}",
        f"{num(doc.get('ours_images_per_s'), 2)} ({num(doc.get('sahi_images_per_s'), 2)})",
        f"{num(doc.get('ours_cpu_s_per_image'), 2)} ({num(doc.get('sahi_cpu_s_per_image'), 2)})",
        f"{num(doc.get('speedup'), 2, 'x')} wall, {num(doc.get('cpu_speedup'), 2, 'x')} CPU"]]


def sliced_demo_rows(doc):
    p, s = (doc.get(k, {}).get("coco") or {} for k in ("plain", "sliced"))
    return ["data", ">epochs", ">AP_small plain", ">AP_small sliced", ">AP plain", ">AP sliced"], [[
        f"{doc.get('canvas_px')} px canvases, {doc.get('tiles_px')} px tiles, at {doc.get('img')} px",
        doc.get("epochs"), num(p.get("AP_small"), 3), num(s.get("AP_small"), 3), num(p.get("AP"), 3),
        num(s.get("AP"), 3)]]


def twin_replay_rows(doc):
    gap, floor = doc.get("loss_gap_project") or [], doc.get("loss_gap_nudged") or []
    first = (doc.get("first_losses") or [[None] * 3])[0]
    beyond = doc.get("first_iteration_beyond_10x_noise")
    return (["epochs, batch", ">iterations", ">first loss official / project", ">max gap (project)",
             ">max gap (lr nudged)", ">median gap ratio", ">beyond 10x nudged at", "lr equal"],
            [[f"{doc.get('epochs_run')}, {doc.get('batch')}", doc.get("iterations"),
              f"{num(first[0], 6)} / {num(first[2], 6)}", num(max(gap, default=None), 6),
              num(max(floor, default=None), 6), num(doc.get("median_gap_ratio"), 2),
              "never" if beyond is None else f"iteration {beyond}", "yes" if doc.get("lr_equal") else "no"]])


def generic_rows(doc):
    return ["figures"], [[", ".join(k for k in doc if k not in ("benchmark", "run"))]]


ROWS = {"compare_train": compare_train_rows, "gpu_kit": gpu_kit_rows, "train_clock": train_clock_rows,
        "loader": loader_rows, "cpu_levers": cpu_levers_rows, "conv_grad": conv_grad_rows, "bn_silu": bn_silu_rows,
        "loss_reads": loss_reads_rows, "speed": speed_rows,
        "launches": launches_rows, "demo": demo_rows, "learning_study": learning_study_rows,
        "step_profile": step_profile_rows,
        "sliced_vs_sahi": sliced_vs_sahi_rows, "sliced_demo": sliced_demo_rows, "twin_replay": twin_replay_rows}
SECTIONS = {"learning_study": learning_study_section}  # kinds with more than one table
