"""Training loggers, laid out as official YOLOv5's utils/loggers: results.csv with the ultralytics columns (and format),
one JSON object per epoch with --ndjson-console (stdout) / --ndjson-file (results.ndjson), results.png at the end,
TensorBoard (tensorboard.py: scalars, the model graph, the result images) and, when their package is installed and
configured, Weights & Biases, Comet, ClearML (as official) and MLflow (beyond official): *_logger.py.

What is logged when (official's points): the options and hyperparameters at start; the graph before the first step;
the 13 values per epoch; checkpoints every --save-period epochs; the images and the final model once training has
ended and every plot is on disk (so no logger waits for a drawing, and nothing is logged per step except Comet's
opt-in batch metrics, on steps whose losses the trainer reads back anyway). Every outside call goes through
guard.Guarded: a logger that raises is one warning line and then off; the run goes on.

results.csv and results.ndjson are small: each epoch rewrites the whole file through a temporary name
(utils/atomic_files.py), so a full disk never leaves half a row, and a new run in an old folder (--exist-ok) replaces
them with its first epoch's rows instead of deleting them at its start (a run that stops before its first epoch
leaves the earlier files as they were)."""
import json
import signal
import sys
import threading
from pathlib import Path

from utils.atomic_files import OutputWriteError, write_atomically
from utils.errors import UserError
from utils.log import LOGGER, colorstr
from utils.loggers import clearml_logger, comet_logger, mlflow_logger, tensorboard, wandb_logger
from utils.loggers.guard import Guarded, start
from utils.loggers.options import CLOUD_FLAGS, LogOptions
from utils.plot_jobs import inline
from utils.plots import plot_results

KEYS = ["train/box_loss", "train/obj_loss", "train/cls_loss",  # train loss
        "metrics/precision", "metrics/recall", "metrics/mAP_0.5", "metrics/mAP_0.5:0.95",  # metrics
        "val/box_loss", "val/obj_loss", "val/cls_loss",  # val loss
        "x/lr0", "x/lr1", "x/lr2"]  # learning rate per parameter group (bias, weight, norm weight)
LOGGERS = ("csv", "tb", "wandb", "clearml", "comet", "mlflow")
FINISH_LIMIT_S = 120  # per logger, for its last uploads and close (Comet says its offline archive takes <= 120 s)
RESULT_IMAGES = ("results.png", "confusion_matrix.png", "F1_curve.png", "PR_curve.png", "P_curve.png", "R_curve.png")
# name -> (module with configured(), logger class name, what to call it in messages)
CLOUD = {"wandb": (wandb_logger, "WandbLogger", "W&B"), "comet": (comet_logger, "CometLogger", "Comet"),
         "clearml": (clearml_logger, "ClearmlLogger", "ClearML"), "mlflow": (mlflow_logger, "MlflowLogger", "MLflow")}


def note_ignored_flags(values, flags=CLOUD_FLAGS, what="cloud logging (Weights & Biases, Comet, ClearML)",
                       why="is not part of this project"):
    """One line naming the flags in `flags` that values (a mapping of flag names to values) sets to something else
    than their default."""
    given = [f"--{k} {values[k]}" for k, default in flags.items() if values.get(k, default) not in (default, None, "")]
    if given:
        LOGGER.info(f"{', '.join(given)}: {what} {why}; doing nothing.")
    return given


def read_results_csv(file):
    """Rows of results.csv as a list of dicts of floats (header names stripped of their padding)."""
    lines = Path(file).read_text().splitlines()
    keys = [k.strip() for k in lines[0].split(",")]
    return [dict(zip(keys, (float(v) for v in line.split(",")))) for line in lines[1:] if line.strip()]


class ResultsWriteError(UserError, OSError):
    """results.csv could not be written (a full disk, a read-only folder); the message says what is on disk."""


