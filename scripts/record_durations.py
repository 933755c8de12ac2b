"""Merge the per-test wall times a measured run wrote (YOLO_RECORD_DURATIONS=FOLDER, see tests/helpers/tiers.py) into
tests/durations/<backend>.json, which decides the fast tier. `make test-durations` runs the whole suite that way.

    python scripts/record_durations.py FOLDER
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.tiers import FAST_TIER_BUDGET_S, durations_file  # noqa: E402


KEPT_FROM_S = 1.0


def merge(folder):
    by_backend = {}
    for f in sorted(Path(folder).glob("*.jsonl")):
        backend = f.name.split(".")[0]
        for line in f.read_text().splitlines():
            nodeid, seconds = json.loads(line)
            by_backend.setdefault(backend, {})[nodeid] = seconds
    for backend, times in by_backend.items():
        out = durations_file(backend)
        out.parent.mkdir(parents=True, exist_ok=True)
        kept = {k: s for k, s in sorted(times.items()) if s >= KEPT_FROM_S}  # the rest is fast whatever the budget
        out.write_text(json.dumps(kept, indent=0) + "\n")
        over = sum(1 for s in times.values() if s > FAST_TIER_BUDGET_S)
        print(f"{out.relative_to(ROOT)}: {len(times)} tests, {over} over the fast tier's {FAST_TIER_BUDGET_S} s "
              f"({sum(times.values()):.0f} s in all)")
    if not by_backend:
        sys.exit(f"no durations under {folder}: run the suite with YOLO_RECORD_DURATIONS={folder}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    merge(sys.argv[1])
