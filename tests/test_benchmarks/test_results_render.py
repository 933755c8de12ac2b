"""Figures as data: docs/benchmarks.md and the README's headline table are what benchmarks/render_results.py makes of
benchmarks/results/*.json, and every results file carries its date, commit, machine, versions and command
(benchmarks/results_io.py). Fast: no benchmark runs here."""
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import compare_train, cpu_hold, render_results, results_io  # noqa: E402

pytestmark = pytest.mark.framework_free  # tested once, in the PyTorch suite (tests/conftest.py)

HOW = f"regenerate with `{render_results.REGENERATE}` and commit the result"
RUN_KEYS = {"schema", "date", "commit", "machine", "versions", "command", "source"}


def test_committed_page_is_what_the_renderer_makes():
    page, _ = render_results.render(render_results.RESULTS, warn=lambda msg: None)
    committed = render_results.PAGE.read_text() if render_results.PAGE.is_file() else None
    assert committed == page, f"docs/benchmarks.md differs from the results files: {HOW}"


def test_readme_headline_block_is_what_the_renderer_makes():
    text = render_results.README.read_text()
    if render_results.START not in text or render_results.END not in text:
        pytest.skip(f"README.md has no {render_results.START} ... {render_results.END} markers yet")
    _, readme = render_results.render(render_results.RESULTS, readme_text=text, warn=lambda msg: None)
    assert readme == text, f"README.md's headline table differs from the results files: {HOW}"


def test_every_committed_results_file_has_its_run_record():
    files = list(render_results.load_results(render_results.RESULTS, warn=lambda msg: None))
    assert files, "no results files in benchmarks/results/"
    for stem, doc in files:
        run = doc["run"]
        assert RUN_KEYS <= set(run), (stem, sorted(RUN_KEYS - set(run)))
        assert run["date"].endswith("Z") and run["command"], stem
        assert run["source"] == "measured" or run["source"].startswith("transcribed from"), stem
        assert run["source"] == "measured" or run["commit"] in run["source"], stem
        # committed files name no folder of the machine that measured them (results_io.command_line)
        for command in _commands(doc):
            assert not any(a.partition("=")[2].startswith("/") if a.startswith("-") else a.startswith("/")
                           for a in command.split()), (stem, command)
    assert any(doc["run"]["source"] == "measured" for _, doc in files), "no measured results file"


