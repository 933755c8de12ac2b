"""The one main() of the three training scripts (train.py, segment/train.py, classify/train.py) and one training run.

main(opt, script): the seed check, --resume (the run's options from its last.pt) or a new run folder claimed, the
launch checks and this rank's device, the process group, then train() (or --evolve's generations of it), and the
process group's goodbye. A script brings only what is its own: a TrainScript (its flags, its task, its checks).
train(): hold the run folder, build the parts, run the loop with the default hooks.
"""
import contextlib
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Tuple

from utils import signals
from utils.checkpoint.run_options import CONSENT_OPTIONS, without_consent
from utils.distributed import DistContext, process_group
from utils.device_header import log_device
from utils.distributed.launch import LaunchOptions, training_device
from utils.engine.build import build_training
from utils.engine.errors import TrainingError
from utils.engine.hooks import default_hooks
from utils.engine.user_callbacks import UserCallbacksHook
from utils.run_header import log_args
from utils.engine.hyp import load_hyp
from utils.engine.loop import TrainLoop
from utils.engine.parts import RunOptions
from utils.engine.saved_options import check_saved_options, read_resumed_checkpoint
from utils.engine.seeding import process_seed
from utils.evolve import EvolveColumns, evolve
from utils.log import LOGGER
from utils.paths import RunDirError, increment_path
from utils.run_lock import hold_run_folder
from utils.tasks.detect import DETECT


@dataclass(frozen=True)
class TrainScript:
    """What one training entry script brings to main(); the rest of main() is the same for every task."""
    name: str  # 'train.py', 'segment/train.py', ...: how --evolve's closing line names the script
    parse: Callable  # the script's parse_opt(known, args): its flags, and the defaults a resumed run's options lack
    task_for: Callable  # options -> the utils.tasks.Task trained, asked once they are final (a resumed run's too)
    run_options: Callable = RunOptions.from_opt  # options -> the RunOptions the build, launch and hooks act on
    start_flag: str = "--weights"  # the flag that starts a new run from a checkpoint (messages name it)
    model_kind: Optional[str] = None  # the model class a resumable last.pt must hold (None: any)
    optimizers: Tuple[str, ...] = ("SGD", "Adam", "AdamW")  # --optimizer's choices: a resumed run's must be one
    check_new_run: Optional[Callable] = None  # options -> None: the script's checks of a new run, before its folder
    check: Optional[Callable] = None  # options -> None: the script's checks of any run (new or resumed)
    evolve_project: Optional[Path] = None  # --evolve's folder when --project is the script's default
    after_training: Optional[Callable] = None  # options -> None, on the main process once the run has finished


def main(opt, script, callbacks=None):
    """Train (or --evolve) with opt, the options of script (a TrainScript). Returns train()'s results (None under
    --evolve). callbacks: a user's utils.callbacks.Callbacks, called at the training events (user_callbacks.py)."""
    dist = DistContext.from_env()  # who this process is, decided once here and passed down
    if dist.is_main:  # official: the script's arguments line first, on rank 0 only, before --resume reads anything
        log_args(f"{Path(script.name).with_suffix('').as_posix()}: ", vars(opt))
    process_seed(opt.seed, dist)  # a --seed numpy cannot take stops here, before any folder is made
    evolving = bool(vars(opt).get("evolve"))
    if opt.resume and not evolving:
        opt = resume_opt(opt, script)
    else:
        _claim_new_run(opt, script, dist, evolving)
    options = script.run_options(opt)
    if script.check is not None:
        script.check(opt)
    # what the launch checks read, and nothing else
    launch = LaunchOptions(device=opt.device, batch_size=opt.batch_size, sync_bn=options.sync_bn,
                           evolve=options.evolve, image_weights=options.image_weights)
    device = training_device(launch, dist)  # launch checks, and this rank's GPU under DDP
    if dist.is_main:  # official select_device's 'YOLOv5 🚀 ...' line, once (its other ranks log at ERROR only)
        log_device(device, launch.device)
    process_group.start(dist, device)  # DDP: process group with its timeout (YOLO_DDP_TIMEOUT), the rank's watchdog
    if dist.distributed:  # a rank stopped by Ctrl-C/SIGTERM is not a crash: its peers got the signal too (launchers
        signals.on_stop(process_group.finish)  # forward it) and stop on their own; their watchdogs must not fail them
    task = script.task_for(opt)
    hyp = vars(opt).get("hyp")  # a --hyp path (a script without --hyp: its task's hyperparameters step reads flags)
    if evolving:
        evolve(load_hyp(hyp), opt, device, functools.partial(train, dist=dist, task_plugin=task, callbacks=callbacks),
               columns=EvolveColumns.of(task), script=script.name)
        return None
    results = train(hyp, opt, device, dist, task_plugin=task, options=options, callbacks=callbacks)
    process_group.finish()  # a goodbye to the peers' watchdogs: this rank's exit from here on is not a crash
    if dist.is_main and script.after_training is not None:
        script.after_training(opt)
    return results


