"""Renders the results files in benchmarks/results/ into docs/benchmarks.md (one table per benchmark kind, a row per
measured line, each naming its file, machine, date and source, the commands listed below the table) and the README's
headline table (between the markers below). Nothing else is read: a figure that has no results file is not shown.

    python benchmarks/render_results.py            # rewrite docs/benchmarks.md and the README's headline block
    python benchmarks/render_results.py --check    # exit 1 when either differs from what this script makes

The output depends on the files only (no clock, no machine), so tests/test_benchmarks/test_results_render.py can
render again and compare. Files without a "benchmark" and "run" record (benchmarks/results_io.py) are left out with
a warning."""
import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
START, END = "<!-- results:headline:start -->", "<!-- results:headline:end -->"
REGENERATE = "python benchmarks/render_results.py"
FLAG_NAMES = {"avx2": "AVX2", "avx512f": "AVX-512", "avx512_bf16": "AVX512-BF16", "amx_tile": "AMX"}
SCRIPTS = {"detect": "", "segment": "segment/", "classify": "classify/"}
KIND_ORDER = ("compare_train", "learning_study", "gpu_kit", "train_clock", "loader", "cpu_levers", "speed",
              "launches", "step_profile", "demo")
TITLES = {
    "compare_train": ("Whole runs against the official scripts (`compare_train.py`)",
                      "Wall time of whole `train.py` / `val.py` runs (and the segment/classify ones) on coco128 "
                      "copies, this project and the official code alternating; medians. Ratio: official time over "
                      "this project's (above 1: this project is faster)."),
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
    "demo": ("The demos (`make train-demo`)", "What the 30-epoch shapes demo (10 for classification) learns, and its "
                                              "wall time."),
}


# ----------------------------------------------------------------------------------------------------------------
# reading
def load_results(folder=RESULTS, warn=None):
    """[(file stem, document)] of every results file in folder, oldest first (date, then name). Files that are not
    results files (no "benchmark" and "run") are skipped, each named through warn."""
    out = []
    for f in sorted(Path(folder).glob("*.json")):
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError) as e:
            (warn or _warn)(f"{f.name}: not read ({e})")
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("run"), dict) or not doc.get("benchmark"):
            (warn or _warn)(f"{f.name}: no 'benchmark' and 'run' record (write it through benchmarks/results_io.py);"
                            " left out")
            continue
        out.append((f.stem, doc))
    return sorted(out, key=lambda x: (x[1]["run"].get("date") or "", x[0]))


def _warn(msg):
    print(f"render_results: {msg}", file=sys.stderr)


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
    return f"{m.get('cpu') or 'unknown CPU'}{cores}" + (f" ({feats})" if feats else "")


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
                     f"{num(o.get('peak_mib'), 0)} / {num(p.get('peak_mib'), 0)}"])
    return ["run", ">official", ">project", ">ratio", ">CPU s off. / proj.", ">peak MiB off. / proj."], rows


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


def _mean_std(s, nd=3):
    """'0.412 ± 0.006' from a study summary ({mean, std, ...}); '-' without one."""
    if not s or s.get("mean") is None:
        return "-"
    return f"{s['mean']:.{nd}f}" + ("" if s.get("std") is None else f" ± {s['std']:.{nd}f}")


def _interval(r, nd=4):
    return "-" if not r or r.get("low") is None else f"[{r['low']:+.{nd}f}, {r['high']:+.{nd}f}]"


def _study_name(doc):
    return f"{doc.get('dataset', '?')} {doc.get('model', '?')} {doc.get('img', '?')} px, {doc.get('epochs', '?')} ep."


def learning_study_rows(doc):
    """One row per configuration: its runs, final mAP50-95 (mean ± std, lowest - highest), mAP50, P, R, time."""
    rows = []
    for name, block in (doc.get("configs") or {}).items():
        s = block.get("summary") or {}
        m = s.get("mAP50-95") or {}
        runs = f"{m.get('n', 0)}" + (f" (+{block['failed']} failed)" if block.get("failed") else "")
        rows.append([_study_name(doc), name, runs, _mean_std(m), f"{num(m.get('min'), 3)} - {num(m.get('max'), 3)}",
                     _mean_std(s.get("mAP50")), num((s.get("P") or {}).get("mean"), 3),
                     num((s.get("R") or {}).get("mean"), 3), num((s.get("wall_s") or {}).get("mean"), 0, " s")])
    return ["study", "config", ">runs", ">mAP50-95", ">lowest - highest", ">mAP50", ">P", ">R", ">time a run"], rows


