"""utils/settings.py: every YOLO_* variable in one table, parsed there, and README.md's table equal to it."""
import re
from pathlib import Path

import pytest

from utils import settings
from utils.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


def test_readme_table_is_the_settings_table():
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- settings table: [^\n]*-->\n(.*?)<!-- end of settings table -->", text, re.S)
    assert m, "README.md has no settings table between its markers"
    assert m.group(1) == settings.markdown_table(), "README.md's table differs: paste `python -m utils.settings`"
    assert len(settings.SETTINGS) == len(m.group(1).splitlines()) - 2 >= 14


def test_every_variable_the_code_names_is_a_setting():
    known = {s.name for s in settings.SETTINGS} | {settings.BACKEND_ANNOUNCED.name.lstrip("_")}
    files = [*ROOT.glob("*.py"), *(ROOT / "models").rglob("*.py"), *(ROOT / "utils").rglob("*.py")]
    named = {v for f in files for v in re.findall(r"\bYOLO_[A-Z_]+[A-Z]", f.read_text())} - {"YOLO_FORMAT"}  # a constant
    assert named and named <= known, sorted(named - known)


def test_values_follow_the_environment_and_are_checked(monkeypatch):
    monkeypatch.delenv("YOLO_LOSS_READBACK", raising=False)
    assert settings.LOSS_READBACK.get() is None
    monkeypatch.setenv("YOLO_LOSS_READBACK", "25")
    assert settings.LOSS_READBACK.get() == 25
    for bad in ("0", "-3", "often"):
        monkeypatch.setenv("YOLO_LOSS_READBACK", bad)
        with pytest.raises(UserError, match=f"YOLO_LOSS_READBACK='{bad}'"):
            settings.LOSS_READBACK.get()
    assert settings.CHANNELS_LAST.get({"YOLO_CHANNELS_LAST": " 1"}) is True
    assert settings.CHANNELS_LAST.get({"YOLO_CHANNELS_LAST": "yes"}) is None  # not 0/1: the device decides
    assert settings.DDP_TIMEOUT.get({"YOLO_DDP_TIMEOUT": "x"}) == 10800.0 == settings.DDP_TIMEOUT.get({})
    assert settings.PLOT_PROCESSES.get({"YOLO_PLOT_PROCESSES": "0"}) is False
    monkeypatch.setenv("HOME", "/nonexistent-home")
    monkeypatch.delenv("YOLO_CACHE_DIR", raising=False)
    assert settings.CACHE_DIR.get() == Path("/nonexistent-home/.cache/yolov5")  # made when asked, not at import