class Loggers:
    """One object the trainer calls at fixed points (official's callback names); each sink is optional and a sink's
    failure only warns (once, then it is off)."""

    def __init__(self, save_dir, options=None, hyp=None, include=LOGGERS, keys=KEYS):
        """options: LogOptions (None: a run's own files only, no cloud logger); keys: results.csv's columns after
        'epoch' (a task's Task.results_keys(); detection's are KEYS)."""
        self.save_dir = Path(save_dir)
        self.csv = self.save_dir / "results.csv"
        self.keys = list(keys)
        cloud_allowed = options is not None
        self.options, self.hyp = options or LogOptions(), dict(hyp or {})
        self.ndjson_console = self.options.ndjson_console
        self.ndjson = self.save_dir / "results.ndjson" if self.options.ndjson_file else None
        # A new run (--exist-ok) starts its own files: its first row replaces what an earlier run left there; a
        # resumed one appends to them
        self._replace = set() if self.options.resume else {self.csv, self.ndjson} - {None}
        self.tb = Guarded("TensorBoard")
        if "tb" in include and not self.options.evolve:
            if tensorboard.available():
                self.tb = start("TensorBoard", tensorboard.EventWriter, self.save_dir)
                if self.tb:
                    LOGGER.info(f"{tensorboard.PREFIX}Start with 'tensorboard --logdir {self.save_dir.parent}', "
                                "view at http://localhost:6006/")
            else:
                LOGGER.info(f"{tensorboard.PREFIX}not installed, no event files ('pip install tensorboard')")
        self._process_hooks = _process_hooks()  # ClearML replaces these while its task is open
        self.cloud = {}  # name -> Guarded
        not_configured = []
        for name, (module, cls, label) in CLOUD.items():
            if name not in include or not cloud_allowed:
                continue
            missing = module.configured()
            if missing == "":
                self.cloud[name] = start(label, getattr(module, cls), self.options, self.hyp, self.save_dir)
            elif missing != "not installed":
                not_configured.append(f"{label} ({missing})")
        if not_configured:
            LOGGER.info(f"{colorstr('Loggers: ')}installed but not configured, so not logging: "
                        f"{'; '.join(not_configured)}")
        if cloud_allowed and not any(self.cloud.values()):
            note_ignored_flags(self.options.cloud_flags(), why="has no active logger (W&B, Comet, ClearML: install "
                                                                "and configure one, see README 'Loggers')")
        self._finished = False

    def _each(self, method, *args, **kwargs):
        for g in self.cloud.values():
            g.call(method, *args, **kwargs)

    # --------------------------------------------------------------------------------------------- start of training
    def on_pretrain_routine_end(self, data):
        """The run is set up (dataset checked): Comet's --upload_dataset."""
        if "comet" in self.cloud and not self.options.resume:
            self.cloud["comet"].call("log_dataset", data)

    def on_train_start(self, model, imgsz, plots=True):
        """The model graph, once, before the first step (official: after it, with --noplots off and no SyncBN)."""
        if self.tb and plots and not self.options.sync_bn:
            try:
                tensorboard.log_graph(self.tb.target, model, imgsz)
            except Exception as e:  # noqa: BLE001 - official: one warning; scalars and images still go on
                LOGGER.warning(f"{tensorboard.PREFIX}model graph not written ({type(e).__name__}: {e})")

    def on_train_batch_end(self, step, losses):
        """Comet's opt-in batch metrics; losses: the mean box, obj, cls losses this step read back."""
        if "comet" in self.cloud:
            self.cloud["comet"].call("log_batch", dict(zip(self.keys[:3], map(float, losses))), step)

    # ----------------------------------------------------------------------------------------------------- per epoch
    def on_fit_epoch_end(self, vals, epoch, best_fitness=None, fi=None):
        """Append one results.csv row (epoch, then one value per key); the same values to every logger."""
        n = len(self.keys) + 1
        header = (("%20s," * n % tuple(["epoch"] + self.keys)).rstrip(",") + "\n").encode()
        row = (("%20.5g," * n % tuple([epoch] + [float(v) for v in vals])).rstrip(",") + "\n").encode()
        old = self._kept(self.csv)
        try:  # rewritten whole through a temporary file: a full disk cannot leave a half row in a good file
            write_atomically(self.csv, lambda f: f.write((old or header) + row))
            self._replace.discard(self.csv)
        except OSError as e:
            raise ResultsWriteError(f"cannot write {self.csv} ({_reason(e)}): training stopped before this "
                                    f"epoch's checkpoint, the files in {self.save_dir / 'weights'} are as the last "
                                    "epoch left them; free some space and continue with --resume.") from None
        metrics = {k: float(v) for k, v in zip(self.keys, vals)}
        if self.tb:
            for k, v in metrics.items():
                self.tb.call("add_scalar", k, v, epoch)
            self.tb.call("flush")  # a killed run keeps its scalars
        self._each("log_epoch", metrics, epoch, best_fitness is not None and best_fitness == fi)
        if self.ndjson_console or self.ndjson:
            line = json.dumps({"epoch": epoch, **metrics})
            if self.ndjson_console:
                print(line, flush=True)
            if self.ndjson:  # one line per epoch, the file rewritten whole as results.csv is
                old = self._kept(self.ndjson)
                write_atomically(self.ndjson, lambda f: f.write(old + (line + "\n").encode()))
                self._replace.discard(self.ndjson)

    def _kept(self, file):
        """What this run keeps of `file` when it adds a row: nothing the first time a new run writes it (an earlier
        run's file is replaced whole then), else its bytes."""
        if file in self._replace:
            return b""
        return file.read_bytes() if file.exists() else b""

    def on_model_save(self, last, epoch, final_epoch, best_fitness, fi):
        """Every --save-period epochs (not the final one, as official): last.pt to the loggers that keep models."""
        period = self.options.save_period
        if period > 0 and (epoch + 1) % period == 0 and not final_epoch and Path(last).exists():
            self._each("log_checkpoint", Path(last), epoch, fi, best_fitness == fi)

    def truncate_csv(self, epochs_done):
        """Keep the header and the first `epochs_done` rows: a resumed run rewrites the rows of the epoch that was
        killed after its CSV row but before its checkpoint (or vice versa) so the file matches the checkpoint."""
        self._replace.clear()  # these files are this run's own: continued, never replaced
        if not self.csv.exists():
            return
        lines = self.csv.read_bytes().splitlines(keepends=True)
        write_atomically(self.csv, lambda f: f.write(b"".join(lines[:1 + max(epochs_done, 0)])))
        if self.ndjson and self.ndjson.exists():  # one line per epoch, no header
            kept = b"".join(self.ndjson.read_bytes().splitlines(keepends=True)[:max(epochs_done, 0)])
            write_atomically(self.ndjson, lambda f: f.write(kept))

    # ----------------------------------------------------------------------------------------------- end of training
    def on_train_end(self, plots=True, draw=None):
        """results.png, drawn by draw(what, fn, *args) (a PlotJobs.submit) or here; on_run_end logs it once drawn."""
        if plots and self.csv.exists():
            (draw or inline)("results.png", plot_results, file=self.csv)

    def image_groups(self):
        """The run's images under official's titles, as they are on disk now."""
        d = self.save_dir
        return {"Labels": sorted(d.glob("*labels*.jpg")), "Mosaics": sorted(d.glob("train_batch*.jpg")),
                "Validation": sorted(d.glob("val*.jpg")),
                "Results": [d / f for f in RESULT_IMAGES if (d / f).exists()]}

    def on_run_end(self, last, best, epoch, results):
        """Training and the final validation are over and every plot is written: the result images to TensorBoard
        (official's six), every image group and the final model to the cloud loggers, then everything closed."""
        if self._finished:
            return
        self._finished = True
        groups = self.image_groups()
        for f in groups["Results"]:  # official's six, named by file stem
            self.tb.call("add_image_file", f, epoch)
        self.tb.call("close")
        last, best = Path(last), Path(best)
        model_file = best if best.exists() else last if last.exists() else None
        if self.options.evolve:
            model_file = None
        final = {k: float(v) for k, v in zip(self.keys[3:10], results)}
        self._each("log_images", groups, epoch)
        for g in self.cloud.values():  # a close that hangs (a helper process, a service) must not keep the run open
            g.call_within(FINISH_LIMIT_S, "finish", final, model_file)
        if self.cloud:
            _restore_process_hooks(self._process_hooks)

    def close(self):
        """Close what is open without logging more (a run that stopped on an error)."""
        if not self._finished:
            self._finished = True
            self.tb.call("close")


def _reason(e):
    """Why a write failed, short: the OSError's own words (an OutputWriteError's cause), e.g. 'No space left on
    device'."""
    cause = e.__cause__ if isinstance(e, OutputWriteError) and isinstance(e.__cause__, OSError) else e
    return getattr(cause, "strerror", None) or str(cause)


def _process_hooks():
    """The SIGINT/SIGTERM handlers and sys.excepthook: ClearML chains its own in front of them for its task's life
    and leaves some after close(); the trainer's (utils/signals.py) come back once the loggers are done."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}, sys.excepthook


def _restore_process_hooks(saved):
    if saved is None or threading.current_thread() is not threading.main_thread():
        return  # signal.signal works in the main thread only
    handlers, sys.excepthook = saved
    for sig, handler in handlers.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


from utils.loggers.generic import GenericLogger  # noqa: E402  (ultralytics users import it from here)
