"""NCNN (<stem>_ncnn_model/: model.ncnn.param, model.ncnn.bin, metadata.yaml, the folder layout ultralytics uses),
converted by pnnx from the traced TorchScript graph. Not an official yolov5 format; Tencent's runtime for phones and
embedded CPUs. pnnx and the ncnn runtime come with the converters' environment (`make setup-tf`). pnnx works in a
temporary folder; its files are installed into the model folder only when complete (utils/atomic_files.output_folder),
so a failed conversion leaves the earlier folder as it was."""
import shutil
import subprocess
import tempfile
from pathlib import Path

from utils.atomic_files import output_folder
from utils.child_processes import child_preexec
from utils.export.folder_meta import write_folder_meta
from utils.export.prepare import ExportError

HALF_REFUSAL = "NCNN export is written in fp32: drop --half"


def export_ncnn(prepared, file):
    try:
        import pnnx
    except ImportError as e:
        raise ExportError(f"NCNN export needs pnnx ({e}): build the converters' environment with `make setup-tf` and "
                          "export with .venv-tf/bin/python export.py") from None
    from utils.export.to_torchscript import export_torchscript
    if str(prepared.im.dtype) != "torch.float32":
        raise ExportError(HALF_REFUSAL)
    d = file.with_name(f"{file.stem}_ncnn_model")
    with tempfile.TemporaryDirectory() as tmp:
        ts = export_torchscript(prepared, Path(tmp) / "model.pt")
        shape = ",".join(str(int(x)) for x in prepared.im.shape)
        # pnnx writes model.ncnn.param/.bin (and its own intermediate files) beside its input
        p = subprocess.run([pnnx.EXEC_PATH, str(ts), f"inputshape=[{shape}]"], cwd=tmp, capture_output=True,
                           text=True, preexec_fn=child_preexec())  # ends with this process, however it ends
        param, binary = Path(tmp) / "model.ncnn.param", Path(tmp) / "model.ncnn.bin"
        if p.returncode != 0 or not param.is_file():
            tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or [f"exit status {p.returncode}"]
            raise ExportError(f"pnnx failed: {tail[0]}")
        with output_folder(d) as out:
            shutil.move(str(param), out / param.name)
            shutil.move(str(binary), out / binary.name)
            write_folder_meta(out, prepared.metadata, prepared.im)
    return d
