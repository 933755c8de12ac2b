"""The ultralytics helper functions users import from utils.general, utils.torch_utils, utils.downloads, utils,
utils.activations, utils.loss and models.experimental behave as theirs do (on the cases where this project's rules,
nothing downloaded, installed or run unasked, do not say otherwise)."""
import logging
import os
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

from utils import TryExcept, emojis, threaded
from utils.backend import nn, to_numpy, torch
from utils.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def log_lines(caplog):
    logging.getLogger("yolov5").propagate = True
    caplog.set_level(logging.INFO, logger="yolov5")
    yield caplog
    logging.getLogger("yolov5").propagate = False


# ---------------------------------------------------------------------------------------------------------- utils
def test_try_except_turns_an_error_into_one_warning_and_lets_a_stop_through(log_lines):
    with TryExcept("plotting"):
        raise ValueError("no data")
    assert "plotting: no data" in log_lines.text

    @TryExcept()
    def fails():
        raise KeyError("k")

    assert fails() is None
    with pytest.raises(KeyboardInterrupt):
        with TryExcept():
            raise KeyboardInterrupt


def test_threaded_runs_in_a_thread_unless_told_not_to():
    seen = []

    @threaded
    def work(x):
        seen.append((x, threading.current_thread() is threading.main_thread()))
        return x * 2

    t = work(3)
    t.join()
    assert isinstance(t, threading.Thread) and seen == [(3, False)]
    assert work(4, threaded=False) == 8 and seen[-1] == (4, True)
    assert emojis("ok ✅") in ("ok ✅", "ok ")


# ---------------------------------------------------------------------------------------------------------- paths
def test_file_checks(tmp_path):
    from utils.general import check_file, check_suffix, check_yaml, file_size, url2file
    check_suffix("a.pt", (".pt",))
    with pytest.raises(UserError, match="suffix .onnx"):
        check_suffix("a.onnx", (".pt",))
    assert Path(check_yaml("hyp.scratch-low.yaml")) == (ROOT / "data/hyps/hyp.scratch-low.yaml").resolve()
    with pytest.raises(UserError, match="suffix .pt"):
        check_yaml("x.pt")
    with pytest.raises(UserError, match="downloads nothing"):
        check_file("https://example.com/a.yaml")
    f = tmp_path / "f.bin"
    f.write_bytes(b"x" * (1 << 20))
    assert check_file(str(f)) == str(f) and file_size(f) == pytest.approx(1.0) and file_size(tmp_path) == 1.0
    assert file_size(tmp_path / "none") == 0.0
    assert url2file("https://a.org/dir/a%20b.txt?auth=1") == "a b.txt"


def test_working_directory_returns(tmp_path):
    from utils.general import WorkingDirectory
    here = Path.cwd()
    with WorkingDirectory(tmp_path):
        assert Path.cwd().resolve() == tmp_path.resolve()
    assert Path.cwd() == here

    @WorkingDirectory(tmp_path)
    def where():
        return Path.cwd().resolve()

    assert where() == tmp_path.resolve() and Path.cwd() == here


def test_yaml_round_trip_keeps_order_and_writes_paths_as_text(tmp_path):
    from utils.general import yaml_load, yaml_save
    f = tmp_path / "opt.yaml"
    yaml_save(f, {"z": 1, "a": Path("/x/y"), "names": ["a", "b"]})
    assert list(yaml_load(f)) == ["z", "a", "names"] and yaml_load(f)["a"] == "/x/y"


def test_versions_and_requirements(log_lines):
    from utils.general import check_requirements, check_version
    assert check_version("2.13.0", "1.8.0") and not check_version("1.7.1", "1.8.0")
    assert not check_version("1.8.1", "1.8.0", pinned=True)
    with pytest.raises(ValueError, match="torch 1.8.0 is required"):
        check_version("1.7", "1.8.0", name="torch ", hard=True)
    assert check_requirements(["numpy>=1.0", "PyYAML"])
    assert not check_requirements(["numpy>=999", "surely-not-a-package-xyz"], install=True)
    assert 'pip install "numpy>=999" "surely-not-a-package-xyz"' in log_lines.text  # said, not run
    assert check_requirements(["surely-not-a-package-xyz"], exclude=("surely-not-a-package-xyz",))


def test_environment_answers_offline(monkeypatch, tmp_path):
    from utils.general import check_font, check_git_info, is_colab, is_kaggle, user_config_dir
    assert check_font("no-such-font.ttf") is None  # nothing fetched
    font = tmp_path / "f.ttf"
    font.write_bytes(b"")
    assert check_font(str(font)) == font
    assert check_git_info(tmp_path) == {}  # not a checkout: no error, no output
    monkeypatch.setenv("YOLOV5_CONFIG_DIR", str(tmp_path / "cfg"))
    assert user_config_dir() == tmp_path / "cfg" and (tmp_path / "cfg").is_dir()
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    assert not is_colab() and not is_kaggle()


