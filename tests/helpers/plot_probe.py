"""A drawing stand-in for the plot helper tests: reports, from inside the helper, what it has imported and how it
runs (a module of its own, importable by a helper forked before the test's modules were)."""
import json
import os
import sys


def report(path):
    with open(path, "w") as f:
        json.dump({"pid": os.getpid(), "framework": any(m in sys.modules for m in ("torch", "oneflow")),
                   "matplotlib": "matplotlib.pyplot" in sys.modules, "nice": os.nice(0)}, f)
