"""benchmarks/train_phases.py: the phases of a train.py run read from its stamped output, in this project's tqdm
format and in the newer one the official environment prints, and a real stamped run of a small command."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from train_phases import phases, stamp_output  # noqa: E402

OLD = "         {e}/1         0G     0.1066    0.06498     0.1038        148        640:  50%|█████     | {i}/{n} [00:08<01:00,  8.58s/it]"
NEW = "\x1b[K        {e}/1         0G     0.1092    0.06531     0.1048        185        640: 50% ━━━━━━────── {i}/{n} 32.9s/it 1:44<2:45"
VAL = "                 Class     Images  Instances          P          R      mAP50   mAP50-95: 100% ━━━━ {i}/{n} 8.2s/it 32.9s"
ALL = "                   all        128        929      0.485      0.392      0.408      0.237"


def _run(bar):
    t = [0.0]

    def at(dt, s):
        t[0] += dt
        return (t[0], s)
    lines = [at(1, "YOLOv5 backend"), at(3, "Starting training for 2 epochs...")]
    for e in (0, 1):
        lines += [at(2 if i == 1 else 1, bar.format(e=e, i=i, n=2)) for i in (1, 2)]
    lines += [at(4, VAL.format(i=4, n=4)), at(0.5, ALL), at(1, "Validating runs/train/exp/weights/best.pt..."),
              at(5, VAL.format(i=4, n=4)), at(0.5, ALL), at(2, "<exit>")]
    return phases(lines)


def test_phases_in_both_progress_bar_formats():
    want = [("setup", 4.0), ("first batch", 2.0), ("epoch 0", 1.0), ("epoch 1", 3.0), ("validate 1", 4.5),
            ("checkpoints", 1.0), ("best.pt validation", 5.5), ("finish", 2.0)]
    assert _run(OLD) == want
    assert _run(NEW) == want


def test_stamps_a_real_command():
    rc, stamped, cpu = stamp_output([sys.executable, "-c", "import time; print('Starting training'); "
                                     "time.sleep(0.3); print('done', end='\\r'); print('x')"])
    assert rc == 0 and [s for _, s in stamped] == ["Starting training", "done", "x", "<exit>"]
    assert stamped[-1][0] >= 0.3 and cpu >= 0