def _commands(doc):
    """Every "command" string anywhere in a results document."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from ([v] if k == "command" and isinstance(v, str) else _commands(v))
    elif isinstance(doc, list):
        for v in doc:
            yield from _commands(v)


def _write(folder, name, doc):
    (folder / f"{name}.json").write_text(json.dumps(doc))


def test_rows_headline_variants_and_skipped_files(tmp_path, monkeypatch):
    """A measured compare_train file and a GPU kit file render as rows; the newest non-variant row per script is the
    headline; a file without a run record is left out with a warning; the README block replaces only what lies
    between the markers."""
    monkeypatch.setattr(results_io, "gpu_name", lambda: None)

    def run(date, **extra):
        r = results_io.run_metadata(argv=["benchmarks/compare_train.py", "--ref", "x"])
        return {**r, "date": date, **extra}

    def side(s):
        return {"median_s": s, "median_cpu_s": s, "peak_mib": 100}

    train = {"n320": {"cfg": "yolov5n.yaml", "img": 320, "weights": "yolov5n.pt", "official": side(30.0),
                      "project": side(20.0), "ratio_official_over_project": 1.5}}
    _write(tmp_path, "old", {"benchmark": "compare_train", "run": run("2026-01-01T00:00:00Z"), "task": "detect",
                             "train": train, "val": None})
    newer = {"n320": {**train["n320"], "ratio_official_over_project": 1.25}}
    _write(tmp_path, "new", {"benchmark": "compare_train", "run": run("2026-02-01T00:00:00Z"), "task": "detect",
                             "train": newer, "val": None})
    _write(tmp_path, "variant", {"benchmark": "compare_train", "task": "detect", "train": {
        "n320": {**train["n320"], "ratio_official_over_project": 9.0}},
        "run": run("2026-03-01T00:00:00Z", variant="emulated CPU"), "val": None})
    kit_run = {**run("2026-02-02T00:00:00Z"), "machine": {"cpu": "x", "cpu_flags": [], "cores": 16,
                                                           "gpu": "NVIDIA H100 80GB HBM3"}}
    _write(tmp_path, "kit", {"benchmark": "gpu_kit", "run": kit_run, "train": {"rows": [
        {"model": "yolov5s", "img": 640, "batch": 16, "flags": "--bbox_iou_optim --multi_tensor_optimizer",
         "official_img_s": 400.0, "project_img_s": 600.0, "ratio": 1.5, "official_peak_mib": 9000,
         "project_peak_mib": 7000}]}})
    _write(tmp_path, "legacy", {"command": "val", "wall_s": 3})
    warnings = []
    readme = f"# Title\n\nintro\n{render_results.START}\nold table\n{render_results.END}\n\nrest\n"
    page, new_readme = render_results.render(tmp_path, readme_text=readme, warn=warnings.append)

    assert len(warnings) == 1 and "legacy.json" in warnings[0]
    assert "`legacy`" not in page and "`old`" in page and "`variant`" in page and "emulated CPU" in page
    assert "| 600.0 |" in page and "NVIDIA H100 80GB HBM3" in page and "1.50x" in page
    head = page.split("## Headline")[1].split("\n## ")[0]
    assert "1.25x" in head and "9.00x" not in head and head.count("`train.py` yolov5n 320") == 1
    assert "`train.py` yolov5s 640, batch 16, both flags | 1.50x | NVIDIA H100 80GB HBM3" in head
    assert new_readme.startswith("# Title\n\nintro\n") and new_readme.endswith(f"{render_results.END}\n\nrest\n")
    assert "old table" not in new_readme and "1.25x" in new_readme
    assert render_results.render(tmp_path, readme_text="no markers", warn=warnings.append)[1] is None
    assert render_results.render(tmp_path, warn=lambda m: None)[0] == page  # deterministic


def test_headline_keeps_a_row_per_cpu_class(tmp_path):
    """The targets differ for CPUs that compute bf16 natively and those that do not: the newest file of each class
    keeps its row, so a run on one kind does not hide the other's figure, and a row says when this project trained
    in bf16 (its default on such a CPU)."""
    train = {"n320": {"cfg": "yolov5n.yaml", "img": 320, "weights": "yolov5n.pt",
                      "official": {"median_s": 30.0, "median_cpu_s": 30.0, "peak_mib": 100},
                      "project": {"median_s": 20.0, "median_cpu_s": 20.0, "peak_mib": 100}}}
    for name, date, flags, r, precision in (
            ("zen3_old", "2026-01-01", ["avx2"], 1.4, None), ("zen3", "2026-01-02", ["avx2"], 1.5, "fp32"),
            ("zen4", "2026-01-03", ["avx2", "avx512f", "avx512_bf16"], 2.1, "bf16")):
        run = {**results_io.run_metadata(argv=["benchmarks/compare_train.py"]), "date": f"{date}T00:00:00Z",
               "machine": {"cpu": "AMD EPYC", "cpu_flags": flags, "cores": 2}}
        project = {**train["n320"]["project"], "runs": [{"rc": 0, "precision": precision}] if precision else []}
        _write(tmp_path, name, {"benchmark": "compare_train", "run": run, "task": "detect", "val": None,
                                "train": {"n320": {**train["n320"], "project": project,
                                                   "ratio_official_over_project": r}}})
    head = render_results.render(tmp_path, warn=lambda m: None)[0].split("## Headline")[1].split("\n## ")[0]
    rows = [line for line in head.splitlines() if line.startswith("| `train.py` yolov5n 320")]
    assert rows == ["| `train.py` yolov5n 320 | 1.50x | AMD EPYC, 2 cores (AVX2) | 2026-01-02 |",
                    "| `train.py` yolov5n 320 in bf16 | 2.10x | AMD EPYC, 2 cores (AVX2, AVX-512, AVX512-BF16) "
                    "| 2026-01-03 |"]
    page = render_results.render(tmp_path, warn=lambda m: None)[0]
    assert "| 20.0 s | 1.50x | 30.0 / 20.0 | 100 / 100 | fp32 |" in page  # the page says what each file trained in
    assert "| 1.40x | 30.0 / 20.0 | 100 / 100 | - |" in page  # a file from before that record


def test_check_mode_reports_a_stale_page_and_writes_nothing(tmp_path, capsys):
    _write(tmp_path, "d", {"benchmark": "demo", "run": results_io.run_metadata(argv=["x"]), "rows": [
        {"task": "detect", "backend": "torch", "img": 64, "epochs": 1, "wall_s": 3.0, "metrics": {"mAP50": 0.5}}]})
    page, readme = tmp_path / "benchmarks.md", tmp_path / "README.md"
    readme.write_text(f"{render_results.START}\n{render_results.END}\n")
    args = ["--results", str(tmp_path), "--page", str(page), "--readme", str(readme)]
    assert render_results.main([*args, "--check"]) == 1 and not page.exists()
    assert "python benchmarks/render_results.py" in capsys.readouterr().out
    assert render_results.main(args) == 0 and "mAP50 0.5" in page.read_text()
    assert "speed-up vs the official script" in readme.read_text()
    assert render_results.main([*args, "--check"]) == 0


def test_run_metadata_names_the_machine_and_versions(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse avx2 avx512f amx_tile\n")
    assert results_io.cpu_info(str(cpuinfo)) == ("Test CPU 9000", ["avx2", "avx512f", "amx_tile"])
    run = results_io.run_metadata(argv=[str(ROOT / "benchmarks" / "loader.py"), "--img", "64"])
    assert run["command"] == "python benchmarks/loader.py --img 64" and run["source"] == "measured"
    assert run["date"].endswith("Z") and len(run["date"]) == 20
    outside = ROOT.parent / "sahi-env" / "bin" / "python"
    run = results_io.run_metadata(argv=[str(ROOT / "benchmarks" / "x.py"), "--sahi-python", str(outside),
                                        f"--ref={ROOT.parent}/y", "--images", "3", "-"])
    assert run["command"] == "python benchmarks/x.py --sahi-python ../sahi-env/bin/python --ref=../y --images 3 -"
    assert set(run["versions"]) == {"python", "torch", "oneflow", "numpy"} and run["versions"]["numpy"]
    assert run["machine"]["cores"] and run["machine"]["cpu"]
    out = results_io.write_result("loader", {"img_s": 1.0}, path=tmp_path / "r" / "x.json")
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "loader" and doc["img_s"] == 1.0 and RUN_KEYS <= set(doc["run"])
    with pytest.raises(ValueError, match="reserved"):
        results_io.result_document("loader", {"run": 1})
    assert results_io.default_path("speed", "torch_cpu", tmp_path).name.startswith("speed_torch_cpu_2")


def test_capped_instruction_sets_make_a_named_variant(monkeypatch, tmp_path):
    """A run measured with the frameworks' instruction sets capped (an emulated lesser CPU) says so in its run record
    and is a variant: it never becomes the headline figure of the CPU it ran on."""
    for k in results_io.CPU_CAP_VARIABLES:
        monkeypatch.delenv(k, raising=False)
    plain = results_io.run_metadata(argv=["benchmarks/compare_train.py"])
    assert "variant" not in plain and "cpu_caps" not in plain["machine"]
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    run = results_io.run_metadata(argv=["benchmarks/compare_train.py"])
    assert run["machine"]["cpu_caps"] == {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert "ATEN_CPU_CAPABILITY=avx2" in run["variant"] and "ONEDNN_MAX_CPU_ISA=AVX2" in run["variant"]
    assert render_results.machine(run).endswith(", held to AVX2)")  # the table's machine says it, too
    side = {"median_s": 10.0, "median_cpu_s": 10.0, "peak_mib": 100}
    train = {"n320": {"cfg": "yolov5n.yaml", "img": 320, "weights": "yolov5n.pt", "official": side,
                      "project": side, "ratio_official_over_project": 1.0}}
    _write(tmp_path, "capped", {"benchmark": "compare_train", "run": run, "task": "detect", "train": train,
                                "val": None})
    assert render_results.headline_rows(render_results.load_results(tmp_path)) == []


def test_the_avx2_hold_reaches_every_library_and_the_record(monkeypatch, tmp_path):
    """--hold avx2 sets one switch per library that picks kernels by the CPU (oneDNN, ATen, MKL, OpenCV, NumPy); the
    results file records every one of them and the table names the libraries held besides the frameworks."""
    # a copy of the environment for the test to change (apply() writes os.environ, as the benchmarks need)
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if k not in results_io.CPU_CAP_VARIABLES})
    hold = cpu_hold.hold_env("avx2")
    assert set(hold) == set(results_io.CPU_CAP_VARIABLES) - {"DNNL_MAX_CPU_ISA"}  # the old name of ONEDNN's
    assert cpu_hold.hold_env(None) == {}
    with pytest.raises(ValueError, match="unknown CPU hold 'avx3'"):
        cpu_hold.hold_env("avx3")
    cpu_hold.apply("avx2")
    run = results_io.run_metadata(argv=["benchmarks/compare_train.py", "--hold", "avx2"])
    assert run["machine"]["cpu_caps"] == hold and "variant" in run
    assert render_results.machine(run).endswith(", held to AVX2; MKL, OpenCV, NumPy too)")
    assert results_io.held_to({"OPENCV_CPU_DISABLE": "AVX512-SKX"}) == "no AVX-512 in OpenCV"
    assert compare_train.parse_opt(["--hold", "avx2"]).hold == "avx2"
    with pytest.raises(SystemExit):
        compare_train.parse_opt(["--hold", "sse"])


def test_the_hold_prints_shell_exports(capsys):
    assert cpu_hold.main(["avx2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "export ONEDNN_MAX_CPU_ISA=AVX2" in lines
    assert "export NPY_DISABLE_CPU_FEATURES='X86_V4 AVX512_ICL AVX512_SPR'" in lines
    assert cpu_hold.main(["avx3"]) == 2
