"""Benchmark and comparison scripts (speed, loader, launches, GPU kit). A regular package, so `import benchmarks.speed`
finds this folder and not the top-level benchmarks.py script (ultralytics' export-and-validate benchmark).

`import benchmarks` therefore finds this folder too; the script's own names (run, parse_opt, main), which ultralytics
users call as `benchmarks.run(weights=...)`, are handed out from benchmarks.py on first use."""
import importlib.util
import sys
from pathlib import Path

_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks.py"
_SCRIPT_NAMES = ("run", "parse_opt", "main")


def __getattr__(name):
    if name not in _SCRIPT_NAMES:
        raise AttributeError(f"module 'benchmarks' has no attribute '{name}'")
    module = sys.modules.get("_benchmarks_script")
    if module is None:  # loaded once, from its file: the name 'benchmarks' is this package's
        spec = importlib.util.spec_from_file_location("_benchmarks_script", _SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return getattr(module, name)
