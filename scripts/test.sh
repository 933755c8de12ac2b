#!/usr/bin/env bash
# Runs the test suite once per backend, each in its own environment. Extra arguments go to pytest.
#   scripts/test.sh                 both backends, side by side (one core each), logs printed when both end
#   scripts/test.sh torch [-k x]    one backend, in the foreground
#   scripts/test.sh torch tests/test_utils/test_loss.py -m "not slow"    paths and options go to pytest as they are
# pytest.ini holds the configuration (test paths, markers, the per-test timeout).
set -uo pipefail
cd "$(dirname "$0")/.."
backends="${1:-torch oneflow}"
[ $# -gt 0 ] && shift

run_suite() {  # $1 = backend, rest = pytest args
    local b=$1; shift
    # no path given: pytest.ini's testpaths; the slowest tests are listed so that a suite that grows shows where
    YOLO_BACKEND=$b ".venv-$b/bin/python" -m pytest -q --durations=12 "$@"
}

if [ "$(echo $backends | wc -w)" -eq 1 ]; then
    echo "=== tests under YOLO_BACKEND=$backends ==="
    run_suite "$backends" "$@"
    exit $?
fi

# Both: the suites are mostly single-threaded Python and small tensors, so processes with one math thread each finish
# sooner than two suites in a row that each use both cores. Each suite runs on two pytest-xdist workers (whole files
# each, as their fixtures expect), four processes on two cores: whichever suite ends first leaves both cores to the
# other (with the PyTorch suite on one process, it ran alone on one core for its last 8+ minutes after the OneFlow
# suite ended at 20:32, on a 2-core AMD Zen 3).
logs=$(mktemp -d)
pids=()
for b in $backends; do
    workers=(-n 2 --dist loadfile)
    OMP_NUM_THREADS=1 run_suite "$b" "${workers[@]}" "$@" > "$logs/$b.log" 2>&1 &
    pids+=($!)
done
status=0
i=0
for b in $backends; do
    wait "${pids[$i]}" || status=1
    i=$((i + 1))
done
passed=0; failed=0; skipped=0; errors=0
for b in $backends; do
    echo "=== tests under YOLO_BACKEND=$b ==="
    cat "$logs/$b.log"
    line=$(grep -E "^(=+ )?[0-9]+ (passed|failed|errors?)" "$logs/$b.log" | tail -n 1)
    for kind in passed failed skipped error; do  # pytest says "1 error" / "7 errors" (a fixture's setup or teardown)
        n=$(echo "$line" | grep -oE "[0-9]+ $kind" | grep -oE "[0-9]+" || true)
        [ "$kind" = error ] && kind=errors
        eval "$kind=\$(( $kind + ${n:-0} ))"
    done
done
rm -rf "$logs"
echo "total: $passed passed, $failed failed, $errors errors, $skipped skipped"
exit $status
