"""utils/distributed/probe.py: YOLO_DDP_PROBE names a module whose attach(model, loader, ctx) runs; unset, nothing
is imported; a name that does not import, or a module without attach, is one clear line."""
import sys

import pytest

from utils.distributed import DistContext
from utils.distributed.probe import ENV, ProbeError, attach


def test_unset_attaches_nothing(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert attach(object(), object(), DistContext()) is None


def test_named_module_gets_model_loader_and_context(monkeypatch, tmp_path):
    (tmp_path / "my_probe.py").write_text("seen = []\n\n\ndef attach(model, loader, ctx):\n"
                                          "    seen.append((model, loader, ctx))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(ENV, "my_probe")
    model, loader, ctx = object(), object(), DistContext(1, 1, 2)
    probe = attach(model, loader, ctx)
    assert probe is sys.modules["my_probe"] and probe.seen == [(model, loader, ctx)]


def test_bad_names_are_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV, "no_such_probe_module")
    with pytest.raises(ProbeError, match="YOLO_DDP_PROBE=no_such_probe_module: cannot import it") as e:
        attach(object(), object(), DistContext())
    assert "\n" not in str(e.value)
    (tmp_path / "not_a_probe.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(ENV, "not_a_probe")
    with pytest.raises(ProbeError, match="no attach"):
        attach(object(), object(), DistContext())
