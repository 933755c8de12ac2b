"""Issue 35's floors and names: the inference wrappers live on the inference floor (utils/inference/) and the
official import paths under models/ hand the very same objects out; nothing under models/ imports a floor above it."""
import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# official import path -> names it offers, each defined in utils/inference/<home>
OFFICIAL_PATHS = {
    "models.common": {"DetectMultiBackend": "format_loader", "AutoShape": "autoshape", "Detections": "autoshape"},
    "models.multibackend": {"DetectMultiBackend": "format_loader", "ModelLoadError": "format_loader"},
    "models.autoshape": {"AutoShape": "autoshape", "Detections": "autoshape", "ImageInputError": "autoshape"},
}
HIGHER_FLOORS = ("utils.inference", "utils.export", "utils.evaluation", "utils.engine", "utils.tasks")


@pytest.mark.parametrize("path,name,home", [(p, n, h) for p, names in OFFICIAL_PATHS.items() for n, h in names.items()])
def test_official_path_hands_out_the_object_of_its_new_home(path, name, home):
    offered = getattr(importlib.import_module(path), name)
    assert offered is getattr(importlib.import_module(f"utils.inference.{home}"), name)
    exec(f"from {path} import {name} as imported", namespace := {})  # the `from ... import` statement users write
    assert namespace["imported"] is offered


@pytest.mark.parametrize("path", sorted(OFFICIAL_PATHS))
def test_official_path_refuses_names_it_does_not_offer(path):
    with pytest.raises(AttributeError, match="no_such_name"):
        getattr(importlib.import_module(path), "no_such_name")


def _imports(path):
    """Every module a file names in an import statement, at any depth (imports inside functions count)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module, node.lineno


def test_no_module_under_models_imports_a_higher_floor():
    upward = [f"{p.relative_to(ROOT)}:{line} imports {m}" for p in sorted((ROOT / "models").rglob("*.py"))
              for m, line in _imports(p) if m.startswith(HIGHER_FLOORS)]
    assert not upward, upward


def test_the_network_loads_without_the_inference_stack():
    code = ("import sys, models.common, models.yolo, models.multibackend, models.autoshape; "
            "print(sorted(m for m in sys.modules if m.startswith(('utils.inference', 'utils.export'))))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "[]", res.stdout


# ---------------------------------------------------------------------------------------------- sizes (issue 35)
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 450, 60
TRITON_KERNELS = {("utils/backend/torch_ciou_triton.py", "_ciou_bwd")}  # a kernel reads best as one body


def _project_modules():
    """Every Python file of the library, the scripts and the benchmarks (not the tests, not environments)."""
    skip = {"tests", "site", "__pycache__"}
    return sorted(p for p in ROOT.rglob("*.py")
                  if not any(part in skip or part.startswith(".") for part in p.relative_to(ROOT).parts))


def test_no_module_over_the_module_limit():
    long = {p.relative_to(ROOT).as_posix(): n for p in _project_modules()
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"over {MAX_MODULE_LINES} lines: {long}"


def test_no_function_over_the_function_limit():
    long = {}
    for p in _project_modules():
        rel = p.relative_to(ROOT).as_posix()
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and (rel, n.name) not in TRITON_KERNELS:
                if (size := n.end_lineno - n.lineno + 1) > MAX_FUNCTION_LINES:
                    long[f"{rel}:{n.lineno} {n.name}"] = size
    assert not long, f"over {MAX_FUNCTION_LINES} lines: {long}"
