"""The learning study's parts, without training anything: its statistics (t quantiles against published table values,
Welch's interval worked by hand, the bootstrap), how a run's results.csv becomes its figures (the official trainer's
padded column names too), the alternating order, what is skipped where, the summary and pairs, the curves plot, the
rendered "does it learn the same" tables (page and README block), and the step profile's grouping."""
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import learning_study, render_results, results_io, step_profile, study_stats  # noqa: E402

pytestmark = pytest.mark.framework_free  # tested once, in the PyTorch suite (tests/conftest.py)


@pytest.mark.parametrize("df,table_value", [(1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042),
                                            (1e7, 1.960)])
def test_t_quantile_matches_the_published_table(df, table_value):
    assert study_stats.t_quantile(0.975, df) == pytest.approx(table_value, abs=6e-4)
    assert study_stats.t_quantile(0.025, df) == pytest.approx(-table_value, abs=6e-4)
    assert study_stats.t_cdf(study_stats.t_quantile(0.9, df), df) == pytest.approx(0.9, abs=1e-9)


def test_welch_interval_worked_by_hand():
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.0, 5.0, 6.0]
    va, vb = (5 / 3) / 4, 2.5 / 5  # sample variances over n
    df = (va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 4)
    r = study_stats.welch_interval(a, b)
    assert r["diff"] == pytest.approx(-1.5) and r["df"] == pytest.approx(df)
    half = study_stats.t_quantile(0.975, df) * math.sqrt(va + vb)
    assert (r["low"], r["high"]) == (pytest.approx(-1.5 - half), pytest.approx(-1.5 + half))
    assert study_stats.welch_interval([1.0], b) is None  # no spread from one value
    same = study_stats.welch_interval([2.0, 2.0], [1.0, 1.0])
    assert same["low"] == same["high"] == 1.0


def test_intervals_tell_apart_what_differs_and_not_what_does_not():
    g = np.random.default_rng(0)
    x = g.normal(0.40, 0.01, 6)
    far, near = compare_both(x, x - 0.05), compare_both(x, g.normal(0.40, 0.01, 6))
    assert far["welch_includes_0"] is False and far["bootstrap_includes_0"] is False
    assert far["welch"]["low"] < 0.05 < far["welch"]["high"]
    assert near["welch_includes_0"] is True
    boot = study_stats.bootstrap_interval(x, x - 0.05)
    assert boot == study_stats.bootstrap_interval(x, x - 0.05)  # seeded: the same runs, the same interval
    assert boot["low"] < 0.05 < boot["high"] and boot["diff"] == pytest.approx(0.05)
    point = study_stats.bootstrap_interval([1.0, 1.0, 1.0], [0.0, 0.0])  # no spread: every resample agrees
    assert point["low"] == point["high"] == 1.0


def compare_both(a, b):
    return study_stats.compare(list(a), list(b))


def test_summary():
    s = study_stats.summary([0.3, 0.5, None, 0.4])
    assert s == {"n": 3, "mean": pytest.approx(0.4), "std": pytest.approx(0.1), "min": 0.3, "max": 0.5}
    assert study_stats.summary([0.2])["std"] is None and study_stats.summary([]) is None


def write_csv(path, rows, padded):
    names = ["epoch", "train/box_loss", "metrics/precision", "metrics/recall", "metrics/mAP_0.5",
             "metrics/mAP_0.5:0.95"]
    fmt = (lambda x: f"{x:>20}") if padded else str  # the official trainer pads its names and values
    lines = [",".join(fmt(n) for n in names)] + [",".join(fmt(v) for v in r) for r in rows]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("padded", [False, True])
def test_a_runs_figures_are_its_last_row_and_curve(tmp_path, padded):
    write_csv(tmp_path / "results.csv", [[0, 0.05, 0.5, 0.4, 0.3, 0.2], [1, 0.04, 0.6, 0.5, 0.45, 0.25]], padded)
    fig = learning_study.run_figures(learning_study.read_results_csv(tmp_path / "results.csv"))
    assert fig == {"P": 0.6, "R": 0.5, "mAP50": 0.45, "mAP50-95": 0.25, "curve": [0.2, 0.25]}
    assert learning_study.run_figures([]) is None