def test_small_helpers(tmp_path):
    from utils.general import clean_str, get_default_args, imread, imwrite, is_writeable, methods
    assert clean_str("rtsp://a:b@host/x?y=1") == "rtsp_//a_b_host/x_y_1"
    assert get_default_args(lambda a, b=2, *, c="x": 0) == {"b": 2, "c": "x"}
    assert "get_default_args" not in methods(object()) and "bit_length" in methods(1)
    im = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    f = tmp_path / "ünïcode.png"
    assert imwrite(f, im) and (imread(f) == im).all()
    assert imread(tmp_path / "missing.png") is None
    assert not imwrite(tmp_path / "x.unknown-suffix", im) and not list(tmp_path.glob("*.unknown-suffix"))
    assert is_writeable(tmp_path)


def test_download_and_unzip_follow_the_archive_rules(tmp_path):
    from utils.general import download, unzip_file
    z = tmp_path / "src" / "d.zip"
    z.parent.mkdir()
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("d/labels/a.txt", "0 0.5 0.5 0.1 0.1\n")
    download(z.as_uri(), tmp_path / "out")  # a file:// URL: the real fetch code without a network
    assert (tmp_path / "out/d/labels/a.txt").read_text().startswith("0 0.5") and not (tmp_path / "out/d.zip").exists()
    bad = tmp_path / "src" / "bad.zip"
    with zipfile.ZipFile(bad, "w") as f:
        f.writestr("../escape.txt", "x")
    with pytest.raises(UserError):
        unzip_file(bad, tmp_path / "out2")
    assert not (tmp_path / "escape.txt").exists()


def test_print_mutation_writes_the_evolve_record(tmp_path):
    from utils.general import print_mutation
    keys = ("metrics/precision", "metrics/recall", "metrics/mAP_0.5", "metrics/mAP_0.5:0.95", "val/box_loss",
            "val/obj_loss", "val/cls_loss")
    print_mutation(keys, (0.5, 0.4, 0.3, 0.2, 0.05, 0.04, 0.01), {"lr0": 0.01, "momentum": 0.9}, tmp_path, "")
    best = print_mutation(keys, (0.5, 0.4, 0.6, 0.4, 0.05, 0.04, 0.01), {"lr0": 0.02, "momentum": 0.8}, tmp_path, "")
    rows = (tmp_path / "evolve.csv").read_text().splitlines()
    assert len(rows) == 3 and rows[0].split(",")[0].strip() == "metrics/precision"
    assert best == {"lr0": 0.02, "momentum": 0.8}
    assert "Best generation: 1" in (tmp_path / "hyp_evolve.yaml").read_text()


def test_check_amp_is_false_on_the_cpu():
    from utils.general import check_amp
    assert check_amp(nn.Conv2d(3, 4, 3)) is False


# ---------------------------------------------------------------------------------------------------- torch_utils
def test_torch_utils_helpers():
    from utils.torch_utils import (LOCAL_RANK, RANK, WORLD_SIZE, copy_attr, smart_inference_mode, time_sync,
                                   torch_distributed_zero_first)
    assert (LOCAL_RANK, RANK, WORLD_SIZE) == (-1, -1, 1)  # a single process, as ultralytics reports it

    class A:
        pass

    a, b = A(), A()
    b.x, b.y, b._hidden = 1, 2, 3
    copy_attr(a, b, exclude=("y",))
    assert vars(a) == {"x": 1}

    @smart_inference_mode()
    def f(x):
        return x * 2

    x = torch.ones(2, requires_grad=True)
    assert not f(x).requires_grad
    with torch_distributed_zero_first(-1):  # a single process: no barrier to wait at
        pass
    assert time_sync() <= time_sync()


def test_prune_zeroes_the_smallest_weights_and_sparsity_counts_them():
    from utils.torch_utils import prune, sparsity
    m = nn.Sequential(nn.Conv2d(2, 4, 3, bias=False))
    with torch.no_grad():
        m[0].weight.copy_(torch.arange(1, 73, dtype=torch.float32).reshape(4, 2, 3, 3) * ((-1) ** torch.arange(72)
                                                                                         ).reshape(4, 2, 3, 3))
    prune(m, 0.25)
    w = np.abs(to_numpy(m[0].weight)).ravel()
    assert (w[:18] == 0).all() and (w[18:] > 0).all()  # |w| 1..18 were the smallest quarter
    assert sparsity(m) == pytest.approx(0.25)


