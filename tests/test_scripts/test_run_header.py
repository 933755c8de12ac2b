"""The two header lines every official script prints first: `<script>: k=v, ...` (print_args) and
`YOLOv5 🚀 <version> Python-<x.y.z> <framework>-<version> CPU` (or one `CUDA:<id> (<name>, <MiB>MiB)` per GPU).

Most checks call what the scripts call (parse_opt, main, run) in this process; one runs detect.py for real."""
import io
import logging
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from utils.log import colorstr

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
DEVICE_LINE = re.compile(r"^YOLOv5 🚀 (\S+) Python-(\d+\.\d+\.\d+) (torch|oneflow)-(\S+) CPU$")


@pytest.fixture
def logged():
    """The project logger's lines while the test runs (colour codes kept), as a function returning them."""
    from utils.log import LOGGER
    stream, level = io.StringIO(), LOGGER.level
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    yield lambda: stream.getvalue().splitlines()
    LOGGER.removeHandler(handler)
    LOGGER.setLevel(level)


def args_line(lines, prefix):
    """The one line that starts with the coloured prefix ('detect: '), without that prefix."""
    found = [ln for ln in lines if ln.startswith(colorstr(prefix))]
    assert len(found) == 1, lines
    return found[0][len(colorstr(prefix)):]


def device_lines(lines):
    return [ln for ln in lines if ln.startswith("YOLOv5 🚀 ")]


# ------------------------------------------------------------------------------------------------ print_args
def test_print_args_writes_the_official_line(logged):
    from utils.run_header import print_args
    print_args({"weights": ["yolov5n.pt"], "imgsz": [640, 640], "device": ""})
    assert logged() == [colorstr("tests/test_scripts/test_run_header: ") + "weights=['yolov5n.pt'], "
                        "imgsz=[640, 640], device="]
    print_args({"a": 1}, show_file=False)
    assert logged()[-1] == colorstr("") + "a=1"


def test_print_args_without_args_reports_the_callers_arguments(logged):
    from utils.run_header import print_args

    def caller(weights, conf_thres=0.25, *more, **extra):
        local = "not an argument"  # noqa: F841
        print_args(show_file=False, show_func=True)

    caller("best.pt", 0.5, 7, flag=True)
    assert logged() == [colorstr("caller: ") + "weights=best.pt, conf_thres=0.5"]  # named parameters only


def test_script_name_is_the_path_in_the_repository():
    from utils.run_header import script_name
    assert script_name(ROOT / "detect.py") == "detect"
    assert script_name(ROOT / "segment" / "predict.py") == "segment/predict"
    assert script_name("/somewhere/else/my_script.py") == "my_script"


def test_entry_scripts_print_their_arguments_when_parsed(logged):
    import detect
    import val
    from classify import predict as classify_predict
    detect.parse_opt(["--weights", "yolov5n.pt", "--img", "320", "--device", "cpu"])
    line = args_line(logged(), "detect: ")
    assert line.startswith("weights=['yolov5n.pt'], source=") and "imgsz=[320, 320]" in line and "device=cpu," in line
    val.parse_opt(["--img", "256", "--batch-size", "4"])
    line = args_line(logged(), "val: ")
    assert line.startswith("data=") and ", batch_size=4, imgsz=256," in line and "task=val" in line
    classify_predict.parse_opt(["--img", "96"])
    assert "imgsz=[96, 96]" in args_line(logged(), "classify/predict: ")


@pytest.fixture
def train_stubbed(monkeypatch):
    """train.py whose engine main stops right after its first step (who this process is, and the arguments line):
    no run folder, no training."""
    import train

    class Stopped(Exception):
        pass

    calls = []

    def stop(seed, dist):
        calls.append(seed)
        raise Stopped

    monkeypatch.setattr(train.run_main, "process_seed", stop)

    def main(opt):
        with pytest.raises(Stopped):
            train.main(opt)

    return main, train.parse_opt, calls


