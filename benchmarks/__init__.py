"""Benchmark and comparison scripts (speed, loader, launches, GPU kit). A regular package, so `import benchmarks.speed`
finds this folder and not the top-level benchmarks.py script (ultralytics' export-and-validate benchmark)."""