def learning_pair_rows(doc):
    """One row per pair of configurations and figure: the difference of means and both 95% intervals."""
    rows = []
    for p in doc.get("pairs") or []:
        for metric in ("mAP50-95", "mAP50"):
            c = p.get(metric) or {}
            w, b = c.get("welch") or {}, c.get("bootstrap") or {}
            diff = w.get("diff", b.get("diff"))
            same = c.get("welch_includes_0")
            rows.append([_study_name(doc), f"{p.get('a')} - {p.get('b')}", metric,
                         "-" if diff is None else f"{diff:+.4f}", _interval(w), _interval(b),
                         "-" if same is None else ("yes" if same else "no")])
    return ["study", "difference", "figure", ">of means", ">95% Welch", ">95% bootstrap", "interval holds 0"], rows


def learning_study_section(kind, files):
    """Two tables: the configurations' figures, then the pairs' differences."""
    title, intro = TITLES[kind]
    out = [f"## {title}", "", intro, ""]
    for rows_of in (learning_study_rows, learning_pair_rows):
        header, rows = None, []
        for stem, doc in files:
            header, body = rows_of(doc)
            rows += [[day(doc["run"]), machine(doc["run"]), *cells, f"`{stem}`"] for cells in body]
        out += [table(["date", "machine", *header, "file"], rows), ""]
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


def generic_rows(doc):
    return ["figures"], [[", ".join(k for k in doc if k not in ("benchmark", "run"))]]


ROWS = {"compare_train": compare_train_rows, "gpu_kit": gpu_kit_rows, "train_clock": train_clock_rows,
        "loader": loader_rows, "cpu_levers": cpu_levers_rows, "speed": speed_rows, "launches": launches_rows,
        "demo": demo_rows, "learning_study": learning_study_rows, "step_profile": step_profile_rows,
        "sliced_vs_sahi": sliced_vs_sahi_rows, "sliced_demo": sliced_demo_rows}
SECTIONS = {"learning_study": learning_study_section}  # kinds with more than one table


# ----------------------------------------------------------------------------------------------------------------
# the page
def kind_section(kind, files):
    title, intro = TITLES.get(kind, (f"`{kind}`", "Figures of this kind have no table of their own yet."))
    header, rows = None, []
    for stem, doc in files:
        head, body = ROWS.get(kind, generic_rows)(doc)
        header = header or head
        run = doc["run"]
        rows += [[day(run), machine(run), *cells, source(run), f"`{stem}`"] for cells in body]
    out = [f"## {title}", "", intro, "", table(["date", "machine", *header, "source", "file"], rows), "",
           "Commands and conditions:", ""]
    for stem, doc in files:
        run = doc["run"]
        extra = [f"{k}: {run[k]}" for k in ("variant", "note", "load") if run.get(k)]
        if doc.get("load") and not run.get("load"):
            extra.append(f"load: {doc['load']}")
        out.append(f"- `{stem}`: `{run.get('command', '?')}`" + (f" ({'; '.join(extra)})" if extra else ""))
    return out + [""]


def render_page(results):
    by_kind = {}
    for stem, doc in results:
        by_kind.setdefault(doc["benchmark"], []).append((stem, doc))
    kinds = [k for k in KIND_ORDER if k in by_kind] + sorted(k for k in by_kind if k not in KIND_ORDER)
    lines = ["# Benchmarks", "",
             f"<!-- generated by `{REGENERATE}` from benchmarks/results/*.json: do not edit by hand -->", "",
             "Every figure on this page comes from a results file in `benchmarks/results/` that records its date, "
             "commit, machine, versions and command (how to run each benchmark: `benchmarks/README.md`). "
             "\"measured\" files were written by the benchmark itself; \"transcribed\" files hold figures copied "
             "from the project's earlier records (a README or a commit message at the commit named), with the "
             "machine as described there: kept for the history, not fresh runs. Dates are UTC. Ratios above 1 "
             "favour this project.", "",
             "## Headline", "", *headline_table(results), ""]
    for kind in kinds:
        lines += SECTIONS.get(kind, kind_section)(kind, by_kind[kind])
    return "\n".join(lines).rstrip("\n") + "\n"