def test_smart_resume_arithmetic():
    from utils.torch_utils import smart_resume

    class Opt:
        def load_state_dict(self, sd):
            self.sd = sd

    opt = Opt()
    ckpt = {"epoch": 4, "optimizer": {"state": 1}, "best_fitness": 0.7}
    assert smart_resume(ckpt, opt, epochs=10) == (0.7, 5, 10) and opt.sd == {"state": 1}
    assert smart_resume(ckpt, Opt(), epochs=3, resume=False) == (0.7, 5, 7)  # fine-tune 3 more epochs
    with pytest.raises(ValueError, match="nothing to resume"):
        smart_resume({"epoch": -1, "optimizer": None}, opt, epochs=10)


def test_profile_reports_each_op():
    from utils.torch_utils import profile
    rows = profile(torch.randn(1, 3, 32, 32), [nn.Conv2d(3, 8, 3, padding=1), nn.SiLU()], n=2, device="cpu")
    assert rows[0][0] == 8 * 3 * 9 + 8 and rows[0][5] == (1, 8, 32, 32) and rows[1][0] == 0


# ------------------------------------------------------------------------------------------------------ downloads
def test_weights_are_found_or_named_never_fetched(tmp_path):
    from utils.downloads import attempt_download, is_url
    from models.experimental import attempt_download as from_models
    w = tmp_path / "w.pt"
    w.write_bytes(b"x")
    assert attempt_download(f"'{w}'") == str(w) and from_models is attempt_download
    with pytest.raises(UserError, match="downloads nothing.*releases/tag/v7.0"):
        attempt_download(tmp_path / "yolov5s.pt")
    assert not (tmp_path / "yolov5s.pt").exists()
    assert is_url("https://github.com/ultralytics/yolov5", check=False) and not is_url("yolov5s.pt", check=False)


def test_safe_download_replaces_only_with_a_whole_file(tmp_path):
    from utils.downloads import curl_download, safe_download
    src, dst = tmp_path / "src.bin", tmp_path / "dst.bin"
    src.write_bytes(b"new data")
    dst.write_bytes(b"old")
    safe_download(dst, src.as_uri())
    assert dst.read_bytes() == b"new data"
    with pytest.raises(UserError):
        safe_download(dst, src.as_uri(), min_bytes=1e6)  # too small: the old file stays
    assert dst.read_bytes() == b"new data" and sorted(p.name for p in tmp_path.iterdir()) == ["dst.bin", "src.bin"]
    assert not curl_download((tmp_path / "missing").as_uri(), dst, silent=True)


# ----------------------------------------------------------------------------------------------- activations, loss
def test_activations_follow_their_formulas():
    from utils.activations import AconC, FReLU, Hardswish, MemoryEfficientMish, MetaAconC, Mish, SiLU
    x = torch.linspace(-5, 5, 11).reshape(1, 1, 1, 11)
    xn = to_numpy(x).astype(np.float64)
    sp = np.log1p(np.exp(xn))
    np.testing.assert_allclose(to_numpy(SiLU()(x)), xn / (1 + np.exp(-xn)), atol=1e-6)
    np.testing.assert_allclose(to_numpy(Hardswish()(x)), xn * np.clip(xn + 3, 0, 6) / 6, atol=1e-6)
    np.testing.assert_allclose(to_numpy(Mish()(x)), xn * np.tanh(sp), atol=1e-5)
    np.testing.assert_allclose(to_numpy(MemoryEfficientMish()(x)), xn * np.tanh(sp), atol=1e-5)
    a = AconC(1)
    p1, p2 = float(a.p1.detach()), float(a.p2.detach())
    d = (p1 - p2) * xn
    np.testing.assert_allclose(to_numpy(a(x)), d / (1 + np.exp(-d)) + p2 * xn, atol=1e-5)
    assert tuple(FReLU(4)(torch.randn(1, 4, 8, 8)).shape) == (1, 4, 8, 8)
    assert tuple(MetaAconC(32)(torch.randn(2, 32, 4, 4)).shape) == (2, 32, 4, 4)


def test_extra_losses_match_their_formulas():
    from utils.loss import BCEBlurWithLogitsLoss, QFocalLoss
    p = torch.tensor([[-2.0, 0.5, 3.0]])
    y = torch.tensor([[0.0, 0.7, 1.0]])
    pn, yn = to_numpy(p).astype(np.float64), to_numpy(y).astype(np.float64)
    s = 1 / (1 + np.exp(-pn))
    bce = -(yn * np.log(s) + (1 - yn) * np.log(1 - s))
    q = QFocalLoss(nn.BCEWithLogitsLoss(), gamma=1.5, alpha=0.25)
    want_q = (bce * (yn * 0.25 + (1 - yn) * 0.75) * np.abs(yn - s) ** 1.5).mean()
    assert float(q(p, y)) == pytest.approx(want_q, rel=1e-5)
    want_b = (bce * (1 - np.exp((s - yn - 1) / (0.05 + 1e-4)))).mean()
    assert float(BCEBlurWithLogitsLoss(0.05)(p, y)) == pytest.approx(want_b, rel=1e-5)


