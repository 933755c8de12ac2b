"""MLflow (not in official YOLOv5): one run per training, in experiment MLFLOW_EXPERIMENT_NAME (default: the
--project folder's name, "YOLOv5" for runs/train), named after the run folder, with the options and hyperparameters
as parameters, the 13 results.csv values per epoch as metrics (step = epoch), and at the end the result images,
results.csv, opt.yaml, hyp.yaml and the final model as artifacts.

Active when the package imports (`mlflow` or `mlflow-skinny`) and MLFLOW_TRACKING_URI is set, MLflow's own variable:
a local file store (`file:runs/mlflow`; MLflow >= 3.7 wants MLFLOW_ALLOW_FILE_STORE=true for it), a SQLite file
(`sqlite:///runs/mlflow.db`, needs SQLAlchemy) or a server. For a server, MLflow's own HTTP retry variables get short
defaults here (2 retries, 10 s) unless set: an unreachable server costs seconds, once (utils/loggers/guard.py)."""
import importlib.util
import os
import time
from pathlib import Path

from utils.log import LOGGER, colorstr

PREFIX = colorstr("MLflow: ")


def configured():
    if importlib.util.find_spec("mlflow") is None:
        return "not installed"
    return "" if os.environ.get("MLFLOW_TRACKING_URI") else "no MLFLOW_TRACKING_URI"


def _param(v):
    s = v if isinstance(v, (int, float, str, bool, type(None))) else str(v)
    return str(s)[:500]  # MLflow's limit on a parameter value


class MlflowLogger:
    """Through an MlflowClient and the run's id, not mlflow's module-level active run: that one is per thread, and
    the run's last calls come from another thread (utils/loggers/guard.py call_within)."""

    def __init__(self, options, hyp, save_dir):
        for k, v in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2"), ("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")):
            os.environ.setdefault(k, v)
        import mlflow
        from mlflow.entities import Param
        self.save_dir = Path(save_dir)
        self.client = client = mlflow.MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
        project = "YOLOv5" if str(options.project) == "runs/train" else Path(options.project).stem
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME", project)
        experiment = client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment else client.create_experiment(name)
        self.run_id = client.create_run(experiment_id, run_name=self.save_dir.name).info.run_id
        params = {f"opt/{k}": _param(v) for k, v in options.flags.items()}
        params.update({f"hyp/{k}": _param(v) for k, v in (hyp or {}).items()})
        client.log_batch(self.run_id, params=[Param(k, v) for k, v in params.items()])
        LOGGER.info(f"{PREFIX}logging run {self.run_id} to {os.environ['MLFLOW_TRACKING_URI']}")

    def log_epoch(self, metrics, epoch, best):
        from mlflow.entities import Metric
        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, float(v), now, epoch) for k, v in metrics.items()])

    def log_images(self, groups, epoch):
        for f in groups.get("Results", []):
            self.client.log_artifact(self.run_id, str(f), artifact_path="results")

    def finish(self, final_metrics, model_file):
        for name in ("results.csv", "opt.yaml", "hyp.yaml"):
            if (self.save_dir / name).is_file():
                self.client.log_artifact(self.run_id, str(self.save_dir / name))
        if model_file is not None:
            self.client.log_artifact(self.run_id, str(model_file), artifact_path="weights")
        self.client.set_terminated(self.run_id)
