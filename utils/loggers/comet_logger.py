"""Comet, as official YOLOv5 logs a training run: an experiment named after the run, "Created from YOLOv5", the
options and hyperparameters as parameters, hyperparameters.json, opt.yaml and the data YAML as assets, the 13
results.csv values per epoch, the label plots, the result images, results.csv and (with --save-period, or
COMET_MODEL_NAME's model each period) the checkpoints; --upload_dataset (or COMET_UPLOAD_DATASET=true) the dataset as
an artifact.

Comet's own variables are read as official: COMET_MODE (online/offline), COMET_PROJECT_NAME (default "yolov5"),
COMET_MODEL_NAME, COMET_UPLOAD_DATASET, COMET_LOG_BATCH_METRICS with COMET_BATCH_LOGGING_INTERVAL. Active when the
package imports and COMET_API_KEY (or a Comet config file) holds a key, or COMET_MODE=offline: the experiment is
then an archive under COMET_OFFLINE_DIRECTORY (default .cometml-runs), uploaded later with `comet upload`. Online
without credentials official falls back to offline: so does this (one line)."""
import importlib.util
import os
from pathlib import Path

from utils.log import LOGGER, colorstr

PREFIX = colorstr("Comet: ")


def _flag(name, default="false"):
    return os.environ.get(name, default).lower() == "true"


def configured():
    if importlib.util.find_spec("comet_ml") is None:
        return "not installed"
    if os.environ.get("COMET_MODE", "").lower() == "offline" or os.environ.get("COMET_API_KEY"):
        return ""
    config = Path(os.environ.get("COMET_CONFIG", Path.home() / ".comet.config"))
    if config.is_file() and "api_key" in config.read_text(errors="ignore"):
        return ""
    return "no COMET_API_KEY, Comet config file or COMET_MODE=offline"


class CometLogger:
    def __init__(self, options, hyp, save_dir):
        import comet_ml
        self.comet_ml, self.options, self.hyp, self.save_dir = comet_ml, options, dict(hyp or {}), Path(save_dir)
        self.model_name = os.environ.get("COMET_MODEL_NAME", "yolov5")
        self.save_model = options.save_period > -1  # official: checkpoints only with --save-period
        self.upload_dataset = options.upload_dataset or _flag("COMET_UPLOAD_DATASET")
        self.log_batch_metrics = _flag("COMET_LOG_BATCH_METRICS")
        self.batch_interval = int(os.environ.get("COMET_BATCH_LOGGING_INTERVAL", "1"))
        kwargs = dict(project_name=os.environ.get("COMET_PROJECT_NAME", "yolov5"), log_code=False,
                      log_env_gpu=True, log_env_cpu=True)
        if os.environ.get("COMET_MODE", "online").lower() == "offline":
            self.experiment = comet_ml.OfflineExperiment(**kwargs)
        else:
            try:
                self.experiment = comet_ml.Experiment(**kwargs)
            except ValueError:  # no credentials after all: offline, as official
                LOGGER.info(f"{PREFIX}no credentials, logging offline (upload later with `comet upload`)")
                self.experiment = comet_ml.OfflineExperiment(**kwargs)
        e = self.experiment
        e.set_name(options.name)
        e.log_other("Created from", "YOLOv5")
        e.log_parameters({k: v if isinstance(v, (int, float, str, bool, type(None))) else str(v)
                          for k, v in options.flags.items()})
        e.log_parameters(self.hyp)
        e.log_asset_data(self.hyp, name="hyperparameters.json", metadata={"type": "hyp-config-file"})
        if (self.save_dir / "opt.yaml").is_file():
            e.log_asset(str(self.save_dir / "opt.yaml"), metadata={"type": "opt-config-file"})
        if Path(str(options.data)).is_file():
            e.log_asset(str(options.data), metadata={"type": "data-config-file"})
        e.log_others({"comet_mode": os.environ.get("COMET_MODE", "online"), "comet_model_name": self.model_name,
                      "comet_log_batch_metrics": self.log_batch_metrics})

    def log_batch(self, metrics, step):
        """COMET_LOG_BATCH_METRICS=true only, on the steps whose losses the trainer read back anyway."""
        self.experiment.curr_step = step
        if self.log_batch_metrics and step % self.batch_interval == 0:
            self.experiment.log_metrics(metrics, step=step)

    def log_epoch(self, metrics, epoch, best):
        self.experiment.curr_epoch = epoch
        self.experiment.log_metrics(metrics, epoch=epoch)

    def log_dataset(self, data):
        """--upload_dataset ("val": that split only): the images and labels of each split as one dataset artifact."""
        if not self.upload_dataset:
            return
        from utils.data.files import img2label_paths  # utils.data loads the framework: only --upload_dataset needs it
        artifact = self.comet_ml.Artifact(name=data.get("dataset_name", "yolov5-dataset"), artifact_type="dataset",
                                          metadata={k: str(v) for k, v in data.items()})
        root = Path(data.get("path", "."))
        for split in ("train", "val", "test"):
            if data.get(split) is None or (isinstance(self.upload_dataset, str) and split != self.upload_dataset):
                continue
            folders = data[split] if isinstance(data[split], list) else [data[split]]
            images = sorted(f for d in folders if Path(d).is_dir() for f in Path(d).iterdir() if f.is_file())
            for im, lb in zip(images, img2label_paths([str(f) for f in images])):
                for f in (im, Path(lb)):
                    if f.is_file():
                        artifact.add(str(f), logical_path=os.path.relpath(f, root), metadata={"split": split})
        self.experiment.log_artifact(artifact)

    def log_images(self, groups, epoch):
        for title, files in groups.items():
            if title in ("Labels", "Results"):  # official: the label plots at start, the result images at the end
                for f in files:
                    self.experiment.log_asset(str(f), metadata={"epoch": epoch})

    def log_checkpoint(self, last, epoch, fitness, best):
        if self.save_model:
            meta = {"fitness_score": float(fitness), "epochs_trained": epoch + 1,
                    "save_period": self.options.save_period, "total_epochs": self.options.epochs}
            for f in sorted(Path(last).parent.glob("*.pt")):
                self.experiment.log_model(self.model_name, file_or_folder=str(f), file_name=f.name, metadata=meta,
                                          overwrite=True)

    def finish(self, final_metrics, model_file):
        csv = self.save_dir / "results.csv"
        if csv.is_file():
            self.experiment.log_asset(str(csv))
        if self.save_model and model_file is not None:
            self.experiment.log_model(self.model_name, file_or_folder=str(model_file), file_name=Path(model_file).name,
                                      overwrite=True)
        self.experiment.end()
