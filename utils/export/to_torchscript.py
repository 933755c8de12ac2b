"""TorchScript: a traced graph with the official metadata in the archive's extra file config.txt
({"shape": [b, c, h, w], "stride": s, "names": {...}}), which DetectMultiBackend reads back. Saved under a
temporary name and renamed over <stem>.torchscript when complete."""
import json
import warnings

from utils.atomic_files import output_path
from utils.backend import require_pytorch


def export_torchscript(prepared, file, optimize=False):
    torch = require_pytorch("TorchScript export")
    f = file.with_suffix(".torchscript")
    with warnings.catch_warnings():  # torch 2.9+ calls torch.jit deprecated; it is the format users deploy
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        ts = torch.jit.trace(prepared.model, prepared.im, strict=False)
    meta = {"shape": list(prepared.im.shape), **prepared.metadata}
    extra_files = {"config.txt": json.dumps(meta)}
    with output_path(f) as tmp:
        if optimize:  # the mobile (lite interpreter) format
            from torch.utils.mobile_optimizer import optimize_for_mobile  # framework: the real PyTorch only
            optimize_for_mobile(ts)._save_for_lite_interpreter(str(tmp), _extra_files=extra_files)
        else:
            ts.save(str(tmp), _extra_files=extra_files)
    return f
