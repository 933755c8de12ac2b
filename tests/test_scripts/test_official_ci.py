"""The official ultralytics/yolov5 CI job "Test detection" (.github/workflows/ci-testing.yml), run verbatim against a
clean copy of this repository under the PyTorch backend: coco128 at ../datasets/coco128 beside the copy (where
data/coco128.yaml looks) and yolov5n.pt in its root, as the official CI has them.

Every step runs even after one fails, so a failure lists all the failing steps, each with its own output."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = "still_life.jpg"  # one of data/images, in place of the official bus.jpg

# The block as the issue quotes it (sizes: imgsz 64, batch 32); only the image name is ours.
CI_BLOCK = """\
m=yolov5n; b=runs/train/exp/weights/best
python train.py --imgsz 64 --batch 32 --weights $m.pt --cfg $m.yaml --epochs 1 --device cpu
for w in $m $b; do python val.py --imgsz 64 --batch 32 --weights "$w.pt" --device cpu; python detect.py --imgsz 64 --weights "$w.pt" --device cpu; done
python hubconf.py --model $m; python models/yolo.py --cfg $m.yaml
python export.py --weights $m.pt --img 64 --include torchscript
python - <<EOF
import torch
im = torch.zeros([1, 3, 64, 64])
for path in '$m', '$b':
    model = torch.hub.load('.', 'custom', path=path, source='local'); print(model('data/images/%s')); model(im); torch.jit.trace(model, [im])
EOF
""" % SAMPLE

FAILED = "### STEP FAILED"
# Harness around the verbatim block: trace each command (`+ cmd`) and mark each failure, but keep going.
PROLOGUE = f"""\
PS4='+ '
trap 'echo "{FAILED} (exit $?): $BASH_COMMAND"' ERR
set -x
"""


def _copy_repo(dst):
    """The files git would commit (tracked, or new and not ignored) as they are in the working tree: no runs/,
    caches, virtual environments or datasets come along. Without git, a copy that skips those by name."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, check=True).stdout
        files = [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]  # skips deleted files
    except (OSError, subprocess.CalledProcessError):
        files = None
    if not files:
        shutil.copytree(ROOT, dst, symlinks=True, ignore=shutil.ignore_patterns(
            ".git", ".venv*", "runs", "datasets", "__pycache__", "*.cache", ".pytest_cache"))
        return
    for f in files:
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dst / f)


def _steps(log):
    """Split the traced log into (command, output lines) per top-level command."""
    steps = []
    for line in log.splitlines():
        if line.startswith("+ ") and not line.startswith(f"+ echo '{FAILED}"):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return steps


@pytest.mark.slow
def test_official_ci_block(tmp_path, coco128_dir, yolov5n_pt):
    from utils.backend import BACKEND
    if BACKEND != "torch":
        pytest.skip("the official CI block runs under PyTorch (torch.hub, torch.jit): the PyTorch suite runs it")
    venv_bin = Path(os.environ.get("YOLO_TORCH_PYTHON", ROOT / ".venv-torch" / "bin" / "python")).parent
    if not (venv_bin / "python").exists():
        pytest.skip(f"no PyTorch environment at {venv_bin} ('make setup' builds it)")
    if not coco128_dir.is_dir() or not yolov5n_pt.is_file():
        pytest.skip("needs ../shared/data/coco128 and ../shared/weights/yolov5n.pt")

    repo = tmp_path / "yolov5"
    repo.mkdir()
    _copy_repo(repo)
    shutil.copytree(coco128_dir, tmp_path / "datasets" / "coco128")  # writable: the label cache goes there
    shutil.copy2(yolov5n_pt, repo / "yolov5n.pt")
    script = tmp_path / "ci.sh"
    script.write_text(PROLOGUE + CI_BLOCK)

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "_YOLO_BACKEND_ANNOUNCED", "YOLO_QUIET")}
    env.update(PATH=f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}", YOLO_BACKEND="torch",
               VIRTUAL_ENV=str(venv_bin.parent), MPLBACKEND="Agg")
    p = subprocess.run(["bash", str(script)], cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=3000)
    (tmp_path / "ci.log").write_text(p.stdout)
    steps = _steps(p.stdout)
    summary = "\n".join(f"{'FAIL' if any(FAILED in x for x in out) else 'ok  '}  {cmd}" for cmd, out in steps)
    print(summary)  # shown with -s or -rA: which steps pass
    failed = [(cmd, out) for cmd, out in steps if any(FAILED in x for x in out)]
    details = "\n\n".join(f"$ {cmd}\n" + "\n".join(out[-40:]) for cmd, out in failed)
    if failed or p.returncode:
        pytest.fail(f"official CI block: {len(failed)} failing step(s), exit {p.returncode}\n{summary}\n\n{details}",
                    pytrace=False)
    assert len(steps) >= 11 and steps[-1][0] == "python -"  # every step ran, the heredoc last
