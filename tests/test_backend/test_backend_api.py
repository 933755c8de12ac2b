"""utils/backend/: the per-backend modules implement the same function set (api.py), the package re-exports it with
the shared helpers and every name the project imports from utils.backend, and no module outside the package
branches on the backend."""
import ast
import re
from pathlib import Path

import pytest

from utils import backend
from utils.backend.api import FUNCTION_SET

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "utils" / "backend"
PER_BACKEND = {"torch": PACKAGE / "torch_backend.py", "oneflow": PACKAGE / "oneflow_backend.py"}


def _python_files(*exclude):
    """The project's .py files: the hidden top-level folders (.venv-torch, .venv-oneflow, .venv-tf, .gpu_kit, .git)
    hold installed packages and staged copies, not project code, and are never walked (.venv-tf is 6 GB)."""
    skip = {ROOT / x for x in exclude}
    tops = [d for d in ROOT.iterdir() if d.is_dir() and not d.name.startswith(".") and d not in skip]
    files = [p for p in ROOT.glob("*.py")] + [p for d in tops for p in d.rglob("*.py")]
    return [p for p in files if not any(s in p.parents for s in skip)]


def _module_level_names(path):
    """Names a module defines at its top level (functions, classes, assignments, imports), read without importing
    it: the other backend's module cannot be imported in this environment."""
    names, nodes = set(), list(ast.parse(path.read_text()).body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.Try):  # try: import torch / except: raise a BackendError
            nodes += node.body
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


@pytest.mark.parametrize("name", sorted(PER_BACKEND))
def test_each_backend_implements_the_function_set(name):
    missing = set(FUNCTION_SET) - _module_level_names(PER_BACKEND[name])
    assert not missing, f"{PER_BACKEND[name].name} lacks {sorted(missing)}"


def test_the_package_reexports_the_chosen_module_and_shared_helpers():
    from utils.backend import shared
    assert backend.impl.__name__ == f"utils.backend.{backend.BACKEND}_backend"
    for name in FUNCTION_SET:
        assert getattr(backend, name) is getattr(backend.impl, name), name
    for name in shared.__all__:
        assert getattr(backend, name) is getattr(shared, name), name
    assert backend.nn is backend.torch.nn and backend.F is backend.torch.nn.functional
    assert backend.IS_TORCH == (backend.BACKEND == "torch") != backend.IS_ONEFLOW


def test_the_package_reexports_the_function_set_one_line_per_name():
    """`name = impl.name` once for each name of api.py, in its order, and for no other name: the names stay in plain
    sight (no globals().update) and cannot drift from the contract."""
    lines = [(node.targets[0].id, node.value.attr) for node in ast.parse((PACKAGE / "__init__.py").read_text()).body
             if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute)
             and isinstance(node.value.value, ast.Name) and node.value.value.id == "impl"]
    assert all(target == source for target, source in lines), lines
    assert [target for target, _ in lines] == list(FUNCTION_SET)
    assert "globals()" not in (PACKAGE / "__init__.py").read_text()


def test_every_name_the_project_imports_from_utils_backend_exists():
    """`from utils.backend import X` and `backend.X` keep working for every X used anywhere (tests included)."""
    used = set()
    for path in _python_files("utils/backend"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "utils.backend":
                used |= {a.name for a in node.names}
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "backend":
                used.add(node.attr)
    used -= {"torch_backend", "oneflow_backend", "oneflow_ciou", "torch_ciou", "torch_ciou_triton", "torch_conv_grad",
             "torch_head_reads", "torch_bn_silu", "shared", "api"}  # submodules, not names of the function set
    assert len(used) > 40  # the scan found the project's imports
    missing = sorted(n for n in used if not hasattr(backend, n))
    assert not missing, f"utils.backend lacks {missing}"


def test_no_backend_branch_outside_the_package():
    """The backend flags are for tests and tools: project code asks the function set instead."""
    offenders = []
    for path in _python_files("tests", "utils/backend"):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\bIS_(ONEFLOW|TORCH)\b", line):
                offenders.append(f"{path.relative_to(ROOT)}:{i}")
    assert not offenders, offenders


def test_no_framework_import_outside_the_package():
    """models/ and utils/ import the framework through utils.backend only (utils/export/ converts to PyTorch
    formats and says so: it runs in the PyTorch environment)."""
    pattern = re.compile(r"^\s*(import|from)\s+(torch|oneflow)\b")
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in _python_files("tests", "utils/backend", "utils/export",
                                                                      "benchmarks", "hubconf.py")
                 if p.parts[len(ROOT.parts)] in ("models", "utils")
                 for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.match(line)]
    assert not offenders, offenders
