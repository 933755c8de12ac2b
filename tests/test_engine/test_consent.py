"""Consent comes only from the person running the command: a checkpoint's saved options (or opt.yaml) that say
--allow-download-scripts do not let a dataset's download: code run on --resume; the flag given to the resuming command
does."""
import argparse

import pytest
import yaml

from utils.checkpoint.run_options import CONSENT_OPTIONS, RecordedFlags, official_opt
from utils.dataset_config import ALLOW_SCRIPTS_ENV, DownloadScriptRefused
from utils.paths import ROOT


def _resumable_run(tmp_path):
    """runs/exp/weights/last.pt whose saved options consent to scripts, for a data YAML whose Python download: leaves
    a marker file."""
    from utils.checkpoint import save_checkpoint
    marker = tmp_path / "ran"
    data = tmp_path / "evil.yaml"
    data.write_text(yaml.safe_dump({"path": str(tmp_path / "ds"), "train": "images", "val": "images", "names": ["a"],
                                    "download": f"open({str(marker)!r}, 'w').write('code ran')"}))
    last = tmp_path / "exp" / "weights" / "last.pt"
    last.parent.mkdir(parents=True)
    hyp = yaml.safe_load((ROOT / "data" / "hyps" / "hyp.scratch-low.yaml").read_text())
    save_checkpoint({"epoch": 0, "optimizer": {"state": {}, "param_groups": []},
                     "opt": {"data": str(data), "hyp": hyp, "epochs": 3, "device": "cpu", "workers": 0,
                             "allow_download_scripts": True}}, last)
    return last, marker


def test_saved_consent_is_dropped_and_the_command_line_decides(tmp_path):
    import train
    last, _ = _resumable_run(tmp_path)
    assert train.resume_opt(argparse.Namespace(resume=str(last), project="")).allow_download_scripts is False
    assert train.resume_opt(argparse.Namespace(resume=str(last), project="",
                                               allow_download_scripts=True)).allow_download_scripts is True


def test_resume_does_not_run_a_download_script_the_checkpoint_consented_to(tmp_path, monkeypatch):
    import train
    monkeypatch.delenv(ALLOW_SCRIPTS_ENV, raising=False)
    last, marker = _resumable_run(tmp_path)
    with pytest.raises(DownloadScriptRefused, match="--allow-download-scripts"):
        train.run(resume=str(last))
    assert not marker.exists()
    saved = yaml.safe_load((last.parent.parent / "opt.yaml").read_text())  # what the resume wrote back
    assert not set(CONSENT_OPTIONS) & set(saved)


def test_consent_is_never_written_with_a_run():
    opt = argparse.Namespace(data="", allow_download_scripts=True, epochs=3)
    assert not set(CONSENT_OPTIONS) & set(official_opt(RecordedFlags.of(opt), {"lr0": 0.01}))