def test_train_prints_its_arguments_on_the_main_process_only(train_stubbed, logged, monkeypatch):
    main, parse_opt, calls = train_stubbed
    main(parse_opt(args=["--img", "64", "--epochs", "3", "--device", "cpu"]))
    line = args_line(logged(), "train: ")
    assert line.startswith("weights=") and ", epochs=3, batch_size=16, imgsz=64," in line and len(calls) == 1
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")  # a DDP rank other than 0 prints nothing
    before = len(logged())
    main(parse_opt(args=["--img", "64"]))
    assert len(logged()) == before and len(calls) == 2
    monkeypatch.setenv("RANK", "0")
    main(parse_opt(args=["--img", "64"]))
    assert len(logged()) == before + 1


def test_train_resume_prints_the_arguments_before_resuming(logged, tmp_path):
    """As official: the command line's arguments first, then the resume (here: of a file that is not there)."""
    import train
    from utils.errors import UserError
    missing = tmp_path / "nope" / "last.pt"
    with pytest.raises((UserError, FileNotFoundError)):
        train.main(train.parse_opt(args=["--resume", str(missing)]))
    assert f"resume={missing}," in args_line(logged(), "train: ")


def test_train_logs_the_device_line_after_its_arguments(logged, tmp_path, monkeypatch):
    """Through the engine's main up to the training itself (stubbed): arguments line, then the device line."""
    import train
    from utils.engine import run as engine_run
    monkeypatch.setattr(engine_run, "train", lambda *a, **k: "trained")
    opt = train.parse_opt(args=["--cfg", "yolov5n.yaml", "--weights", "", "--device", "cpu", "--project",
                                str(tmp_path), "--img", "64"])
    assert train.main(opt) == "trained"
    lines = logged()
    first = next(i for i, ln in enumerate(lines) if ln.startswith(colorstr("train: ")))
    devices = [i for i, ln in enumerate(lines) if ln.startswith("YOLOv5 🚀 ")]
    assert len(devices) == 1 and devices[0] > first and DEVICE_LINE.match(lines[devices[0]])


# ------------------------------------------------------------------------------------------------ device line
def test_cpu_device_line_names_python_and_the_backend(logged):
    from utils import backend
    from utils.device_header import log_device
    log_device(backend.device("cpu"), "cpu")
    lines = logged()
    assert len(device_lines(lines)) == 1 and lines[-1] == ""  # official leaves a blank line after it
    m = DEVICE_LINE.match(device_lines(lines)[0])
    assert m, lines
    assert m[2] == platform.python_version() and f"{m[3]}-{m[4]}" == f"{backend.BACKEND}-{backend.VERSION}"
    from utils.run_header import project_version
    assert m[1] == project_version()


def test_cuda_device_lines_from_device_properties():
    from utils.run_header import device_line
    h200 = SimpleNamespace(name="NVIDIA H200", total_memory=143771 * (1 << 20))
    a100 = SimpleNamespace(name="NVIDIA A100-SXM4-80GB", total_memory=81050 * (1 << 20) + 12345)
    one = device_line("torch-2.11.0+cu130", [("0", h200)], version="v7.0-1-gabc1234")
    assert one == f"YOLOv5 🚀 v7.0-1-gabc1234 Python-{platform.python_version()} torch-2.11.0+cu130 " \
                  "CUDA:0 (NVIDIA H200, 143771MiB)\n"
    two = device_line("oneflow-0.9.0", [("2", h200), ("3", a100)], newline=False, version="2026-8-20").splitlines()
    head = f"YOLOv5 🚀 2026-8-20 Python-{platform.python_version()} oneflow-0.9.0 "
    assert two == [head + "CUDA:2 (NVIDIA H200, 143771MiB)",
                   " " * (len(head) + 1) + "CUDA:3 (NVIDIA A100-SXM4-80GB, 81050MiB)"]  # as official aligns them


def test_log_device_lists_the_gpus_that_device_names(logged, monkeypatch):
    """--device 0,1 (DDP) lists both GPUs, each by its own index; a single --device 1 lists GPU 1."""
    from utils import device_header
    asked = []

    def properties(i):
        asked.append(i)
        return SimpleNamespace(name=f"GPU{i}", total_memory=1024 * (1 << 20))

    monkeypatch.setattr(device_header, "torch", SimpleNamespace(cuda=SimpleNamespace(get_device_properties=properties)))
    device_header.log_device("cuda:0", "0,1")
    device_header.log_device("cuda:1", "cuda:1")
    device_header.log_device("cuda:0", "")
    lines = [ln.strip() for ln in logged() if ln.strip()]
    assert asked == [0, 1, 1, 0]
    assert lines[0].endswith("CUDA:0 (GPU0, 1024MiB)") and lines[1] == "CUDA:1 (GPU1, 1024MiB)"
    assert lines[2].endswith("CUDA:1 (GPU1, 1024MiB)") and lines[3].endswith("CUDA:0 (GPU0, 1024MiB)")


