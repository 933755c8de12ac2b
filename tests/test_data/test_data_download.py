"""A data YAML's `download:` entry (a zip URL, a shell or a Python entry) comes with a dataset: the zip is its
author's choice of files, the others are code, so it runs only when the user opts in (YOLO_ALLOW_DOWNLOAD_SCRIPTS=1,
or train.py / val.py --allow-download-scripts) and is printed in full first. Without consent: one line, naming the
YAML, showing the entry and saying how to go on; nothing runs."""
import logging
import os
import subprocess
import sys

import pytest
import yaml

from utils.dataset_config import ALLOW_SCRIPTS_ENV, DatasetError, DownloadScriptRefused, check_dataset
from utils.general import ROOT


def _yaml_with_download(tmp_path, download):
    root = tmp_path / "ds"
    y = tmp_path / "evil.yaml"
    y.write_text(yaml.safe_dump({"path": str(root), "train": "images", "val": "images", "names": ["a"],
                                 "download": download}))
    return y, root


def _shell_entry(tmp_path):
    """A shell download that leaves a marker (and the images folder, so that the dataset then exists)."""
    marker = tmp_path / "marker"
    root = tmp_path / "ds"
    return f"bash -c 'mkdir -p {root}/images && touch {marker}'", marker


def test_shell_entry_refused_without_opt_in(tmp_path, monkeypatch):
    monkeypatch.delenv(ALLOW_SCRIPTS_ENV, raising=False)
    cmd, marker = _shell_entry(tmp_path)
    y, root = _yaml_with_download(tmp_path, cmd)
    with pytest.raises(DownloadScriptRefused) as e:
        check_dataset(str(y))
    msg = str(e.value)
    assert not marker.exists() and not (root / "images").exists()
    assert "\n" not in msg and str(y) in msg and cmd in msg, msg  # the YAML and the whole command
    assert f"{ALLOW_SCRIPTS_ENV}=1" in msg and "--allow-download-scripts" in msg and str(root) in msg
    assert isinstance(e.value, DatasetError)  # entry scripts print it in one line and exit 1
    monkeypatch.setenv(ALLOW_SCRIPTS_ENV, "0")  # anything but 1 is no consent
    with pytest.raises(DownloadScriptRefused):
        check_dataset(str(y))
    assert not marker.exists()


def test_shell_entry_runs_with_opt_in_and_is_printed(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(ALLOW_SCRIPTS_ENV, "1")
    cmd, marker = _shell_entry(tmp_path)
    y, root = _yaml_with_download(tmp_path, cmd)
    with caplog.at_level(logging.INFO, logger="yolov5"):
        d = check_dataset(str(y))
    assert marker.exists() and d["val"] == str(root / "images")
    assert any(cmd in r.getMessage() for r in caplog.records), "the entry is printed in full before it runs"


def test_flag_is_consent_too(tmp_path, monkeypatch):
    monkeypatch.delenv(ALLOW_SCRIPTS_ENV, raising=False)
    cmd, marker = _shell_entry(tmp_path)
    y, _ = _yaml_with_download(tmp_path, cmd)
    check_dataset(str(y), allow_scripts=True)
    assert marker.exists()


def test_python_entry_refused_without_opt_in(tmp_path, monkeypatch):
    monkeypatch.delenv(ALLOW_SCRIPTS_ENV, raising=False)
    marker = tmp_path / "py_marker"
    code = f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
    y, _ = _yaml_with_download(tmp_path, code)
    with pytest.raises(DownloadScriptRefused) as e:
        check_dataset(str(y))
    msg = str(e.value)
    assert not marker.exists() and "\n" not in msg and "Python code" in msg
    assert code.strip().replace("\n", "\\n") in msg  # every line of it, on the one line
    with pytest.raises(DatasetError, match="still does not exist"):  # consented: it ran (and made no images)
        check_dataset(str(y), allow_scripts=True)
    assert marker.read_text() == "ran"


def test_zip_url_needs_opt_in_too(tmp_path, monkeypatch):
    """A zip URL brings files the YAML's author chose from a server the author chose: it asks as a script does. With
    consent it is fetched (offline here, so the fetch itself fails, and says so)."""
    monkeypatch.delenv(ALLOW_SCRIPTS_ENV, raising=False)
    url = "https://127.0.0.1:9/none.zip"
    y, root = _yaml_with_download(tmp_path, url)
    with pytest.raises(DownloadScriptRefused) as e:
        check_dataset(str(y))
    msg = str(e.value)
    assert "\n" not in msg and url in msg and "--allow-download-scripts" in msg and "zip archive" in msg, msg
    with pytest.raises(DatasetError) as e:
        check_dataset(str(y), allow_scripts=True)
    assert not isinstance(e.value, DownloadScriptRefused) and "download failed" in str(e.value)
    assert "\n" not in str(e.value) and not root.exists()


def test_data_present_never_asks(tmp_path, monkeypatch):
    monkeypatch.delenv(ALLOW_SCRIPTS_ENV, raising=False)
    cmd, marker = _shell_entry(tmp_path)
    y, root = _yaml_with_download(tmp_path, cmd)
    (root / "images").mkdir(parents=True)
    assert check_dataset(str(y))["nc"] == 1 and not marker.exists()


@pytest.mark.slow
def test_entry_scripts_refuse_in_one_line_and_run_with_the_flag(tmp_path, yolov5n_pt):
    from utils.backend import BACKEND
    cmd, marker = _shell_entry(tmp_path)
    y, _ = _yaml_with_download(tmp_path, cmd)
    env = {k: v for k, v in os.environ.items() if k != ALLOW_SCRIPTS_ENV}
    env.update(YOLO_BACKEND=BACKEND, YOLO_QUIET="1", PYTHONPATH=str(ROOT))
    common = ["--data", str(y), "--device", "cpu", "--img", "64", "--project", str(tmp_path / "runs")]
    for script, extra in (("train.py", ["--cfg", "yolov5n.yaml", "--weights", "", "--epochs", "1"]),
                          ("val.py", ["--weights", str(yolov5n_pt)])):
        p = subprocess.run([sys.executable, script, *common, *extra], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=300)
        lines = [ln for ln in p.stderr.splitlines() if ALLOW_SCRIPTS_ENV in ln]
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
        assert len(lines) == 1 and str(y) in lines[0] and cmd in lines[0], p.stderr[-3000:]
        assert not marker.exists()
    # with the flag the command runs (the folder it makes holds no images, so val.py then stops on that)
    p = subprocess.run([sys.executable, "val.py", *common, "--weights", str(yolov5n_pt), "--allow-download-scripts"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert marker.exists() and "Traceback" not in p.stderr, p.stderr[-3000:]
