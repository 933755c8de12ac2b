"""A DDP job's process group and watchdog: started once per rank before any collective, finished when the rank ends
normally. Both are no-ops in a single process.

Environment (read here, the launcher's configuration rather than who this process is): YOLO_DDP_TIMEOUT seconds
(default 10800) bounds the process group's collectives and is the watchdog's no-progress limit;
YOLO_DDP_PEER_TIMEOUT (default 60 s) is how long a silent peer is tolerated; YOLO_DDP_WATCHDOG=0 turns the watchdog
off (e.g. behind a firewall that blocks its port)."""
import os

from utils import backend
from utils.distributed import watchdog

DEFAULT_TIMEOUT_S = 10800  # 3 h, as ultralytics: the other ranks wait at a collective while rank 0 validates COCO


def timeout_s():
    try:
        return float(os.environ.get("YOLO_DDP_TIMEOUT", DEFAULT_TIMEOUT_S))
    except ValueError:
        return float(DEFAULT_TIMEOUT_S)


def start(ctx, device):
    """The process group (with the timeout) and this rank's watchdog."""
    if not ctx.distributed:
        return
    backend.dist_init(device, int(timeout_s()))
    if os.environ.get("YOLO_DDP_WATCHDOG", "1") == "0":
        return
    watchdog.start(ctx, stall_timeout_s=timeout_s(),
                   peer_timeout_s=float(os.environ.get("YOLO_DDP_PEER_TIMEOUT", "60")))


def finish():
    """This rank ended normally (or stops on a signal its peers got too): tell the peers' watchdogs it is not a
    crash, then stop watching."""
    watchdog.finish()
