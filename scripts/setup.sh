#!/usr/bin/env bash
# Builds .venv-oneflow (Python 3.10, oneflow==0.9.0) and .venv-torch (Python 3.11+, torch==2.13.0 CPU build) from
# requirements.txt; on request (`setup.sh tf`) .venv-tf, the export converters' environment, from requirements-tf.txt;
# `setup.sh browser` (part of all) Debian's chromium package, for the docs site's browser test.
# Idempotent: an environment whose stamp matches its requirements is reused as it is; an installed browser is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
# arguments: environments to build, side by side: all (= oneflow torch browser) | oneflow | torch | tf | browser (tf
# is never part of all); none given: all

find_python() {  # $1 = major.minor wanted; prints the path of a working interpreter
    local v=$1 cand
    for cand in "python$v" "$(command -v pyenv >/dev/null 2>&1 && pyenv root)/versions/$v"*/bin/python \
                /usr/bin/python$v /usr/local/bin/python$v; do
        # a pyenv shim can exist on PATH and still refuse to run: try each one
        if [ -n "$cand" ] && "$cand" -c "import sys, venv; assert sys.version_info[:2] == tuple(map(int, '$v'.split('.')))" \
                >/dev/null 2>&1; then
            "$cand" -c "import sys; print(sys.executable)"; return 0
        fi
    done
    return 1
}

stamp_of() { cat requirements.txt "$0" "$@" | sha256sum | cut -c1-16; }  # $@: extra requirement files

make_env() {  # $1 = name, $2 = python, $3... = packages to install before requirements.txt
    local name=$1 py=$2; shift 2
    local dir=".venv-$name" stamp extra=""
    [ "$name" = tf ] && extra=requirements-tf.txt
    stamp=$(stamp_of $extra)
    if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$stamp" ]; then
        echo "setup: $dir is up to date"; return 0
    fi
    echo "setup: building $dir with $("$py" --version 2>&1)"
    [ -x "$dir/bin/python" ] || "$py" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
    [ $# -gt 0 ] && "$dir/bin/python" -m pip install -q "$@"
    "$dir/bin/python" -m pip install -q -r "${extra:-requirements.txt}"
    echo "$stamp" > "$dir/.stamp"
}

build_oneflow() {
    local py310
    if py310=$(find_python 3.10); then
        make_env oneflow "$py310"
    else
        echo "setup: OneFlow 0.9.0 needs Python 3.7-3.10 and none was found on PATH or under pyenv." >&2
        echo "       Install one ('pyenv install 3.10.13' or 'apt-get install python3.10-venv') and run 'make setup' again." >&2
        return 1
    fi
}

build_torch() {
    local py="" v
    for v in 3.11 3.12 3.13; do py=$(find_python $v) && break; done
    [ -n "$py" ] || { echo "setup: PyTorch 2.13 needs Python 3.11+; none found." >&2; return 1; }
    make_env torch "$py" "torch==2.13.0"  # pinned first: an open range would pull several GB of CUDA packages
}

build_tf() {
    local py="" v
    for v in 3.11 3.12; do py=$(find_python $v) && break; done  # TensorFlow 2.21's wheels: up to 3.13; 3.11 first
    [ -n "$py" ] || { echo "setup: the converters' environment needs Python 3.11 or 3.12; none found." >&2; return 1; }
    make_env tf "$py" "torch==2.13.0"
}

# Headless Chromium for tests/test_docs/test_docs_browser.py (which skips without it, and fails in CI). Only root
# (or password-less sudo) can install a Debian package: anyone else gets one line saying what to run, and the set-up
# goes on, since nothing but that test needs it.
build_browser() {
    local b
    for b in chromium chromium-browser google-chrome; do
        if command -v "$b" >/dev/null 2>&1; then echo "setup: $b is installed"; return 0; fi
    done
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
            echo "setup: no Chromium for the docs browser test (it skips): 'sudo apt-get install chromium' installs it"
            return 0
        fi
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "setup: no Chromium for the docs browser test (it skips), and no apt-get to install it: install Chromium"
        return 0
    fi
    local install="$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium"
    echo "setup: installing chromium (Debian package) for the docs browser test"
    # A fresh machine's package lists are empty, and old ones name files the mirror no longer has: read them first
    # when chromium is not among them, and again when the install fails
    if ! apt-cache show chromium >/dev/null 2>&1; then $sudo apt-get update -qq; fi
    $install >/dev/null || { $sudo apt-get update -qq && $install >/dev/null; }
    command -v chromium >/dev/null
}

# Several environments are built side by side: pip spends much of its time waiting on downloads and unpacking on one
# core, so three builds take about as long as two in a row (2:21 for all three on a 2-core machine, 1:37-1:49 each).
envs=()
for w in "${@:-all}"; do
    case "$w" in
        all) envs+=(oneflow torch browser) ;;
        oneflow|torch|tf|browser) envs+=("$w") ;;
        *) echo "setup: unknown environment '$w' (all, oneflow, torch, tf, browser)" >&2; exit 2 ;;
    esac
done
if [ ${#envs[@]} -eq 1 ]; then
    "build_${envs[0]}"
    exit $?
fi
logs=$(mktemp -d)
pids=()
for e in "${envs[@]}"; do
    "build_$e" > "$logs/$e.log" 2>&1 &
    pids+=($!)
done
status=0
for i in "${!envs[@]}"; do
    wait "${pids[$i]}" || { status=1; echo "setup: setting up ${envs[$i]} failed:" >&2; }
    cat "$logs/${envs[$i]}.log"
done
rm -rf "$logs"
exit $status