# ------------------------------------------------------------------------------------------------------- models
@pytest.mark.parametrize("c2, k, equal_ch, widths", [  # widths as ultralytics' MixConv2d builds them
    (64, (1, 3), True, [32, 32]), (30, (3, 5, 7), True, [10, 10, 10]), (64, (1, 3, 5), False, [56, 6, 2]),
    (96, (3, 5, 7, 9), False, [58, 21, 11, 6]), (17, (1, 3, 5), False, [15, 2, 1])])
def test_mixconv_splits_channels_as_ultralytics(c2, k, equal_ch, widths):
    from models.experimental import MixConv2d
    m = MixConv2d(16, c2, k, 1, equal_ch)
    assert [c.out_channels for c in m.m] == widths
    if sum(widths) == c2:  # (17, (1, 3, 5)) rounds to 18 channels there too, which its BatchNorm(17) cannot take
        assert tuple(m(torch.randn(1, 16, 8, 8)).shape) == (1, c2, 8, 8)


def test_every_yolo_model_is_a_base_model():
    from models.yolo import BaseModel, ClassificationModel, DetectionModel
    det = DetectionModel(ROOT / "models/yolov5n.yaml")
    cls = ClassificationModel(model=det, nc=3, cutoff=4)
    assert isinstance(det, BaseModel) and isinstance(cls, BaseModel)
    assert tuple(cls(torch.zeros(1, 3, 64, 64)).shape) == (1, 3)


def test_generic_logger_writes_results_csv(tmp_path):
    from types import SimpleNamespace

    from utils.loggers import GenericLogger
    lg = GenericLogger(SimpleNamespace(save_dir=tmp_path), logging.getLogger("yolov5"), include=())
    lg.log_metrics({"train/loss": 1.5, "metrics/accuracy_top1": 0.25}, 0)
    lg.log_metrics({"train/loss": 1.0, "metrics/accuracy_top1": 0.5}, 1)
    rows = [r.split(",") for r in (tmp_path / "results.csv").read_text().splitlines()]
    assert [c.strip() for c in rows[0]] == ["epoch", "train/loss", "metrics/accuracy_top1"]
    assert [float(c) for c in rows[2]] == [1.0, 1.0, 0.5]
    assert os.listdir(tmp_path) == ["results.csv"]  # no temporary file left


def test_each_task_module_offers_its_own_loss_under_the_official_name():
    """A script copied from official segment/train.py imports ComputeLoss from utils.segment.loss: it must get the
    segmentation loss (with the mask term), not detection's under the same name."""
    from utils.loss import ComputeLoss as detection_loss
    from utils.segment.loss import ComputeLoss as segment_loss, SegmentationLoss
    assert segment_loss is SegmentationLoss and segment_loss is not detection_loss


def test_benchmarks_script_names_from_import_benchmarks():
    """`import benchmarks` finds the benchmarks/ package (its scripts import as benchmarks.speed, ...); the
    official script's run/parse_opt/main still come from it, as `benchmarks.run(weights=...)` is called."""
    import benchmarks
    import benchmarks.speed  # noqa: F401  (the package's own modules still import)
    assert callable(benchmarks.run) and benchmarks.main.__module__ == "_benchmarks_script"  # from benchmarks.py
    assert benchmarks.parse_opt(["--weights", "x.pt", "--img", "320"]).weights == "x.pt"
    with pytest.raises(AttributeError):
        benchmarks.not_a_name  # noqa: B018


def test_the_log_goes_to_stdout_and_the_stopping_error_to_stderr(tmp_path):
    """As the official scripts log now (the ultralytics package's logger writes to stdout): info and warnings on
    stdout, so `| tee log` keeps them; the one line that stops a run on stderr."""
    import subprocess
    import sys
    env = {**os.environ, "PYTHONPATH": str(ROOT), "YOLO_QUIET": "1"}
    code = "from utils.log import LOGGER; LOGGER.info('i'); LOGGER.warning('w'); LOGGER.error('e')"
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, timeout=60)
    assert (p.stdout, p.stderr) == ("i\nw\n", "e\n")
    p = subprocess.run([sys.executable, "val.py", "--task", "nope", "--project", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 1 and "\x1b[34m\x1b[1mval: \x1b[0mdata=" in p.stdout  # the arguments line
    ours = [ln for ln in p.stderr.splitlines() if "val: " in ln]  # OneFlow's import adds lines of its own there
    assert len(ours) == 1 and "--task nope" in ours[0] and "--task nope" not in p.stdout, p.stderr
