"""Training loggers: results.csv with the ultralytics columns (and format), TensorBoard scalars when a writer
package imports, one JSON object per epoch with --ndjson-console (stdout) / --ndjson-file (results.ndjson), and
results.png at the end through utils.plots.plot_results. The cloud loggers' flags are accepted and ignored."""
import importlib
import json
from pathlib import Path

from utils.atomic_files import write_atomically
from utils.errors import UserError
from utils.log import LOGGER, colorstr
from utils.plot_jobs import inline
from utils.plots import plot_results

KEYS = ["train/box_loss", "train/obj_loss", "train/cls_loss",  # train loss
        "metrics/precision", "metrics/recall", "metrics/mAP_0.5", "metrics/mAP_0.5:0.95",  # metrics
        "val/box_loss", "val/obj_loss", "val/cls_loss",  # val loss
        "x/lr0", "x/lr1", "x/lr2"]  # learning rate per parameter group (bias, weight, norm weight)


def _summary_writer():
    """A SummaryWriter class from the first module that provides one (tensorboardX, or the PyTorch install's
    tensorboard bridge, which needs the tensorboard package: backend.summary_writer_modules); None when none works.
    Imported lazily: TensorBoard is optional."""
    from utils.backend import summary_writer_modules  # framework choice: which bridge exists depends on it
    for name in summary_writer_modules:
        try:
            return importlib.import_module(name).SummaryWriter
        except Exception:
            continue
    return None


# Flags of the official Weights & Biases / Comet / ClearML / gsutil integrations, with their defaults: accepted so
# that official command lines run, but nothing here uploads anywhere.
CLOUD_FLAGS = {"entity": None, "upload_dataset": False, "bbox_interval": -1, "artifact_alias": "latest"}


def note_ignored_flags(opt, flags=CLOUD_FLAGS, what="cloud logging (Weights & Biases, Comet, ClearML)"):
    """One line naming the flags in `flags` that opt sets to something else than their default."""
    given = [f"--{k} {getattr(opt, k)}" for k, default in flags.items()
             if getattr(opt, k, default) not in (default, None, "")]
    if given:
        LOGGER.info(f"{', '.join(given)}: {what} is not part of this project; doing nothing.")
    return given


def read_results_csv(file):
    """Rows of results.csv as a list of dicts of floats (header names stripped of their padding)."""
    lines = Path(file).read_text().splitlines()
    keys = [k.strip() for k in lines[0].split(",")]
    return [dict(zip(keys, (float(v) for v in line.split(",")))) for line in lines[1:] if line.strip()]


class ResultsWriteError(UserError, OSError):
    """results.csv could not be written (a full disk, a read-only folder); the message says what is on disk."""


class Loggers:
    """One object the trainer calls at fixed points; each sink is optional and failures in a sink only warn."""

    def __init__(self, save_dir, opt=None, hyp=None, include=("csv", "tb"), keys=KEYS):
        """keys: results.csv's columns after 'epoch' (a task's Task.results_keys(); detection's are KEYS)."""
        self.save_dir = Path(save_dir)
        self.csv = self.save_dir / "results.csv"
        self.keys = list(keys)
        self.tb = None
        self.ndjson_console = bool(getattr(opt, "ndjson_console", False))
        self.ndjson = self.save_dir / "results.ndjson" if getattr(opt, "ndjson_file", False) else None
        if self.ndjson and not getattr(opt, "resume", False):  # a new run (--exist-ok) starts its own file
            self.ndjson.unlink(missing_ok=True)
        if opt is not None:
            note_ignored_flags(opt)
        if "tb" in include:
            writer = _summary_writer()
            if writer is not None:
                try:
                    self.tb = writer(str(self.save_dir))
                    LOGGER.info(f"{colorstr('TensorBoard: ')}Start with 'tensorboard --logdir {self.save_dir.parent}'")
                except Exception as e:
                    LOGGER.warning(f"TensorBoard disabled: {e}")

    def on_fit_epoch_end(self, vals, epoch):
        """Append one results.csv row (epoch, then one value per key) and the TensorBoard scalars."""
        n = len(self.keys) + 1
        header = "" if self.csv.exists() else (("%20s," * n % tuple(["epoch"] + self.keys)).rstrip(",") + "\n")
        row = ("%20.5g," * n % tuple([epoch] + [float(v) for v in vals])).rstrip(",") + "\n"
        old = b"" if header else self.csv.read_bytes()
        try:  # rewritten whole through a temporary file: a full disk cannot leave a half row in a good file
            write_atomically(self.csv, lambda f: f.write(old + (header + row).encode()))
        except OSError as e:
            raise ResultsWriteError(f"cannot write {self.csv} ({e.strerror or e}): training stopped before this "
                                    f"epoch's checkpoint, the files in {self.save_dir / 'weights'} are as the last "
                                    "epoch left them; free some space and continue with --resume.") from None
        if self.tb is not None:
            for k, v in zip(self.keys, vals):
                self.tb.add_scalar(k, float(v), epoch)
        if self.ndjson_console or self.ndjson:
            line = json.dumps({"epoch": epoch, **{k: float(v) for k, v in zip(self.keys, vals)}})
            if self.ndjson_console:
                print(line, flush=True)
            if self.ndjson:
                with open(self.ndjson, "a") as f:
                    f.write(line + "\n")

    def truncate_csv(self, epochs_done):
        """Keep the header and the first `epochs_done` rows: a resumed run rewrites the rows of the epoch that was
        killed after its CSV row but before its checkpoint (or vice versa) so the file matches the checkpoint."""
        if not self.csv.exists():
            return
        lines = self.csv.read_bytes().splitlines(keepends=True)
        write_atomically(self.csv, lambda f: f.write(b"".join(lines[:1 + max(epochs_done, 0)])))
        if self.ndjson and self.ndjson.exists():  # one line per epoch, no header
            self.ndjson.write_text("".join(self.ndjson.read_text().splitlines(keepends=True)[:max(epochs_done, 0)]))

    def on_train_end(self, plots=True, draw=None):
        """results.png (drawn by draw(what, fn, *args), a PlotJobs.submit, or here), then TensorBoard closed."""
        if plots and self.csv.exists():
            (draw or inline)("results.png", plot_results, file=self.csv)
        if self.tb is not None:
            self.tb.close()
