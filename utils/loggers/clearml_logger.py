"""ClearML, as official YOLOv5 logs a training run: a task in project "YOLOv5" (or --project when it is not under
runs/) named after the run ("Training" for exp), tagged YOLOv5, the hyperparameters and options connected, the 13
results.csv values per epoch as scalars (title/series split at the '/'), the label and result images as plots, the
mosaics and validation images as debug samples, the final metrics as single values and the final model as the
task's output model.

Active when the package imports and is configured: a clearml.conf (`clearml-init`, or CLEARML_CONFIG_FILE), the
CLEARML_API_ACCESS_KEY / CLEARML_API_SECRET_KEY variables, or CLEARML_OFFLINE_MODE=1, ClearML's offline mode: the
session is then a folder (and a zip) under ClearML's cache, ~/.clearml/cache/offline/, imported later with
`Task.import_offline_session`."""
import importlib.util
import os
import re
from pathlib import Path

import cv2

from utils.log import colorstr

PREFIX = colorstr("ClearML: ")
ROOT = Path(__file__).resolve().parents[2]  # the repository


def _offline():
    return os.environ.get("CLEARML_OFFLINE_MODE", "").lower() in ("1", "true", "yes", "on")


def configured():
    if importlib.util.find_spec("clearml") is None:
        return "not installed"
    if _offline() or os.environ.get("CLEARML_API_ACCESS_KEY"):
        return ""
    conf = os.environ.get("CLEARML_CONFIG_FILE") or os.environ.get("TRAINS_CONFIG_FILE")
    if any(Path(p).expanduser().is_file() for p in (conf, "~/clearml.conf", "~/trains.conf") if p):
        return ""
    return "no clearml.conf (`clearml-init`), CLEARML_API_ACCESS_KEY or CLEARML_OFFLINE_MODE=1"


class ClearmlLogger:
    def __init__(self, options, hyp, save_dir):
        from clearml import Task
        if _offline():
            Task.set_offline(True)
        # The task's requirements are the project's requirements.txt (what a ClearML agent needs to rerun it), not
        # ClearML's scan of every import under the repository: that scan ran into its 300 s limit at close() here.
        Task.force_requirements_env_freeze(force=True, requirements_file=str(ROOT / "requirements.txt"))
        # Reports from a thread, not from ClearML's forked reporter process: in a trainer (signal watcher, plot
        # helpers, loader workers) that child hung joining its threads and close() waited for it forever. The
        # setting (sdk.development.report_use_subprocess) has no variable, hence the class attribute it is read into.
        Task._report_subprocess_enabled = False
        self.task = Task.init(
            project_name="YOLOv5" if str(options.project).startswith("runs/") else str(options.project),
            task_name=options.name if options.name != "exp" else "Training", tags=["YOLOv5"],
            output_uri=None if _offline() else True, reuse_last_task_id=bool(options.exist_ok),
            # scalars are reported here, not captured from TensorBoard; models and plots are reported explicitly
            auto_connect_frameworks={"pytorch": False, "matplotlib": False, "tensorboard": False},
            auto_connect_arg_parser=False)
        self.task.connect(dict(hyp or {}), name="Hyperparameters")
        self.task.connect({k: v if isinstance(v, (int, float, str, bool, type(None))) else str(v)
                           for k, v in options.flags.items()}, name="Args")
        self.logger = self.task.get_logger()

    def log_epoch(self, metrics, epoch, best):
        for k, v in metrics.items():
            title, series = k.split("/", 1)
            self.logger.report_scalar(title, series, float(v), epoch)

    def log_images(self, groups, epoch):
        for title, files in groups.items():
            for f in files:
                im = cv2.imread(str(f))
                if im is None:
                    continue
                if title in ("Labels", "Results"):  # official: as plots, titled by the file name
                    self.logger.report_image(title=f.stem, series=f.name, iteration=epoch, image=im[..., ::-1])
                else:  # official: debug samples, one series per batch number
                    it = re.search(r"_batch(\d+)", f.name)
                    n = int(it.group(1)) if it else 0
                    self.logger.report_image(title=title, series=f.name.replace(f"_batch{n}", ""), iteration=n,
                                             local_path=str(f))

    def _save_model(self, path, name):
        if _offline():  # ClearML's offline mode cannot record output models (2.1: 'DummyModel'...): an artifact then
            self.task.upload_artifact(name, artifact_object=str(path), wait_on_upload=True)
        else:
            self.task.update_output_model(model_path=str(path), name=name, auto_delete_file=False)

    def log_checkpoint(self, last, epoch, fitness, best):
        self._save_model(last, "Latest Model")

    def finish(self, final_metrics, model_file):
        for k, v in final_metrics.items():
            self.logger.report_single_value(k, float(v))
        if model_file is not None:
            self._save_model(model_file, "Best Model" if Path(model_file).name == "best.pt" else "Last Model")
        self.task.close()
