"""One line, never a traceback: a bad flag value, a bad YOLO_* setting (also one read while utils.backend is
imported, before an entry script's main runs), a damaged OpenVINO model, an exported model against a data YAML with
another class count. Each stops with a non-zero exit status and one error line naming the value or file; a cut or
NaN row of evolve.csv is skipped with one warning. And regression (3) of issue 33: TensorBoard's event files must not
import TensorFlow, or a DDP rank that then builds DistributedDataParallel (which imports triton) aborts in LLVM.

The flag checks run in-process (parse_opt); a few cases of each kind also run the real scripts as subprocesses
(marked slow: each imports the framework)."""
import importlib
import inspect
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.helpers.process_helpers import without_run_header
from utils.backend import IS_TORCH

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# what OneFlow's runtime prints on stderr when it is imported (glog lines, its RDMA probe), not the script's output
FRAMEWORK_NOISE = re.compile(r"[IWEF]\d{8} |libibverbs not available")


def parse(module, argv):
    """module.parse_opt on argv (the train scripts take it as args=, the others positionally)."""
    fn = importlib.import_module(module).parse_opt
    return fn(args=argv) if "args" in inspect.signature(fn).parameters else fn(argv)


# (module, argv, what the one line must say)
BAD_FLAGS = [
    ("train", ["--img", "0"], "argument --imgsz/--img/--img-size: 0 is not an image size"),
    ("train", ["--img", "-320"], "-320 is not an image size"),
    ("train", ["--img", "65536"], "65536 is not an image size: give pixels from 1 to 16384"),
    ("train", ["--img", "abc"], "'abc' is not a whole number"),
    ("train", ["--batch-size", "0"], "argument --batch-size: 0 is not a batch size: give a whole number >= 1, or -1"),
    ("train", ["--batch-size", "-2"], "-2 is not a batch size"),
    ("train", ["--workers", "-1"], "argument --workers: -1 is not a count: give a whole number >= 0"),
    ("train", ["--epochs", "0"], "argument --epochs: 0 is not a positive count"),
    ("train", ["--cache", "Disk"], "argument --cache: invalid choice: 'Disk'"),
    ("segment.train", ["--epochs", "0"], "argument --epochs"),
    ("segment.train", ["--cache", "RAM"], "invalid choice: 'RAM'"),
    ("classify.train", ["--imgsz", "0"], "0 is not an image size"),
    ("classify.train", ["--batch-size", "0"], "argument --batch-size: 0 is not a positive count"),
    ("classify.train", ["--workers", "-1"], "argument --workers"),
    ("classify.train", ["--epochs", "0"], "argument --epochs"),
    ("classify.train", ["--cache", "Disk"], "invalid choice: 'Disk'"),
    ("val", ["--img", "0"], "0 is not an image size"),
    ("val", ["--batch-size", "0"], "argument --batch-size: 0 is not a positive count"),
    ("val", ["--workers", "-1"], "argument --workers"),
    ("segment.val", ["--img", "65536"], "65536 is not an image size"),
    ("classify.val", ["--img", "-320"], "-320 is not an image size"),
    ("classify.val", ["--batch-size", "0"], "argument --batch-size"),
    ("detect", ["--img", "0"], "0 is not an image size"),
    ("detect", ["--img", "640", "0"], "0 is not an image size"),
    ("detect", ["--vid-stride", "0"], "argument --vid-stride: 0 is not a positive count"),
    ("segment.predict", ["--vid-stride", "0"], "argument --vid-stride"),
    ("classify.predict", ["--img", "65536"], "65536 is not an image size"),
    ("export", ["--img", "0"], "0 is not an image size"),
    ("export", ["--batch-size", "0"], "argument --batch-size"),
]


@pytest.mark.parametrize("module, argv, says", BAD_FLAGS, ids=[f"{m}{' '.join(a)}" for m, a, _ in BAD_FLAGS])
def test_bad_numbers_and_choices_are_one_argparse_line(module, argv, says, capsys):
    with pytest.raises(SystemExit) as e:
        parse(module, argv)
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert len(err.splitlines()) == 1 and says in err and ": error: " in err, err


# (module, argv, {option: value parse_opt must return}): valid values keep their official meaning
KEPT = [
    ("train", ["--batch-size", "-1"], {"batch_size": -1}),  # AutoBatch
    ("train", ["--cache"], {"cache": "ram"}),
    ("train", ["--cache", "disk", "--img", "16", "--workers", "0", "--epochs", "1"],
     {"cache": "disk", "imgsz": 16, "workers": 0, "epochs": 1}),  # 16 is rounded up to the stride later, as official
    ("train", [], {"cache": None, "batch_size": 16, "imgsz": 640, "workers": 8, "epochs": 100}),
    ("classify.train", ["--cache", "ram", "--imgsz", "16384"], {"cache": "ram", "imgsz": 16384}),
    ("val", ["--img", "1", "--batch-size", "1"], {"imgsz": 1, "batch_size": 1}),
    ("detect", ["--img", "320", "256", "--vid-stride", "3"], {"imgsz": [320, 256], "vid_stride": 3}),
    ("export", ["--img", "64", "--batch-size", "2"], {"imgsz": [64], "batch_size": 2}),
]


