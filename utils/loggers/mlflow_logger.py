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
from pathlib import Path

from utils.general import LOGGER, colorstr

PREFIX = colorstr("MLflow: ")


def configured():
    if importlib.util.find_spec("mlflow") is None:
        return "not installed"
    return "" if os.environ.get("MLFLOW_TRACKING_URI") else "no MLFLOW_TRACKING_URI"


def _param(v):
    s = v if isinstance(v, (int, float, str, bool, type(None))) else str(v)
    return str(s)[:500]  # MLflow's limit on a parameter value


class MlflowLogger:
    def __init__(self, opt, hyp, save_dir):
        for k, v in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2"), ("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")):
            os.environ.setdefault(k, v)
        import mlflow
        self.mlflow, self.save_dir = mlflow, Path(save_dir)
        mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
        project = "YOLOv5" if str(opt.project) == "runs/train" else Path(opt.project).stem
        mlflow.set_experiment(os.environ.get("MLFLOW_EXPERIMENT_NAME", project))
        self.run = mlflow.start_run(run_name=Path(save_dir).name)
        params = {f"opt/{k}": _param(v) for k, v in vars(opt).items()}
        params.update({f"hyp/{k}": _param(v) for k, v in (hyp or {}).items()})
        mlflow.log_params(params)
        LOGGER.info(f"{PREFIX}logging run {self.run.info.run_id} to {mlflow.get_tracking_uri()}")

    def log_epoch(self, metrics, epoch, best):
        self.mlflow.log_metrics({k: float(v) for k, v in metrics.items()}, step=epoch)

    def log_images(self, groups, epoch):
        for f in groups.get("Results", []):
            self.mlflow.log_artifact(str(f), artifact_path="results")

    def finish(self, final_metrics, model_file):
        for name in ("results.csv", "opt.yaml", "hyp.yaml"):
            if (self.save_dir / name).is_file():
                self.mlflow.log_artifact(str(self.save_dir / name))
        if model_file is not None:
            self.mlflow.log_artifact(str(model_file), artifact_path="weights")
        self.mlflow.end_run()