def test_a_gpu_that_is_not_there_is_one_user_error(logged):
    from utils import backend
    from utils.device_header import DeviceError, select_and_log_device
    from utils.errors import UserError
    if backend.cuda_device_count() > 7:
        pytest.skip("this machine has a GPU 7")
    with pytest.raises(DeviceError) as e:
        select_and_log_device("7")
    assert isinstance(e.value, UserError) and isinstance(e.value, ValueError) and "\n" not in str(e.value)
    assert not device_lines(logged())  # no line for a device that was not selected


def test_detect_and_val_runs_log_the_device_line_before_loading(logged, tmp_path):
    """detect.run and val.run (what the scripts' main calls) log the line, then load the weights (missing here)."""
    import detect
    import val
    missing = tmp_path / "missing.pt"
    with pytest.raises(FileNotFoundError):
        detect.run(weights=[str(missing)], source=str(tmp_path), device="cpu", project=tmp_path / "runs")
    assert len(device_lines(logged())) == 1
    with pytest.raises(FileNotFoundError):
        val.run(data=str(ROOT / "data" / "coco128.yaml"), weights=[str(missing)], device="cpu",
                project=tmp_path / "runs")
    assert len(device_lines(logged())) == 2


# ------------------------------------------------------------------------------------------------ version
def test_git_describe_outside_a_repository_is_empty_and_silent(tmp_path, capfd, monkeypatch):
    from utils.run_header import git_describe
    assert git_describe(tmp_path) == ""
    monkeypatch.setenv("PATH", str(tmp_path))  # no git program at all
    (tmp_path / ".git").mkdir()  # a folder that looks like a checkout
    assert git_describe(tmp_path) == ""
    out = capfd.readouterr()
    assert out.out == "" and out.err == ""


def test_git_describe_of_a_checkout(tmp_path, capfd):
    from utils.run_header import git_describe
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    try:
        for cmd in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "one"], ["tag", "v7.0"],
                    ["commit", "-q", "--allow-empty", "-m", "two"]):
            subprocess.run(["git", "-C", str(tmp_path), *cmd], env=env, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no usable git here")
    assert re.fullmatch(r"v7\.0-1-g[0-9a-f]{7,}", git_describe(tmp_path))
    (tmp_path / ".git" / "HEAD").write_text("garbage\n")  # a broken checkout: '' and git's complaint swallowed
    capfd.readouterr()
    assert git_describe(tmp_path) == ""
    assert capfd.readouterr().err == ""


def test_file_date_is_year_month_day_unpadded(tmp_path):
    from utils.run_header import file_date
    f = tmp_path / "f.py"
    f.write_text("")
    t = time.mktime((2026, 8, 5, 12, 0, 0, 0, 0, -1))
    os.utime(f, (t, t))
    assert file_date(f) == "2026-8-5"


# ------------------------------------------------------------------------------------------------ a real run
@pytest.mark.slow
def test_detect_script_prints_both_header_lines(yolov5n_pt, coco128_dir, tmp_path):
    image = next((coco128_dir / "images" / "train2017").glob("*.jpg"))
    env = {**os.environ, "YOLO_QUIET": "1"}
    p = subprocess.run([sys.executable, "detect.py", "--weights", str(yolov5n_pt), "--source", str(image), "--img",
                        "64", "--device", "cpu", "--project", str(tmp_path), "--nosave"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [ln for ln in ANSI.sub("", p.stdout + p.stderr).splitlines() if ln.strip()]
    heads = [i for i, ln in enumerate(lines) if ln.startswith("detect: ")]
    assert len(heads) == 1, lines
    assert f"weights=['{yolov5n_pt}'], source={image}," in lines[heads[0]]
    assert "imgsz=[64, 64]" in lines[heads[0]] and "device=cpu," in lines[heads[0]]
    devices = [i for i, ln in enumerate(lines) if DEVICE_LINE.match(ln)]
    assert devices == [heads[0] + 1], lines  # right after the arguments, as official