# ----------------------------------------------------------------------------------------------------------------
# the README's headline table
def headline_rows(results):
    """Speed-up against the official trainer: the newest results file per (script, model, size) that is not a
    variant (emulated CPU, TensorBoard added to the official side, ...), CPU runs from compare_train and GPU rows
    from the kit (both flags on)."""
    newest = {}
    for stem, doc in results:  # oldest first: later files replace earlier ones
        run = doc["run"]
        if run.get("variant"):
            continue
        if doc["benchmark"] == "compare_train":
            _, rows = compare_train_rows(doc)
            for r in rows:
                if r[3] != "-":
                    newest[("cpu", r[0])] = [r[0], r[3], machine(run), day(run)]
        elif doc["benchmark"] == "gpu_kit":
            for r in (doc.get("train") or {}).get("rows") or []:
                if r.get("flags") and r.get("ratio"):
                    what = f"`train.py` {r.get('model')} {r.get('img')}, batch {r.get('batch')}, both flags"
                    newest[("gpu", what)] = [what, ratio(r["ratio"]), machine(run), day(run)]
    order = [f"`{SCRIPTS[t]}{s}.py`" for t in SCRIPTS for s in ("train", "val")]
    return [v for _, v in sorted(newest.items(), key=lambda kv: (
        kv[0][0], next((i for i, o in enumerate(order) if kv[1][0].startswith(o)), 99), kv[1][0]))]


def headline_table(results):
    return [table(["script", ">speed-up vs the official script", "machine", "date"], headline_rows(results))]


def learning_headline(results):
    """The README's short "does it learn the same" table: the newest learning study per dataset, each configuration's
    final mAP50-95 and its difference from the official trainer's with the 95% Welch interval; [] without a study."""
    newest = {}
    for stem, doc in results:  # oldest first: later files replace earlier ones
        if doc["benchmark"] == "learning_study" and not doc["run"].get("variant"):
            newest[doc.get("dataset")] = doc
    rows = []
    for doc in newest.values():
        vs_official = {p["a"]: p for p in doc.get("pairs") or [] if p.get("b") == "official"}
        vs_official.update({p["b"]: _flipped(p) for p in doc.get("pairs") or [] if p.get("a") == "official"})
        for name, block in (doc.get("configs") or {}).items():
            m = (block.get("summary") or {}).get("mAP50-95") or {}
            w = ((vs_official.get(name) or {}).get("mAP50-95") or {}).get("welch") or {}
            rows.append([_study_name(doc), name, f"{_mean_std(m)} ({m.get('n', 0)} seeds)",
                         "-" if w.get("diff") is None else f"{w['diff']:+.4f} {_interval(w)}", machine(doc["run"]),
                         day(doc["run"])])
    if not rows:
        return []
    return ["", "Does it learn the same? Final mAP50-95 over seeds, and the difference from the official trainer "
            "with its 95% interval (Welch):", "",
            table(["study", "config", ">mAP50-95", ">vs official", "machine", "date"], rows)]


def _flipped(pair):
    """A pair (official, x) as (x, official): differences and intervals negated."""
    out = {}
    for metric, c in pair.items():
        if isinstance(c, dict) and "welch" in c:
            w = c.get("welch") or {}
            out[metric] = {**c, "welch": w and {**w, "diff": -w["diff"], "low": -w["high"], "high": -w["low"]}}
    return out


def headline_block(results):
    """What goes between the README's markers."""
    return "\n".join(["", *headline_table(results), "",
                      "Wall time of whole runs, official over this project, from the newest results file of each",
                      "(`benchmarks/results/`); every figure with its command and conditions:",
                      "[docs/benchmarks.md](docs/benchmarks.md).", *learning_headline(results), ""])


def replace_block(text, block):
    """text with what lies between the headline markers replaced by block; None when the markers are missing."""
    i, j = text.find(START), text.find(END)
    if i < 0 or j < i:
        return None
    return text[:i + len(START)] + "\n" + block.strip("\n") + "\n" + text[j:]


# ----------------------------------------------------------------------------------------------------------------
def render(results_dir=RESULTS, readme_text=None, warn=None):
    """(page text, README text with its headline block rendered, or None without the markers / README)."""
    results = load_results(results_dir, warn=warn)
    readme = replace_block(readme_text, headline_block(results)) if readme_text is not None else None
    return render_page(results), readme


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", default=str(RESULTS), help="folder of results files")
    p.add_argument("--page", default=str(PAGE), help="the page to write")
    p.add_argument("--readme", default=str(README), help="README holding the headline markers")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when either output would change")
    opt = p.parse_args(argv)
    readme = Path(opt.readme)
    page, new_readme = render(opt.results, readme.read_text() if readme.is_file() else None)
    if new_readme is None:
        _warn(f"{readme}: no {START} ... {END} markers; its headline table is not rendered")
    stale = [path for path, text in ((Path(opt.page), page), (readme, new_readme))
             if text is not None and (not path.is_file() or path.read_text() != text)]
    if opt.check:
        for path in stale:
            print(f"render_results: {path} differs from what the results files make: run `{REGENERATE}`")
        return 1 if stale else 0
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from utils.atomic_files import write_text
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, page if path == Path(opt.page) else new_readme)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
