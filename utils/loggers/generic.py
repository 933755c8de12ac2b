"""GenericLogger under ultralytics' name (`from utils.loggers import GenericLogger`), for users' training scripts
built on the official classify/train.py: results.csv rows and TensorBoard scalars, images and the model graph in
opt.save_dir. The project's own trainers log through utils.loggers.Loggers (every task, every logger).

Weights & Biases and ClearML are not reached from here ('wandb', 'clearml' in include are accepted and skipped with
one line): the cloud loggers need the run's settings that Loggers gathers; train with classify/train.py for them."""
from pathlib import Path

from utils.atomic_files import write_atomically
from utils.log import LOGGER, colorstr
from utils.loggers import tensorboard


class GenericLogger:
    def __init__(self, opt, console_logger, include=("tb", "wandb", "clearml")):
        self.save_dir = Path(opt.save_dir)
        self.include = include
        self.console_logger = console_logger
        self.csv = self.save_dir / "results.csv"
        self.tb = None
        if "tb" in include and tensorboard.available():
            prefix = colorstr("TensorBoard: ")
            console_logger.info(f"{prefix}Start with 'tensorboard --logdir {self.save_dir.parent}', view at "
                                "http://localhost:6006/")
            self.tb = tensorboard.EventWriter(self.save_dir)
        skipped = [k for k in include if k in ("wandb", "clearml")]
        if skipped:
            LOGGER.info(f"GenericLogger: {', '.join(skipped)} not logged from here (utils/loggers/generic.py)")

    def log_metrics(self, metrics, epoch):
        """One results.csv row (epoch, then the values in metrics' order; the header from the first call), the file
        rewritten whole through a temporary name; the same values as TensorBoard scalars."""
        n = len(metrics) + 1
        old = self.csv.read_bytes() if self.csv.exists() else (("%23s," * n % ("epoch", *metrics)).rstrip(",") + "\n"
                                                               ).encode()
        row = (("%23.5g," * n % (epoch, *[float(v) for v in metrics.values()])).rstrip(",") + "\n").encode()
        write_atomically(self.csv, lambda f: f.write(old + row))
        if self.tb:
            for k, v in metrics.items():
                self.tb.add_scalar(k, v, epoch)
            self.tb.flush()

    def log_images(self, files, name="Images", epoch=0):
        """The image files that exist, each as a TensorBoard image named after its file."""
        files = [Path(f) for f in (files if isinstance(files, (tuple, list)) else [files])]
        if self.tb:
            for f in files:
                if f.exists():
                    self.tb.add_image_file(f, epoch)
            self.tb.flush()

    def log_graph(self, model, imgsz=(640, 640)):
        if self.tb:
            tensorboard.log_graph(self.tb, model, imgsz)

    def log_model(self, model_path, epoch=0, metadata=None):
        """Model files go to W&B/ClearML artifacts in ultralytics; neither is reached from here (module doc)."""

    def update_params(self, params):
        """Run parameters go to W&B/ClearML in ultralytics; neither is reached from here (module doc)."""
