#!/usr/bin/env bash
# Stage what the GPU kit (benchmarks/gpu_kit.py) needs on a remote GPU machine without network access, which receives
# a copy of this working tree with a size limit (64 MiB by default; set GPU_KIT_LIMIT_MIB). Everything goes into
# .gpu_kit/ of this checkout (ignored by git); the script checks that the tree plus .gpu_kit/ fit the limit and prints
# the command to run there from the checkout's root, the folders to send with the tree (.gpu_kit) and a suggested
# time limit.
#
#   scripts/stage_gpu_kit.sh OFFICIAL [SHARED]
#
# OFFICIAL: required: the official ultralytics/yolov5 source at commit 5081342f: a checkout (e.g. ../yolov5-official)
#           or a git directory holding that commit (e.g. a bare clone, read with `git archive`).
# SHARED:   the shared test data beside the project (default ../shared): data/coco128 and weights/yolov5n.pt.
#
# .gpu_kit/official   the official source without .git, patched only where it would reach the network (below), with
#                     yolov5n.pt and data/images/bus.jpg in its folder, so that its check_amp really runs
# .gpu_kit/shared     data/coco128, weights/yolov5n.pt and reference/ref_A.npz (the official loss figures one CUDA
#                     test compares with), in the layout tests/conftest.py reads through YOLO_SHARED_DIR
# .gpu_kit/wheels     the packages the official code needs that a PyTorch image lacks (ultralytics, ultralytics-thop;
#                     the kit expects the GPU machine to have torch, torchvision, numpy, OpenCV, pandas, seaborn,
#                     scipy, psutil, requests, nvidia-ml-py, pytest and pytest-timeout), for CPython 3.12 manylinux,
#                     installed there with pip --no-index into /tmp/site
# Patches to the official code (no behaviour of training changes):
#   train.py                check_requirements(requirements.txt) skipped: it would pip-install what it finds missing
#                           (opencv-python beside an installed opencv-python-headless) from a network that is not there
#   utils/general.py        check_font does not download Arial.ttf (only plots draw text; the kit runs --noplots)
# and its children run with YOLO_OFFLINE=1 (ultralytics' own switch: no connectivity probe at import).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$HERE"
USAGE="usage: scripts/stage_gpu_kit.sh OFFICIAL [SHARED]  (OFFICIAL: required, an ultralytics/yolov5 checkout at \
5081342f, e.g. ../yolov5-official, or a git directory holding that commit; SHARED: default ../shared)"
[ $# -ge 1 ] && [ -n "$1" ] || { echo "$USAGE" >&2; exit 2; }
OFFICIAL="$1"
SHARED="${2:-$HERE/../shared}"
COMMIT=5081342f
KIT=.gpu_kit
ULTRALYTICS=ultralytics==8.4.190        # import-tested against the official code at 5081342f (needs >=8.4.118)
THOP=ultralytics-thop==2.2.3
LIMIT_MIB=${GPU_KIT_LIMIT_MIB:-64}      # what the GPU machine accepts with the working tree
PY=${PYTHON:-python3}

die() { echo "stage_gpu_kit: $*" >&2; exit 1; }
[[ $LIMIT_MIB =~ ^[1-9][0-9]*$ ]] || die "GPU_KIT_LIMIT_MIB=$LIMIT_MIB is not a whole number of MiB (e.g. 64)"
LIMIT=$((LIMIT_MIB * 1024 * 1024))
[ -f "$SHARED/data/coco128/images/train2017/000000000009.jpg" ] || die "no coco128 under $SHARED/data (pass SHARED)"
[ -f "$SHARED/weights/yolov5n.pt" ] || die "no $SHARED/weights/yolov5n.pt (pass SHARED)"
git check-ignore -q "$KIT/x" || die "$KIT/ is not ignored by git here: add '/$KIT/' to .gitignore first"

rm -rf "$KIT/official" "$KIT/shared"
mkdir -p "$KIT/official" "$KIT/shared/data" "$KIT/shared/weights" "$KIT/shared/reference" "$KIT/wheels"

# 1. the official source, without .git
if [ -f "$OFFICIAL/train.py" ]; then
    if git -C "$OFFICIAL" rev-parse -q --verify HEAD >/dev/null 2>&1; then
        head=$(git -C "$OFFICIAL" rev-parse HEAD)
        [[ $head == $COMMIT* ]] || die "$OFFICIAL is at $head, not $COMMIT"
    fi
    (cd "$OFFICIAL" && tar --exclude=.git -cf - .) | tar -xf - -C "$KIT/official"
elif git --git-dir="$OFFICIAL" cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
    git --git-dir="$OFFICIAL" archive "$COMMIT" | tar -xf - -C "$KIT/official"
else
    die "$OFFICIAL is neither a folder with train.py nor a git directory holding commit $COMMIT"
fi
cp "$SHARED/weights/yolov5n.pt" "$KIT/official/yolov5n.pt"
[ -f "$KIT/official/data/images/bus.jpg" ] || die "the official source has no data/images/bus.jpg (check_amp reads it)"

# 2. patches where the official code would reach the network (each must apply exactly once)
"$PY" - "$KIT/official" <<'EOF'
import sys
from pathlib import Path
root = Path(sys.argv[1])
patches = [
    ("train.py", '        check_requirements(ROOT / "requirements.txt")\n',
     '        pass  # GPU kit: check_requirements skipped (it pip-installs over a network the GPU machine lacks)\n'),
    ("utils/general.py", '        LOGGER.info(f"Downloading {url} to {file}...")\n'
                         '        torch.hub.download_url_to_file(url, str(file), progress=progress)\n',
     '        LOGGER.info(f"GPU kit: {url} not downloaded (offline); plots fall back to the default font")\n'),
]
for rel, old, new in patches:
    f = root / rel
    text = f.read_text()
    if text.count(old) != 1:
        sys.exit(f"stage_gpu_kit: patch for {rel} does not apply ({text.count(old)} matches): the official source "
                 f"changed; update scripts/stage_gpu_kit.sh")
    f.write_text(text.replace(old, new))
    print(f"patched {rel}")
EOF

# 3. coco128 (without label caches) and yolov5n.pt
(cd "$SHARED/data" && tar --exclude='*.cache' -chf - coco128) | tar -xf - -C "$KIT/shared/data"
cp "$SHARED/weights/yolov5n.pt" "$KIT/shared/weights/yolov5n.pt"
[ -f "$SHARED/reference/ref_A.npz" ] && cp "$SHARED/reference/ref_A.npz" "$KIT/shared/reference/"
chmod -R u+w "$KIT"

# 4. wheels for CPython 3.12 manylinux (the Python of the PyTorch image the kit expects)
for spec in "$ULTRALYTICS" "$THOP"; do
    name=${spec%%==*}; ver=${spec##*==}
    if ! ls "$KIT/wheels/${name//-/_}-$ver-"*.whl >/dev/null 2>&1; then
        "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$KIT/wheels" "$spec" 2>&1 \
            | grep -v "^WARNING: Location" || true
    fi
    ls "$KIT/wheels/${name//-/_}-$ver-"*.whl >/dev/null 2>&1 || die "could not download the wheel $spec"
done
# one version of each package only (two stop the whole install there)
for w in "$KIT"/wheels/*.whl; do
    keep=0
    for spec in "$ULTRALYTICS" "$THOP"; do
        name=${spec%%==*}; ver=${spec##*==}
        [[ $(basename "$w") == ${name//-/_}-$ver-* ]] && keep=1
    done
    [ $keep = 1 ] || rm -f "$w"
done

# 5. what is sent: tracked and untracked-not-ignored files (the working tree's copy), plus .gpu_kit/
tree=$(git ls-files -z --cached --others --exclude-standard | "$PY" -c '
import os, sys
paths = [p for p in sys.stdin.buffer.read().split(b"\0") if p]
print(sum(os.lstat(p).st_size for p in paths if os.path.lexists(p)))')
kit=$(find "$KIT" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
total=$((tree + kit))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "staged $KIT: official $(du -sh "$KIT/official" | cut -f1), shared $(du -sh "$KIT/shared" | cut -f1), wheels" \
     "$(du -sh "$KIT/wheels" | cut -f1) ($(ls "$KIT/wheels" | tr '\n' ' '))"
echo "to send: working tree $(mib "$tree") + $KIT $(mib "$kit") = $(mib "$total") of the $LIMIT_MIB MiB limit" \
     "(GPU_KIT_LIMIT_MIB)"
[ "$total" -le "$LIMIT" ] \
    || die "over the $LIMIT_MIB MiB limit (GPU_KIT_LIMIT_MIB): remove untracked files or stage less"

# 6. what to run on the GPU machine
KIT_ARGS="--ref $KIT/official --data $KIT/shared/data/coco128 --weights $KIT/shared/weights/yolov5n.pt"
INSTALL="python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
$KIT/wheels/*.whl && export PYTHONPATH=/tmp/site || exit;"
cat <<EOF

On the GPU machine, full kit (under 8 minutes on an H100):
  the command to run there from the checkout's root (OUT: an empty folder for the results):
    $INSTALL nvidia-smi; PYTHONUNBUFFERED=1 python3 benchmarks/gpu_kit.py --out \$OUT $KIT_ARGS
  the folders to send with the tree: $KIT
  suggested time limit: 600 s
quick kit (under 3 minutes): the same command with --quick, time limit 300 s.
Bring back \$OUT/gpu_kit.json and \$OUT/gpu_kit.log; commit the JSON as
benchmarks/results/gpu_kit_<device>_<date>.json.
EOF
