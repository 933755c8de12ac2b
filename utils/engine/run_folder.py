"""The run folder a training writes: weights/ (cleared of what interrupted saves left), hyp.yaml, opt.yaml (what
official --resume reads), and the loggers (a new run's first results.csv row replaces an earlier run's file). Only the
main process writes; the others only learn the paths. Every file goes through utils/atomic_files.py."""
import tempfile
from pathlib import Path

import yaml

from utils import signals
from utils.atomic_files import remove_stale_temp_files, write_atomically
from utils.checkpoint.run_options import official_opt
from utils.engine.errors import TrainingError
from utils.engine.parts import RunFolder
from utils.log import LOGGER, colorstr
from utils.loggers import KEYS, Loggers
from utils.loggers.options import LogOptions


def prepare_run_folder(flags, hyp, dist, results_keys=None, settings_files=None):
    """RunFolder for the run's save_dir (claimed by the training script). flags: the run's RecordedFlags
    (utils/checkpoint/run_options.py); hyp: its hyperparameters as loaded. Returns (RunFolder, Loggers or None).
    results_keys: results.csv's columns (the task's; detection's when None); settings_files: {file name: dict}
    written into the run folder (None: detection's hyp.yaml and opt.yaml)."""
    run = RunFolder(save_dir=Path(flags["save_dir"]))
    # What a Ctrl-C's exit line reports: the checkpoint on disk, read from the file (DDP: rank 0 reports).
    signals.describe_on_disk((lambda: signals.checkpoint_status(run.last)) if dist.is_main else None)
    if not dist.is_main:
        return run, None
    try:
        run.weights.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=run.save_dir) as probe:  # a nameless file: no name of the user's is touched
            probe.write(b"ok")
            probe.flush()
    except OSError as e:
        raise TrainingError(f"Run folder {run.save_dir} is not writable: {e.strerror or e}. "
                            "Choose another --project/--name or free some disk space.") from e
    # A process killed mid-save (SIGKILL, power loss) leaves last.pt.<host>.<pid>.yolo-partial.pt beside last.pt; only
    # names of that exact shape whose writer is gone are removed, never those of a live process writing into the same
    # folder (--exist-ok), nor a user's file.
    removed = remove_stale_temp_files(run.weights, "")
    if removed:
        LOGGER.info(f"Removed {removed} temporary file(s) left in {run.weights} by interrupted checkpoint saves")
    remove_stale_temp_files(run.save_dir, "")  # and those of results.csv, opt.yaml, the plots (same exact shape)
    LOGGER.info(colorstr("hyperparameters: ") + ", ".join(f"{k}={v}" for k, v in hyp.items()))
    log_options = LogOptions.of(flags)
    if log_options.evolve:  # evolve.csv and hyp_evolve.yaml record the generations instead
        return run, None
    # Atomic: on a resume the other DDP ranks read hyp.yaml (train.resume_opt) while rank 0 rewrites it here; a
    # plain rewrite let them read it empty. Official train.py --resume reads opt.yaml.
    files = settings_files if settings_files is not None else {"hyp.yaml": hyp, "opt.yaml": official_opt(flags, hyp)}
    for name, content in files.items():
        text = yaml.safe_dump(content, sort_keys=False).encode()
        write_atomically(run.save_dir / name, lambda f, text=text: f.write(text), mode=0o644)
    return run, Loggers(run.save_dir, log_options, hyp, keys=KEYS if results_keys is None else results_keys)