def test_order_rotates_and_precision_is_read_from_the_log():
    assert [learning_study.order_for(["a", "b", "c"], i) for i in range(4)] == [
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert learning_study.precision_used("AMP: bfloat16 autocast on the CPU (fp32 weights)", "project") == "bf16"
    assert learning_study.precision_used("WARNING --amp: ... training in fp32", "project") == "fp32"


def test_configs_this_machine_cannot_run_are_skipped_with_the_reason(tmp_path):
    opt = learning_study.parse_opt(["--configs", "official", "fp32", "bf16", "--ref", str(tmp_path / "none")])
    skipped = learning_study.skipped_configs(opt, ["avx2"])
    assert set(skipped) == {"official", "bf16"} and "native bf16" in skipped["bf16"]
    assert "bf16" not in learning_study.skipped_configs(opt, ["avx2", "avx512f", "avx512_bf16"])
    one = learning_study.parse_opt(["--dataset", "shapes"])
    assert learning_study.study_options(one, "shapes").img == 256 and one.dataset == ["shapes"]
    both = learning_study.parse_opt(["--dataset", "all", "--img", "160"])
    assert both.dataset == ["coco128", "shapes"] and learning_study.study_options(both, "shapes").img == 160
    assert learning_study.study_options(learning_study.parse_opt([]), "coco128").img == 320
    with pytest.raises(SystemExit):  # one results file cannot hold two studies
        learning_study.parse_opt(["--dataset", "all", "--json", "x.json"])


def fake_study(tmp_path=None):
    study = {"dataset": "coco128", "model": "yolov5n", "img": 320, "batch": 16, "epochs": 3, "seeds": [0, 1, 2],
             "configs": {}}
    for name, base in (("official", 0.30), ("fp32", 0.31)):
        runs = [{"seed": s, "rc": 0, "wall_s": 100.0 + s, "cpu_s": 150.0, "P": 0.6, "R": 0.5, "mAP50": base + 0.1,
                 "mAP50-95": base + 0.002 * s, "curve": [base - 0.1, base - 0.05, base + 0.002 * s]} for s in range(3)]
        study["configs"][name] = {"what": name, "flags": [], "runs": runs}
    study["configs"]["fp32"]["runs"].append({"seed": 3, "rc": 1, "wall_s": 5.0, "error": "boom"})
    return learning_study.summarize(study)


def test_summary_and_pairs_of_a_study(tmp_path):
    study = fake_study()
    s = study["configs"]["fp32"]["summary"]["mAP50-95"]
    assert s["n"] == 3 and s["mean"] == pytest.approx(0.312) and study["configs"]["fp32"]["failed"] == 1
    (pair,) = study["pairs"]
    assert (pair["a"], pair["b"]) == ("official", "fp32")
    assert pair["mAP50-95"]["welch"]["diff"] == pytest.approx(-0.01)
    assert pair["mAP50-95"]["welch_includes_0"] is False
    png = learning_study.plot_curves(study, tmp_path / "curves.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rendered_learning_tables(tmp_path):
    """A learning-study file renders as the page's two tables and the README block's short table; without one the
    README block has no such table."""
    doc = {"benchmark": "learning_study", "run": {**results_io.run_metadata(argv=["benchmarks/learning_study.py"]),
                                                  "date": "2026-11-27T00:00:00Z"}, **fake_study()}
    (tmp_path / "learning_study_coco128_x.json").write_text(json.dumps(doc))
    page, readme = render_results.render(tmp_path, readme_text=f"{render_results.START}\n{render_results.END}\n")
    assert "## Does it learn the same?" in page
    assert "| official | 3 | 0.302 ± 0.002 | 0.300 - 0.304 |" in page
    assert "| official - fp32 | mAP50-95 | -0.0100 |" in page and "| no |" in page
    assert "learning_study_coco128_x" in page
    assert "Does it learn the same?" in readme
    assert "| fp32 | 0.312 ± 0.002 (3 seeds) | +0.0100 [+0.00" in readme  # fp32 - official, flipped from the pair
    empty = tmp_path / "empty"
    empty.mkdir()
    _, readme = render_results.render(empty, readme_text=f"{render_results.START}\n{render_results.END}\n")
    assert "learn the same" not in readme


def test_a_one_seed_study_renders_its_difference_without_an_interval(tmp_path):
    """One run a configuration (a study grown session by session starts so): the README row says "1 seed" and gives
    the difference from the official mean, this side minus official, with no interval rather than a blank."""
    study = fake_study()
    for block in study["configs"].values():
        block["runs"] = [r for r in block["runs"] if r["seed"] == 2]
    study = learning_study.summarize(study)
    doc = {"benchmark": "learning_study", "run": {**results_io.run_metadata(argv=["benchmarks/learning_study.py"]),
                                                  "date": "2026-11-27T00:00:00Z"}, **study}
    (tmp_path / "learning_study_coco128_one.json").write_text(json.dumps(doc))
    _, readme = render_results.render(tmp_path, readme_text=f"{render_results.START}\n{render_results.END}\n")
    assert "| official | 0.304 (1 seed) | - |" in readme
    assert "| fp32 | 0.314 (1 seed) | +0.0100 (no interval with one seed) |" in readme


def test_step_profile_groups():
    assert [step_profile.op_kind(n) for n in ("aten::mkldnn_convolution", "ConvolutionBackward0",
                                                "aten::native_batch_norm_backward", "aten::silu_", "aten::add_")] == [
        "convolution", "convolution", "batchnorm", "activation", "other"]
    ops = [("forward", "aten::mkldnn_convolution", 4000.0), ("forward", "aten::silu_", 1000.0),
           ("loss", "aten::sigmoid", 500.0), ("backward", "aten::convolution_backward", 6000.0),
           ("optimizer", "aten::_foreach_add_", 300.0), ("ema", "aten::mul_", 200.0), ("data", "aten::div", 100.0)]
    wall = {"data": 2000.0, "forward": 6000.0, "loss": 500.0, "backward": 7000.0, "optimizer": 300.0, "ema": 200.0}
    g = step_profile.group_times(ops, wall, steps=2)
    assert g["forward: convolution"] == 2.0 and g["forward: activation"] == 0.5 and g["loss"] == 0.25
    assert g["backward: convolution"] == 3.0 and g["optimizer"] == 0.15 and g["ema"] == 0.1
    assert g["data wait"] == 1.0  # the wait's wall time, whatever ran inside it
    assert g["overhead"] == 1.0  # forward 1000 us + backward 1000 us outside any operator, over 2 steps
    assert step_profile.top_ops(ops, 2, n=1) == [["aten::convolution_backward", 3.0, 0.5]]


def test_step_profile_amp_reaches_this_projects_side_only(tmp_path, monkeypatch):
    """--amp profiles this project's step under bf16 autocast (its default on native-bf16 CPUs); the official side,
    which has no CPU autocast, is run as before. The sides' commands are caught before they run."""
    import subprocess
    import types
    seen, real_run = {}, subprocess.run

    def fake_run(cmd, **kw):
        if "--side" not in cmd:  # the results file's own calls (git, for the commit it records)
            return real_run(cmd, **kw)
        side = cmd[cmd.index("--side") + 1]
        seen[side] = cmd
        Path(cmd[cmd.index("--json") + 1]).write_text(json.dumps(
            {"wall_ms_per_step": 1.0, "amortised_ms": 1.0, "groups_ms": {g: 1.0 for g in step_profile.GROUP_ORDER}}))
        return types.SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr("benchmarks.compare_train.dataset_copy", lambda src, dst: None)
    ref_python = tmp_path / "python"
    ref_python.write_text("")
    opt = step_profile.parse_opt(["--amp", "--ref", str(tmp_path), "--ref-python", str(ref_python),
                                  "--json", str(tmp_path / "out.json")])
    assert step_profile.run_both(opt) == 0
    assert "--amp" in seen["project"] and "--amp" not in seen["official"]
    assert json.loads((tmp_path / "out.json").read_text())["amp"] == "bf16"


def test_a_study_grows_by_parts_with_the_same_settings_only(tmp_path):
    """--add-to keeps the file's successful runs (the failed one is run again), adds its seeds, and refuses a file
    made with other settings in one line."""
    import json
    old = fake_study()
    f = tmp_path / "study.json"
    f.write_text(json.dumps({"benchmark": "learning_study", "run": {}, **old}))
    new = {k: old[k] for k in ("dataset", "model", "img", "batch", "epochs")}
    new.update(weights=old.get("weights"), seeds=[3, 4],
               configs={"fp32": {"what": "fp32", "flags": [], "runs": []}})
    grown = learning_study.continued(new, f)
    assert [r["seed"] for r in grown["configs"]["fp32"]["runs"]] == [0, 1, 2]  # seed 3 failed: to be run again
    assert [r["seed"] for r in grown["configs"]["official"]["runs"]] == [0, 1, 2]
    assert grown["seeds"] == [0, 1, 2, 3, 4]
    assert learning_study.already_run(grown, "fp32", 2) and not learning_study.already_run(grown, "fp32", 3)
    assert learning_study.continued(dict(new, configs={}), tmp_path / "new.json")["configs"] == {}  # a new file
    with pytest.raises(SystemExit, match="its epochs is 3, this run's 30"):
        learning_study.continued(dict(new, epochs=30), f)


def test_a_study_grown_on_another_machine_names_each_configurations_machine(tmp_path):
    """Runs kept by --add-to that predate per-run CPU records ran on the machine that wrote the file: they take its
    CPU and flags, so the grown file (now written by another machine) still tells the two apart, and the tables name
    each configuration's machine rather than the last writer's."""
    old = fake_study()
    f = tmp_path / "study.json"
    zen3 = {"cpu": "AMD EPYC", "cpu_flags": ["avx2"], "cores": 2}
    f.write_text(json.dumps({"benchmark": "learning_study", "run": {"machine": zen3}, **old}))
    new = {k: old[k] for k in ("dataset", "model", "img", "batch", "epochs")}
    new.update(weights=old.get("weights"), seeds=[0], configs={"bf16": {"what": "bf16", "flags": [], "runs": []}})
    grown = learning_study.continued(new, f)
    assert {(r["cpu_flags"][0], r["cores"]) for r in grown["configs"]["official"]["runs"]} == {("avx2", 2)}
    grown["configs"]["bf16"]["runs"] = [dict(r, cpu="AMD EPYC", cpu_flags=["avx2", "avx512f", "avx512_bf16"], cores=2)
                                        for r in grown["configs"]["official"]["runs"]]
    zen4 = {"cpu": "AMD EPYC", "cpu_flags": ["avx2", "avx512f", "avx512_bf16"], "cores": 2}
    doc = {"benchmark": "learning_study", "run": {**results_io.run_metadata(argv=["benchmarks/learning_study.py"]),
                                                  "date": "2026-11-28T00:00:00Z", "machine": zen4},
           **learning_study.summarize(grown)}
    (tmp_path / "learning_study_coco128_grown.json").write_text(json.dumps(doc))
    page, readme = render_results.render(tmp_path, readme_text=f"{render_results.START}\n{render_results.END}\n")
    old_text, new_text = "AMD EPYC, 2 cores (AVX2)", "AMD EPYC, 2 cores (AVX2, AVX-512, AVX512-BF16)"
    assert f"| {old_text} | coco128 yolov5n 320 px, 3 ep. | official |" in page
    assert f"| {new_text} | coco128 yolov5n 320 px, 3 ep. | bf16 |" in page
    assert f"| {old_text} / {new_text} | coco128 yolov5n 320 px, 3 ep. | official - bf16 |" in page
    assert any(line.startswith("| coco128 yolov5n 320 px, 3 ep. | official |") and old_text in line
               for line in readme.splitlines())