def _claim_new_run(opt, script, dist, evolving):
    """A new run's options settled (paths as text, the script's checks) and its run folder claimed."""
    for k in ("data", "cfg", "hyp", "weights", "model", "project"):
        if k in vars(opt):
            setattr(opt, k, str(vars(opt)[k]))
    if script.check_new_run is not None:
        script.check_new_run(opt)
    if evolving:
        if script.evolve_project is not None and opt.project == str(script.parse(True, args=[]).project):
            opt.project = str(script.evolve_project)
        opt.exist_ok, opt.resume = opt.resume, False
    # Making the folder is the claim (two runs started at once get exp and exp2). Only rank 0 claims: the other DDP
    # ranks never write to the run folder (utils/engine/run_folder.py), so their unclaimed name is never used.
    try:
        opt.save_dir = str(increment_path(Path(opt.project) / opt.name, exist_ok=opt.exist_ok, mkdir=dist.is_main))
    except RunDirError as e:
        raise TrainingError(str(e)) from e
    opt.resume = False


def resume_opt(opt, script):
    """The options of the run being resumed (from its last.pt: this project's or an official ultralytics run's),
    --weights pointing at that last.pt. Flags the saved options lack take the script's defaults (script.parse).
    Consent flags (--allow-download-scripts) come from this command line only, never from the file."""
    last, ckpt, saved = read_resumed_checkpoint(opt)
    if not _resumable(ckpt, saved, script.model_kind):
        raise TrainingError(f"--resume: {last} is a finished (stripped) or foreign checkpoint; it cannot be resumed. "
                            f"Use it as {script.start_flag} to start a new run.")
    saved = without_consent(saved)
    new = script.parse(True, args=[])
    defaults = dict(vars(new))
    check_saved_options({k: v for k, v in saved.items() if k != "optimizer"}, defaults, last)
    if "optimizer" in saved and saved["optimizer"] not in script.optimizers:
        raise TrainingError(f"--resume: {last}: its saved option optimizer={saved['optimizer']!r} is not one of "
                            f"{', '.join(script.optimizers)}; the checkpoint was edited or damaged: start a new run "
                            f"with {script.start_flag} {last}.")
    vars(new).update(saved)
    for k in CONSENT_OPTIONS:  # the person resuming decides, as when the run started
        if k in defaults:
            setattr(new, k, vars(opt).get(k, False))
    new.resume, new.weights, new.save_dir = True, str(last), str(last.parent.parent)
    if "cfg" in defaults:
        new.cfg = ""  # the model is last.pt's
    if "hyp" in defaults:
        hyp_yaml = last.parent.parent / "hyp.yaml"
        new.hyp = str(hyp_yaml) if hyp_yaml.is_file() else saved.get("hyp")
    LOGGER.info(f"Resuming from {last}")
    return new


def _resumable(ckpt, saved, model_kind):
    """Whether a checkpoint read without tensors is an unfinished run's last.pt (its optimizer state kept) holding the
    model class the script trains (any, when model_kind is None)."""
    if not isinstance(saved, dict) or ckpt.get("optimizer") is None:
        return False
    if model_kind is None:
        return True
    model = ckpt.get("model")
    return str(model.get("class", "") if hasattr(model, "get") else "").endswith(model_kind)


def train(hyp, opt, device, dist=None, task_plugin=DETECT, options=None, callbacks=None):
    """Train once; returns the task's final results row (detection: P, R, mAP50, mAP50-95, val box, obj, cls; zeros
    on DDP ranks other than 0). dist: this process's DistContext (a single process when None); task_plugin: the
    utils.tasks.Task trained; options: the script's RunOptions (None: train.py's, from opt). The process that writes
    the run folder (DDP: rank 0; the other ranks never write there) locks it first, before anything in it changes: a
    second run into a live folder stops in one line (utils/run_lock.py). callbacks: a user's Callbacks, called on the
    main process after the run's own hooks (utils/engine/user_callbacks.py)."""
    dist = dist or DistContext()
    with hold_run_folder(opt.save_dir) if dist.is_main else contextlib.nullcontext():
        parts = build_training(opt, hyp, device, dist, task_plugin, options=options)
        try:
            user = [UserCallbacksHook(callbacks)] if callbacks is not None and dist.is_main else []
            return TrainLoop(parts, default_hooks(parts) + user).train()
        finally:
            parts.plots.close()  # a failed or stopped run still leaves whole plot files, not half-written ones
            for loader in (parts.train_loader, parts.val_loader):
                if loader is not None:
                    loader.close()  # its workers end now, not at a garbage collection (EarlyStartLoader.close)