@pytest.mark.parametrize("module, argv, want", KEPT, ids=[f"{m}{' '.join(a)}" for m, a, _ in KEPT])
def test_valid_values_parse_as_before(module, argv, want):
    opt = vars(parse(module, argv))
    assert {k: opt[k] for k in want} == want


# ------------------------------------------------------------------------------------------- whole scripts
def run_script(args, tmp_path, **env):
    """python <args> from the project folder, the backend notice silenced unless env says otherwise."""
    full = {**os.environ, "YOLO_QUIET": "1", **env}
    full.pop("_YOLO_BACKEND_ANNOUNCED", None)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=full, capture_output=True, text=True, timeout=300)


def the_error_line(p, prefix):
    """The one error line of a finished script: exit status non-zero, no traceback anywhere, exactly one line that
    starts with prefix ('<prog>: '), and it is the last thing on stderr (informational lines may come before it;
    the run header's arguments line starts with the same prefix, so it is set aside first)."""
    out = ANSI.sub("", p.stdout + p.stderr)
    lines = [ANSI.sub("", ln) for ln in without_run_header(p.stderr) if ln.strip()]
    assert p.returncode != 0 and "Traceback" not in out, out[-3000:]
    errors = [ln for ln in lines if ln.startswith(prefix)]
    assert len(errors) == 1 and errors[0] == lines[-1], out[-3000:]
    return errors[0]


SCRIPT_CASES = [  # (argv, environment, exit status, prefix, what the line says)
    (["train.py", "--img", "0"], {}, 2, "train.py: error: ", "0 is not an image size"),
    (["detect.py", "--vid-stride", "0"], {}, 2, "detect.py: error: ", "--vid-stride: 0 is not a positive count"),
    (["classify/train.py", "--cache", "Disk"], {}, 2, "train.py: error: ", "invalid choice: 'Disk'"),
    (["val.py"], {"YOLO_BACKEND": "tensorflow"}, 1, "val: ", "YOLO_BACKEND='tensorflow': not a value it takes"),
    (["segment/predict.py"], {"YOLO_QUIET": "maybe"}, 1, "predict: ", "YOLO_QUIET='maybe': not 0 or 1"),
    (["train.py"], {"YOLO_HOST_MALLOC": "jemalloc"}, 1, "train: ", "YOLO_HOST_MALLOC='jemalloc'"),
]


@pytest.mark.slow
@pytest.mark.parametrize("argv, env, status, prefix, says", SCRIPT_CASES,
                         ids=[" ".join(a + [f"{k}={v}" for k, v in e.items()]) for a, e, *_ in SCRIPT_CASES])
def test_scripts_print_one_line_for_bad_flags_and_settings(argv, env, status, prefix, says, tmp_path):
    """Settings read while utils.backend is imported fail before main: still one line, exit status 1."""
    p = run_script(argv, tmp_path, **env)
    line = the_error_line(p, prefix)
    assert p.returncode == status and says in line
    said = [ln for ln in p.stderr.splitlines() if ln.strip() and not FRAMEWORK_NOISE.match(ln)]
    assert len(said) == 1, p.stderr  # nothing of the script ran before the check


# ------------------------------------------------------------------------------------------- exported models
def tiny_openvino_model(folder, nc=80):
    """An OpenVINO IR (x -> (1, 4096, 5 + nc) detections) with the metadata export.py writes beside it."""
    ov = pytest.importorskip("openvino")
    from openvino import opset13 as ops
    x = ops.parameter([1, 3, 64, 64], np.float32, name="images")
    flat = ops.transpose(ops.reshape(x, ops.constant(np.array([1, 3, 4096], np.int64)), False),
                         ops.constant(np.array([0, 2, 1], np.int64)))
    y = ops.matmul(flat, ops.constant(np.full((5 + nc, 3), 0.01, np.float32)), False, True)
    folder.mkdir(parents=True)
    ov.save_model(ov.Model([y], [x], "tiny"), folder / "tiny.xml", compress_to_fp16=False)
    (folder / "tiny.yaml").write_text(yaml.safe_dump({"stride": 32, "names": {i: f"c{i}" for i in range(nc)}}))
    return folder


