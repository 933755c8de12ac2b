#!/usr/bin/env bash
# Runs the test suite once per backend, each in its own environment. Extra arguments go to pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
backends="${1:-torch oneflow}"
[ $# -gt 0 ] && shift
status=0
for b in $backends; do
    echo "=== tests under YOLO_BACKEND=$b ==="
    YOLO_BACKEND=$b ".venv-$b/bin/python" -m pytest tests -q -p no:cacheprovider "$@" || status=$?
done
exit $status
