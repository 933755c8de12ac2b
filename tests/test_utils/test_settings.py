"""utils/settings.py: every YOLO_* variable in one table, parsed there, and docs/settings.md's table equal to it."""
import re
from pathlib import Path

import pytest

from utils import settings
from utils.errors import UserError

pytestmark = pytest.mark.framework_free  # tested once, in the PyTorch suite (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]


def test_docs_table_is_the_settings_table():
    text = (ROOT / "docs" / "settings.md").read_text()
    m = re.search(r"<!-- settings table: [^\n]*-->\n\n(.*?)\n<!-- end of settings table -->", text, re.S)
    assert m, "docs/settings.md has no settings table between its markers (each followed by a blank line)"
    assert m.group(1) == settings.markdown_table(), "docs/settings.md's table differs: paste `python -m utils.settings`"
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
    assert settings.CHANNELS_LAST.get({}) is None  # unset: the device decides
    assert settings.DDP_TIMEOUT.get({"YOLO_DDP_TIMEOUT": "90"}) == 90.0 and settings.DDP_TIMEOUT.get({}) == 10800.0
    assert settings.PLOT_PROCESSES.get({"YOLO_PLOT_PROCESSES": "0"}) is False
    monkeypatch.setenv("HOME", "/nonexistent-home")
    monkeypatch.delenv("YOLO_CACHE_DIR", raising=False)
    assert settings.CACHE_DIR.get() == Path("/nonexistent-home/.cache/yolov5")  # made when asked, not at import


# Per setting: values it takes (-> what get() returns) and garbage it refuses. Every setting of the table is here.
GOOD_AND_BAD = {
    "YOLO_BACKEND": ({"torch": "torch", " OneFlow ": "oneflow", "pt": "pt"}, ("tensorflow", "1", "torch,oneflow")),
    "YOLO_QUIET": ({"1": True, "0": False}, ("maybe", "yes", "2", "true")),
    "YOLO_FUSED_CIOU": ({"plain": "plain", "Compile": "compile", "triton": "triton"}, ("fast", "0")),
    "YOLO_CHANNELS_LAST": ({"0": False, "1": True}, ("yes", "on", "-1")),
    "YOLO_NCHW_WEIGHT_GRAD": ({"0": False, "1": True}, ("yes", "2")),
    "YOLO_FUSED_BN_SILU": ({"0": False, "1": True}, ("yes", "2")),
    "YOLO_HOST_MALLOC": ({"default": "default", "glibc": "glibc", "off": "off", "0": "0"}, ("jemalloc", "1")),
    "YOLO_LOSS_READBACK": ({"1": 1, "25": 25}, ("0", "-3", "often", "2.5")),
    "YOLO_PLOT_PROCESSES": ({"0": False, "1": True}, ("no", "off", "2")),
    "YOLO_CACHE_DIR": ({"/tmp/c": Path("/tmp/c"), "~/c": Path.home() / "c"}, ()),  # any path
    "YOLOV5_CONFIG_DIR": ({"/tmp/c": Path("/tmp/c"), "~/c": Path.home() / "c"}, ()),  # any path
    "YOLO_ALLOW_DOWNLOAD_SCRIPTS": ({"1": True, "0": False}, ("yes", "true")),
    "YOLO_DDP_TIMEOUT": ({"90": 90.0, "1.5": 1.5}, ("abc", "0", "-5", "nan", "inf")),
    "YOLO_DDP_PEER_TIMEOUT": ({"60": 60.0}, ("abc", "0", "1e999")),
    "YOLO_DDP_WATCHDOG": ({"0": False, "1": True}, ("off", "false")),
    "YOLO_DDP_WATCHDOG_PORT": ({"29501": 29501, "1": 1}, ("abc", "0", "65536", "80.5")),
    "YOLO_DDP_PROBE": ({"tests.helpers.probe": "tests.helpers.probe"}, ("a-b", "a..b", "1x", "x.")),
}


def test_every_setting_takes_its_values_and_refuses_garbage_in_one_line():
    by_name = {s.name: s for s in settings.SETTINGS}
    assert set(GOOD_AND_BAD) == set(by_name)
    for name, (good, bad) in GOOD_AND_BAD.items():
        setting = by_name[name]
        for raw, value in good.items():
            assert setting.get({name: raw}) == value, (name, raw)
        for raw in bad:
            with pytest.raises(settings.SettingError) as e:
                setting.get({name: raw})
            message = str(e.value)
            assert message.startswith(f"{name}={raw!r}: ") and setting.type in message and "\n" not in message


@pytest.mark.parametrize("empty", ["", "  "])
def test_empty_is_unset_for_every_setting(empty, monkeypatch):
    """An empty value is the default, as unset is (an empty YOLO_CACHE_DIR used to cache into the working folder)."""
    monkeypatch.setenv("HOME", "/nonexistent-home")
    for s in settings.SETTINGS:
        assert s.get({s.name: empty}) == s.get({}), s.name
        assert not s.is_set({s.name: empty})
    assert settings.CACHE_DIR.get({"YOLO_CACHE_DIR": empty}) == Path("/nonexistent-home/.cache/yolov5")