def tiny_onnx_model(file, nc=80):
    """The same model as ONNX, with export.py's metadata (stride, names)."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(np.full((3, 5 + nc), 0.01, np.float32), "W"),
             numpy_helper.from_array(np.array([1, 3, 4096], np.int64), "shape")]
    nodes = [helper.make_node("Reshape", ["images", "shape"], ["flat"]),
             helper.make_node("Transpose", ["flat"], ["t"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["t", "W"], ["output0"])]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])],
                              [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 4096, 5 + nc])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    for k, v in {"stride": "32", "names": repr({i: f"c{i}" for i in range(nc)})}.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = k, v
    onnx.save(model, file)
    return file


def damage(folder, how):
    """A copy of an OpenVINO folder damaged as a cut download or copy leaves it; returns (folder, the file at fault)."""
    xml, weights = folder / "tiny.xml", folder / "tiny.bin"
    if how == "cut xml":
        xml.write_bytes(xml.read_bytes()[: xml.stat().st_size // 2])
        return xml
    if how == "cut bin":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
        return weights
    weights.unlink()
    return weights


@pytest.mark.parametrize("how, says", [("cut xml", "is damaged or incomplete"), ("cut bin", "is damaged or incomplete"),
                                       ("no bin", "is missing")])
def test_a_damaged_openvino_model_is_one_line_naming_the_file(how, says, tmp_path):
    from models.multibackend import DetectMultiBackend, ModelLoadError
    folder = tiny_openvino_model(tmp_path / "tiny_openvino_model")
    assert DetectMultiBackend(str(folder)).stored_nc == 80  # whole, it loads
    culprit = damage(folder, how)
    with pytest.raises(ModelLoadError) as e:
        DetectMultiBackend(str(folder))
    message = str(e.value)
    assert "\n" not in message and f"{culprit} {says}" in message and "export.py --include openvino" in message


def test_hub_says_the_same_line_for_a_damaged_openvino_model(tmp_path):
    import hubconf
    from models.multibackend import ModelLoadError
    folder = tiny_openvino_model(tmp_path / "tiny_openvino_model")
    culprit = damage(folder, "cut bin")
    with pytest.raises(ModelLoadError, match=re.escape(f"{culprit} is damaged or incomplete")):
        hubconf.custom(path=str(folder), _verbose=False)


def data_yaml(path, images, nc):
    path.write_text(yaml.safe_dump({"path": str(images.parent.parent), "train": f"images/{images.name}",
                                    "val": f"images/{images.name}", "names": [f"c{i}" for i in range(nc)]}))
    return path


@pytest.mark.parametrize("kind", ["onnx", "openvino"])
def test_an_exported_models_class_count_is_checked_against_the_data(kind, tmp_path, coco128_dir):
    from utils.inference.loading import load_model, model_class_count
    w = tiny_onnx_model(tmp_path / "tiny.onnx") if kind == "onnx" else tiny_openvino_model(tmp_path / "m_openvino_model")
    model, _ = load_model(str(w), device="cpu", imgsz=64)
    assert model_class_count(model) == 80
    import val
    data = data_yaml(tmp_path / "d90.yaml", coco128_dir / "images" / "train2017", 90)
    with pytest.raises(val.ClassCountMismatch, match=r"\(80 classes\).*\(90 classes\)"):
        val.run(data=str(data), weights=[str(w)], imgsz=64, project=tmp_path / "runs", workers=0)


@pytest.mark.slow
@pytest.mark.parametrize("script", ["val.py", "detect.py"])
def test_scripts_print_one_line_for_exported_models(script, tmp_path, coco128_dir):
    """val.py: an ONNX model of 80 classes against a 90-class YAML; detect.py: an OpenVINO model with a cut .bin."""
    if script == "val.py":
        w = tiny_onnx_model(tmp_path / "tiny.onnx")
        data = data_yaml(tmp_path / "d90.yaml", coco128_dir / "images" / "train2017", 90)
        args, says = ["--data", str(data)], "(80 classes) trained on different --data than what you passed (90 classes)"
    else:
        w = tiny_openvino_model(tmp_path / "tiny_openvino_model")
        args, says = ["--source", str(coco128_dir / "images" / "train2017")], f"{damage(w, 'cut bin')} is damaged"
    p = run_script([script, "--weights", str(w), "--img", "64", "--project", str(tmp_path / "runs"), *args], tmp_path)
    assert says in the_error_line(p, f"{Path(script).stem}: ")


# ------------------------------------------------------------------------------------------- evolve.csv
def write_evolve_csv(path, rows):
    from utils.evolve import META, RESULT_KEYS
    keys = list(RESULT_KEYS) + list(META)
    path.write_text(",".join(f"{k:>20}" for k in keys) + "\n" + "".join(r + "\n" for r in rows))
    return keys


def good_row(i):
    from utils.evolve import META
    results = [0.5, 0.5, 0.1 * i, 0.05 * i, 0.1, 0.1, 0.1]
    genes = [(lo + hi) / 2 for _, lo, hi in META.values()]
    return ",".join(f"{v:20.5g}" for v in results + genes)


def test_cut_and_nan_rows_of_evolve_csv_are_skipped_with_one_warning(tmp_path, caplog):
    from utils.evolve import META, mutate, read_evolve_csv
    from utils.plots import plot_evolve
    csv = tmp_path / "evolve.csv"
    good = [good_row(i) for i in range(1, 4)]
    nan_row = good[0].replace("0.1", "nan", 1)
    keys = write_evolve_csv(csv, [good[0], good[1][: len(good[1]) // 2], nan_row, "abc," * 3 + "x", "", good[2]])
    with caplog.at_level("WARNING", logger="yolov5"):
        got_keys, x = read_evolve_csv(csv)
        read_evolve_csv(csv)  # read again (every generation does): not warned again
    assert got_keys == keys and x.shape == (2, len(keys)) and np.isfinite(x).all()
    warnings = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(warnings) == 1 and f"{csv}: skipped lines 3, 4, 5" in warnings[0], warnings
    hyp = {k: (lo + hi) / 2 for k, (_, lo, hi) in META.items()}
    child = mutate(hyp, csv, rng=np.random.default_rng(0))
    assert all(math.isfinite(v) and META[k][1] <= v <= META[k][2] for k, v in child.items())
    best = plot_evolve(csv)  # evolve.png from the same rows
    assert (tmp_path / "evolve.png").is_file() and all(math.isfinite(v) for v in best.values())


def test_evolve_csv_without_usable_rows_or_header(tmp_path):
    from utils.evolve import META, mutate
    from utils.evolve_csv import EvolveCsvError, read_evolve_csv
    csv = tmp_path / "evolve.csv"
    write_evolve_csv(csv, ["1,2,3"])
    hyp = {"lr0": 0.5, "momentum": 0.9}
    assert mutate(hyp, csv) == {"lr0": META["lr0"][2], "momentum": 0.9}  # nothing to mutate from: the hyp, limited
    csv.write_text("")
    with pytest.raises(EvolveCsvError, match=f"{re.escape(str(csv))}: no header row") as e:
        read_evolve_csv(csv)
    assert "\n" not in str(e.value)


# ------------------------------------------------------------------------------------------- regression (3)
TF_PY = ROOT / ".venv-tf" / "bin" / "python"
TF_REQUIRED = os.environ.get("YOLO_REQUIRE_TF_ENV") == "1"  # CI builds .venv-tf: there a missing one fails


@pytest.mark.slow  # imports torch._dynamo and triton in .venv-tf: about 30 s on a loaded 2-core machine
@pytest.mark.skipif(not IS_TORCH, reason=".venv-tf is a PyTorch environment: run from the PyTorch suite")
@pytest.mark.skipif(not ((ROOT / ".venv-tf" / ".stamp").exists() or TF_REQUIRED),
                    reason="the converters' environment .venv-tf is missing (bash scripts/setup.sh tf)")
def test_tensorboard_leaves_tensorflow_alone_so_a_ddp_rank_can_import_triton(tmp_path):
    """Rank 0 of a DDP job writes TensorBoard events, then wraps its model in DistributedDataParallel, which imports
    triton (through torch._dynamo). With TensorFlow already imported, triton's LLVM aborted the process ("LLVM
    ERROR: inconsistency in registered CommandLine options"); a single process never built DDP and trained."""
    assert TF_PY.exists(), f"YOLO_REQUIRE_TF_ENV=1 and {TF_PY} is missing: build it with `bash scripts/setup.sh tf`"
    code = f"""
import importlib.util, sys
from utils.backend import torch, ddp_wrap
from utils.loggers.tensorboard import EventWriter, available
assert importlib.util.find_spec("tensorflow") and importlib.util.find_spec("triton"), "no TensorFlow/triton here"
assert available()
w = EventWriter({str(tmp_path)!r})
w.add_scalar("metrics/mAP_0.5", 0.5, 0)
w.close()
torch.distributed.init_process_group("gloo", init_method="file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
ddp_wrap(torch.nn.Linear(2, 2), torch.device("cpu"), 0)
print("tensorflow" in sys.modules, "triton" in sys.modules)
"""
    env = {**os.environ, "YOLO_BACKEND": "torch", "YOLO_QUIET": "1", "PYTHONPATH": str(ROOT)}
    p = subprocess.run([str(TF_PY), "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == ["False", "True"]  # TensorFlow never imported, triton imported by DDP
    assert list(tmp_path.glob("events.out.tfevents.*"))
