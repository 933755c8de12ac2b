"""LogOptions: the flags the loggers act on, typed and frozen (made at the engine's door from the run's
RecordedFlags, utils/checkpoint/run_options.py); the loggers never see the argparse namespace."""
import dataclasses
from typing import Any, Optional

from utils.checkpoint.run_options import RecordedFlags, typed_options

# Flags of the official cloud integrations, with their defaults: --entity (W&B), --upload_dataset (Comet),
# --bbox_interval (W&B, Comet, ClearML image intervals), --artifact_alias (accepted; unused by official too).
CLOUD_FLAGS = {"entity": None, "upload_dataset": False, "bbox_interval": -1, "artifact_alias": "latest"}


@dataclasses.dataclass(frozen=True)
class LogOptions:
    """Defaults are official train.py's (or off) for a script without the flag."""
    ndjson_console: bool = False  # one JSON line per epoch on stdout
    ndjson_file: bool = False  # ... and in results.ndjson
    resume: bool = False  # a resumed run continues its results files
    evolve: bool = False  # a generation of --evolve: no TensorBoard, no model to the loggers
    sync_bn: bool = False  # no model graph (official)
    save_period: int = -1
    epochs: int = 100
    project: str = "runs/train"
    name: str = "exp"
    exist_ok: bool = False
    data: str = ""
    entity: Optional[str] = None
    upload_dataset: Any = False  # True or 'val'
    bbox_interval: int = -1
    artifact_alias: str = "latest"
    flags: RecordedFlags = dataclasses.field(default_factory=RecordedFlags)  # every flag: the loggers' run config

    @classmethod
    def of(cls, flags):
        """From the run's RecordedFlags (or any mapping of flag names to values)."""
        return dataclasses.replace(typed_options(cls, flags), flags=RecordedFlags(flags))

    def cloud_flags(self):
        """{flag: value} of the official cloud integrations' flags."""
        return {k: getattr(self, k) for k in CLOUD_FLAGS}
