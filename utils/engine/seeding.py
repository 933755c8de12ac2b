"""The seed each training process starts from, as ultralytics/yolov5 computes it.

Official train.py seeds ``opt.seed + 1 + RANK`` where RANK is the launcher's global rank, and -1 in a single process.
So a plain ``--seed 0`` run seeds 0, and DDP ranks seed 1, 2, ... The numpy and Python streams AutoAnchor draws from
then start where the official ones do, and the same command evolves the same anchors.
"""
from utils.engine.errors import TrainingError

SEED_MAX = 2 ** 32 - 1  # numpy takes seeds in [0, 2**32 - 1]; Python's and the frameworks' generators take more


def process_seed(seed, dist):
    """The seed of this process: ``seed + 1 + rank`` under DDP, ``seed`` in a single process (official RANK -1).

    A negative --seed stops with one line: official code dies in numpy on it in a single process, and here the
    loader's shuffle and per-rank shares are seeded with --seed itself, which numpy's generators refuse below 0."""
    rank = dist.rank if dist.distributed else -1
    s = int(seed) + 1 + rank
    if int(seed) < 0 or s > SEED_MAX:
        top = SEED_MAX - 1 - (dist.world_size - 1 if dist.distributed else -1)
        raise TrainingError(f"--seed {seed} is outside 0..{top}, the seeds numpy's generators take here (each "
                            "process seeds --seed + 1 + RANK as official, RANK -1 in a single process). "
                            f"Pass a --seed in 0..{top}.")
    return s
