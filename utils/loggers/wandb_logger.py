"""Weights & Biases, as official YOLOv5 logs a training run: one run named after the run folder (project "YOLOv5" for
the default runs/train, else the --project folder's name; --entity), the options and hyperparameters as its config,
the 13 results.csv values per epoch, best/* in the summary, the label, mosaic, validation and result images, and the
final model as an artifact (every --save-period epochs too).

Active when the package imports and can log without asking anything: WANDB_API_KEY or a `wandb login` (netrc), or
WANDB_MODE=offline (files under ./wandb/, uploaded later with `wandb sync`). WANDB_MODE=disabled turns it off."""
import importlib.util
import netrc
import os
from pathlib import Path

from utils.log import LOGGER, colorstr

PREFIX = colorstr("wandb: ")


def configured():
    """'' when W&B can log here without a prompt or a network check, else what is missing."""
    if importlib.util.find_spec("wandb") is None:
        return "not installed"
    mode = os.environ.get("WANDB_MODE", "").lower()
    if mode == "disabled":
        return "WANDB_MODE=disabled"
    if mode in ("offline", "dryrun") or os.environ.get("WANDB_API_KEY"):
        return ""
    try:  # what `wandb login` writes; read here so that no login prompt can block a run
        if netrc.netrc().authenticators(os.environ.get("WANDB_BASE_URL", "api.wandb.ai").split("//")[-1]):
            return ""
    except (OSError, netrc.NetrcParseError):
        pass
    return "no WANDB_API_KEY, `wandb login` or WANDB_MODE=offline"


def project_name(project):
    """Official: the default runs/train logs to project "YOLOv5", anything else to its folder's name."""
    return "YOLOv5" if str(project) == "runs/train" else Path(project).stem


class WandbLogger:
    def __init__(self, options, hyp, save_dir):
        import wandb
        self.wandb, self.options = wandb, options
        config = {**options.flags, "hyp": dict(hyp or {})}
        settings = wandb.Settings(init_timeout=30, silent=True)  # an unreachable service: one timeout, then Guarded
        self.run = wandb.run or wandb.init(config=config, resume="allow", project=project_name(options.project),
                                           entity=options.entity,
                                           name=options.name if options.name != "exp" else None,
                                           job_type="Training", allow_val_change=True, settings=settings)
        # --bbox_interval -1: every tenth of the run (official), every epoch for short runs
        self.bbox_interval = options.bbox_interval if options.bbox_interval != -1 else max(options.epochs // 10, 1)

    def log_epoch(self, metrics, epoch, best):
        if best:
            for k, v in zip(("best/epoch", "best/precision", "best/recall", "best/mAP_0.5", "best/mAP_0.5:0.95"),
                            (epoch, *list(metrics.values())[3:7])):
                self.run.summary[k] = v
        self.run.log(dict(metrics))

    def log_images(self, groups, epoch):
        """groups: {"Labels": [files], "Mosaics": [...], "Validation": [...], "Results": [...]} (official keys)."""
        media = {title: [self.wandb.Image(str(f), caption=f.name) for f in files] for title, files in groups.items()
                 if files}
        if media:
            self.run.log(media)

    def log_checkpoint(self, last, epoch, fitness, best):
        """--save-period: last.pt as an artifact with the official metadata and aliases."""
        art = self.wandb.Artifact(f"run_{self.run.id}_model", type="model", metadata={
            "original_url": str(last.parent), "epochs_trained": epoch + 1, "save period": self.options.save_period,
            "project": str(self.options.project), "total_epochs": self.options.epochs,
            "fitness_score": float(fitness)})
        art.add_file(str(last), name="last.pt")
        self.run.log_artifact(art, aliases=["latest", "last", f"epoch {epoch + 1}"] + (["best"] if best else []))
        LOGGER.info(f"{PREFIX}saving model artifact on epoch {epoch + 1}")

    def finish(self, final_metrics, model_file):
        self.run.log(dict(final_metrics))
        if model_file is not None:
            self.run.log_artifact(str(model_file), type="model", name=f"run_{self.run.id}_model",
                                  aliases=["latest", "best", "stripped"])
        self.run.finish()
