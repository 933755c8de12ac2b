"""The layering the code keeps (ARCHITECTURE.md): no import circle, facades used by users only, and the modules that
must load without a framework load none."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CYCLES_TOOL = ROOT.parent / "shared" / "tools" / "import_cycles.py"
ENTRY_SCRIPTS = {"train.py", "val.py", "detect.py", "export.py", "hubconf.py"}
# ultralytics-style import paths kept for users
FACADES = {"utils.general", "utils.dataloaders", "utils.segment.general", "utils.segment.dataloaders",
           "utils.segment.metrics", "utils.segment.augmentations", "utils.activations", "utils.callbacks"}
PACKAGES = {"utils"}  # placed by its exact name (its __init__): as a prefix it would place every utils module


def _library_files():
    for d in ("models", "utils"):
        yield from sorted((ROOT / d).rglob("*.py"))


def _imported_modules(path):
    """Every module a file imports, at any depth (imports inside functions count)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module


@pytest.mark.skipif(not CYCLES_TOOL.is_file(), reason="the shared import_cycles tool is not beside the project")
def test_no_import_circle():
    res = subprocess.run([sys.executable, str(CYCLES_TOOL), str(ROOT)], capture_output=True, text=True)
    assert res.returncode == 0 and "no import circle" in res.stdout, res.stdout[-3000:]


def test_no_project_module_imports_a_facade():
    offenders = [f"{p.relative_to(ROOT)} imports {m}" for p in [*_library_files(), *(ROOT / f for f in ENTRY_SCRIPTS)]
                 for m in _imported_modules(p) if m in FACADES and p.with_suffix("").name not in ("general",
                                                                                                  "dataloaders")]
    assert not offenders, offenders


def test_facade_still_offers_the_ultralytics_names():
    from utils import general
    for name in ("LOGGER", "ROOT", "colorstr", "increment_path", "check_img_size", "make_divisible", "xyxy2xywh",
                 "xywh2xyxy", "xywhn2xyxy", "xyxy2xywhn", "clip_boxes", "scale_boxes", "non_max_suppression",
                 "coco80_to_coco91_class", "get_latest_run"):
        assert hasattr(general, name), name
    from models.common import AutoShape, DetectMultiBackend, Detections  # the official import path, on first access
    from models.autoshape import AutoShape as real
    from models.multibackend import DetectMultiBackend as real_loader
    assert AutoShape is real and DetectMultiBackend is real_loader and Detections.__name__ == "Detections"


# ARCHITECTURE.md's layers, top to bottom: a module imports its own layer or lower ones, never a higher one.
LAYERS = (
    ("entry scripts and facades", ("train", "val", "detect", "export", "hubconf",
                                   "utils.general", "utils.dataloaders", "utils")),
    ("engine", ("utils.engine", "utils.evolve")),
    ("tasks", ("utils.tasks",)),
    ("evaluation, inference, export", ("utils.evaluation", "utils.inference", "utils.export", "utils.segment",
                                       "utils.classify")),
    ("network, data, loss, metrics, plots, distributed", (
        "models", "utils.loss", "utils.metrics", "utils.data", "utils.autoanchor", "utils.autobatch", "utils.plots",
        "utils.plot_jobs", "utils.loggers", "utils.augmentations", "utils.streams", "utils.torch_utils",
        "utils.model_stats", "utils.tta", "utils.precision", "utils.amp_check", "utils.loss_readback",
        "utils.nms", "utils.iou", "utils.figures", "utils.classifier_output",
        "utils.signals", "utils.distributed", "utils.shutdown", "utils.device_header", "utils.activations")),
    ("checkpoint records", ("utils.checkpoint",)),
    ("backend", ("utils.backend",)),
    ("framework-free base", ("utils.log", "utils.settings", "utils.errors", "utils.paths", "utils.boxes",
                             "utils.img_size", "utils.iou_math", "utils.optimizer_layout", "utils.backend_choice",
                             "utils.atomic_files", "utils.dataset_config", "utils.archive_extract", "utils.run_lock",
                             "utils.memory_limits", "utils.path_names", "utils.yaml_files", "utils.cli_flags",
                             "utils.child_processes", "utils.evolve_csv", "utils.tiles", "utils.data_folders",
                             "utils.downloads", "utils.native_build", "utils.run_header", "utils.environment",
                             "utils.callbacks", "utils.decorators")),
)


def _layer(module):
    """Index of the layer whose longest prefix names module (None: not placed)."""
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            within = module.startswith(p + ".") and p not in PACKAGES
            if (module == p or within) and (best is None or len(p) > best[1]):
                best = (i, len(p))
    return best and best[0]


def _project_imports(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{a.name}" if node.module in ("utils", "models") else node.module
                     for a in node.names]
        else:
            continue
        yield from ((n, node.lineno) for n in names if n.split(".")[0] in ("utils", "models"))


def test_layers_run_one_way():
    files = [*_library_files(), *(ROOT / f for f in ENTRY_SCRIPTS)]
    unplaced, upward = [], []
    for path in files:
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        me = _layer(module)
        if me is None:
            unplaced.append(module)
            continue
        for target, line in _project_imports(path):
            there = _layer(target)
            if there is None:
                unplaced.append(target)
            elif there < me:
                upward.append(f"{module}:{line} ({LAYERS[me][0]}) imports {target} ({LAYERS[there][0]})")
    assert not unplaced, f"place these in ARCHITECTURE.md's layers (and LAYERS here): {sorted(set(unplaced))}"
    assert not upward, upward


FRAMEWORK_FREE = ("utils.log", "utils.paths", "utils.boxes", "utils.img_size", "utils.errors", "utils.iou_math",
                  "utils.optimizer_layout", "utils.checkpoint", "utils.signals", "utils.dataset_config",
                  "utils.backend_choice", "utils.cli_flags", "utils.run_header", "utils", "utils.environment",
                  "utils.callbacks", "utils.decorators")


def test_framework_free_modules_load_no_framework():
    code = ("import sys; import " + ", ".join(FRAMEWORK_FREE) +
            "; print(sorted(m for m in ('torch', 'oneflow', 'utils.backend') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "YOLO_TEST_ZYGOTE": "off"})  # a fresh python:
    assert res.returncode == 0, res.stderr[-2000:]                # the suite's warm start has imported PyTorch
    assert res.stdout.strip() == "[]", res.stdout
