"""The training options a run stores (``opt`` in its checkpoints, ``opt.yaml`` beside them) in the form official
ultralytics/yolov5 reads when it resumes the run, and the ``git`` record its checkpoints carry.

Official ``train.py --resume`` rebuilds its options from opt.yaml (or the checkpoint's ``opt``) as
``argparse.Namespace(**d)`` and then reads every one of its flags from it, takes ``hyp`` as an inline dict and
``data`` as a dataset YAML it can open: so every official key is present (official defaults where this project has
no such flag), ``hyp`` is the run's hyperparameter dict as loaded (before the loss gains are scaled) and ``data``
an absolute path. This project's own flags are kept too; official code ignores them.

The argparse namespace stops at the engine's door: there the run's flags are frozen once into RecordedFlags, and
everything below gets typed, frozen records made from it by ``typed_options`` (the engine's RunOptions and
FastPaths, the loggers' LogOptions, the launch checks' LaunchOptions). A record field takes its default where a
script has no such flag (classify/train.py has no --sync-bn), so no reader guesses at attributes.

Consent is not an option a file can carry: the flags in CONSENT_OPTIONS (permission to run code that came with a
dataset) are the person's at the command line, so they are never written here and a resume drops them from what it
reads (``without_consent``); train.py --resume takes them from its own command line only.
"""
import copy
import dataclasses
import functools
import pathlib
import subprocess
from collections.abc import Mapping
from types import MappingProxyType

from utils.dataset_config import find_yaml

# official train.py flags (ultralytics/yolov5 5081342f) and their defaults, in its order; save_dir comes last
OFFICIAL_OPT_DEFAULTS = {
    "weights": "yolov5s.pt", "cfg": "", "data": "data/coco128.yaml", "hyp": "data/hyps/hyp.scratch-low.yaml",
    "epochs": 100, "batch_size": 16, "imgsz": 640, "rect": False, "resume": False, "nosave": False, "noval": False,
    "noautoanchor": False, "noplots": False, "evolve": None, "evolve_population": "data/hyps", "resume_evolve": None,
    "bucket": "", "cache": None, "image_weights": False, "device": "", "multi_scale": False, "single_cls": False,
    "optimizer": "SGD", "sync_bn": False, "workers": 8, "project": "runs/train", "name": "exp", "exist_ok": False,
    "quad": False, "cos_lr": False, "label_smoothing": 0.0, "patience": 100, "freeze": [0], "save_period": -1,
    "seed": 0, "local_rank": -1, "entity": None, "upload_dataset": False, "bbox_interval": -1, "save_dir": "",
}


# Flags that let code from a file run (a data YAML's shell/Python 'download:'); only the user's own command line or
# environment may set them. Grep for 'allow' when adding a flag of that kind.
CONSENT_OPTIONS = ("allow_download_scripts",)


def without_consent(options):
    """options (a dict read from a checkpoint or opt.yaml) without the consent flags."""
    return {k: v for k, v in options.items() if k not in CONSENT_OPTIONS}


class RecordedFlags(Mapping):
    """Every flag of a run as its entry script settled them (a resumed run's: its checkpoint's, --weights pointing
    at its last.pt), frozen: read-only, and a copy, so a later change to the namespace does not reach it. It is what
    checkpoints and opt.yaml record (official_opt) and what the cloud loggers show as the run's configuration."""
    __slots__ = ("_values",)

    def __init__(self, values=()):
        # plain data copied (lists stay the run's own); anything else (results attached after a run) kept as it is
        values = {k: copy.deepcopy(v) if _is_plain(v) else v for k, v in dict(values).items()}
        object.__setattr__(self, "_values", MappingProxyType(values))

    @classmethod
    def of(cls, namespace):
        """The flags of an argparse namespace (the engine's door: the one place a namespace is read)."""
        return cls(vars(namespace))

    def __setattr__(self, name, value):
        raise AttributeError(f"RecordedFlags are frozen (setting {name})")

    def __getitem__(self, k):
        return self._values[k]

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __repr__(self):
        return f"RecordedFlags({dict(self._values)!r})"


_CONVERT = {bool: bool, int: int, float: float, str: str}


def typed_options(cls, flags):
    """The frozen dataclass cls made from flags (a RecordedFlags or any mapping of flag names to values): each field
    from the flag its metadata names (``field(metadata={"flag": ...})``; its own name by default), converted to the
    field's type when that is bool, int, float or str (None: False for a bool, None otherwise); the field's default
    where flags has no such flag."""
    values = {}
    for f in dataclasses.fields(cls):
        name = f.metadata.get("flag", f.name)
        if name in flags:
            v = flags[name]
            convert = _CONVERT.get(f.type)
            # None is a flag left unset: a bool field reads it as False, other fields keep None
            values[f.name] = convert(v) if convert is not None and (v is not None or convert is bool) else v
    return cls(**values)


def _plain(v):
    if isinstance(v, pathlib.PurePath):
        return str(v)
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _resolved_data(data):
    """The dataset YAML as an absolute path (official resume opens it from its own folder); as given otherwise."""
    if not isinstance(data, (str, pathlib.PurePath)) or not str(data):
        return data
    try:
        return str(pathlib.Path(find_yaml(data)).resolve())
    except Exception:  # a dataset that cannot be found now is reported where it is used, not here
        return str(data)


def _is_plain(v):
    if v is None or isinstance(v, (str, bool, int, float)):
        return True
    if isinstance(v, (list, tuple)):
        return all(_is_plain(x) for x in v)
    return isinstance(v, dict) and all(_is_plain(k) and _is_plain(x) for k, x in v.items())


def official_opt(flags, hyp):
    """The run's flags (RecordedFlags) as a dict official code can resume from: official keys first (defaults filled
    in), ``hyp`` inline, ``data`` absolute, paths as strings; this project's extra flags after them (options that are
    not plain data, such as results attached after a run, are left out)."""
    ours = {k: _plain(v) for k, v in flags.items() if not k.startswith("_")}
    ours = {k: v for k, v in without_consent(ours).items() if _is_plain(v) and k != "results"}
    d = {k: ours.pop(k, default) for k, default in OFFICIAL_OPT_DEFAULTS.items()}
    d["hyp"] = {k: _plain(v) for k, v in dict(hyp).items()}
    d["data"] = _resolved_data(d["data"])
    d.update(ours)
    return d


@functools.lru_cache(maxsize=4)
def git_info(root):
    """{'remote', 'branch', 'commit'} of the repository at root, as official checkpoints record it; {} when git or
    the repository is unavailable."""
    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=5,
                              check=True).stdout.strip()
    try:
        commit = git("rev-parse", "HEAD")
        branch = git("rev-parse", "--abbrev-ref", "HEAD")
        try:
            remote = git("config", "--get", "remote.origin.url")
        except subprocess.CalledProcessError:
            remote = ""
        return {"remote": remote, "branch": branch, "commit": commit}
    except (OSError, subprocess.SubprocessError):
        return {}
