"""The utils package as ultralytics users import it: `from utils import TryExcept, emojis, threaded, notebook_init`.

Kept light on purpose: importing any utils module runs this file first, so nothing here loads a framework (the one
framework import is utils/backend, loaded by notebook_init only when it is called). No project module imports
these names from here; they live in utils/decorators.py and utils/log.py."""
import os
import shutil

from utils.decorators import TryExcept, threaded  # noqa: F401  (ultralytics' import path)
from utils.log import LOGGER, emojis  # noqa: F401


def notebook_init(verbose=True):
    """The tutorial notebook's first cell: logs the machine (CPUs, RAM, disk) and the device line. Installs nothing and
    removes nothing (the official one may uninstall wandb and delete Colab's sample_data folder). Returns None where
    the official returns IPython's display module."""
    from utils.device_header import select_and_log_device  # the framework loads here, not when utils is imported

    LOGGER.info("Checking setup...")
    s = ""
    if verbose:
        gib = 1 << 30
        total, _used, free = shutil.disk_usage("/")
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
        s = f"({os.cpu_count()} CPUs, {ram / gib:.1f} GB RAM, {(total - free) / gib:.1f}/{total / gib:.1f} GB disk)"
    select_and_log_device("")
    LOGGER.info(f"Setup complete ✅ {s}")
