"""Export a checkpoint to every format, validate each on --data, and print the table (ultralytics/yolov5 flags).

Usage:
    python benchmarks.py --weights yolov5n.pt --img 320
    python benchmarks.py --weights yolov5n.pt --img 320 --test          # export only: which formats write
    python benchmarks.py --weights yolov5n.pt --img 320 --hard-fail 0.2 # exit 1 when a format's mAP50-95 < 0.2

Each format is validated as ultralytics does it (val.run task='speed': square letterboxed batches, so the .pt row
and the exports see the same pixels). The formats of the converters' environment (CoreML, TensorFlow, Paddle, NCNN)
export and run in .venv-tf (`make setup-tf`); run the benchmark there for every row:
    YOLO_BACKEND=torch .venv-tf/bin/python benchmarks.py --weights yolov5n.pt --img 320
A format that cannot export or run here gets an empty row and one line saying why (TensorRT needs an NVIDIA GPU, Edge
TPU its compiler, CoreML inference macOS, TF.js a JavaScript runtime). The table is also written as CSV to
runs/benchmarks/<weights stem>.csv. --hard-fail: a failed format exits 1; --hard-fail FLOOR: so does any mAP50-95
below FLOOR.

A segmentation checkpoint is validated by segment/val.py and its row shows the mask mAP50-95, as official:
    python benchmarks.py --weights yolov5n-seg.pt --data coco128-seg.yaml --img 320
(it exports to TorchScript, ONNX and OpenVINO; the other rows say so). Classification checkpoints are one line:
official benchmarks.py does not validate them either; run classify/val.py on each export.
"""
import argparse
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from utils.errors import UserError  # noqa: E402
from utils.signals import exit_on_user_error  # noqa: E402
from utils.export.formats import FORMATS, NCNN_FORMAT  # noqa: E402
from utils.log import LOGGER  # noqa: E402
from utils.run_header import print_args  # noqa: E402

COLUMNS = ["Format", "Size (MB)", "mAP50-95", "Inference time (ms)"]


class BenchmarkFailure(UserError):
    pass


def _size_mb(path):
    p = Path(path)
    files = [f for f in p.rglob("*") if f.is_file()] if p.is_dir() else [p]
    return sum(f.stat().st_size for f in files) / 1e6


def _not_run_here(argument, device):
    """Why a format is not validated on this machine, or None."""
    if argument == "edgetpu":
        return "Edge TPU models need Google's edgetpu_compiler and an Edge TPU"
    if argument == "engine" and device.type != "cuda":
        return "TensorRT needs an NVIDIA GPU"
    if argument == "tfjs":
        return "TF.js models run in a browser or Node.js, not in Python (export only)"
    if argument == "coreml" and platform.system() != "Darwin":
        return "CoreML inference needs macOS (export only)"
    return None


def _pick(written, suffix):
    """The file export.run wrote for a format (TFLite: the official fp16 file)."""
    suffix = "-fp16.tflite" if suffix == ".tflite" else suffix
    return next((w for w in written if str(w).endswith(suffix) and not str(w).endswith("_edgetpu.tflite")), None)


def run(weights=ROOT / "yolov5s.pt", imgsz=640, batch_size=1, data=ROOT / "data/coco128.yaml", device="", half=False,
        test=False, pt_only=False, hard_fail=False):
    """Returns the table as a pandas DataFrame (the official columns; --test: Format, Export)."""
    import export
    from utils.device_header import select_and_log_device
    t = time.time()
    device = select_and_log_device(device)  # the official 'YOLOv5 🚀 ...' line
    weights = Path(weights)
    validate, metric = _validation_of(weights)
    rows = [(f[0], f[1], f[2]) for f in (*FORMATS, NCNN_FORMAT)]  # (name, --include argument, suffix)
    wanted = [] if pt_only else [a for _, a, _ in rows[1:] if a not in ("engine", "edgetpu") or device.type == "cuda"]
    # Two export.run calls: Paddle alone first, validated before anything loads TensorFlow (Paddle cannot load into a
    # process that has it); then every other format in one call (SavedModel, GraphDef and TFLite share a conversion).
    first = [r for r in rows if r[1] in ("-", "paddle")]
    rest = [r for r in rows if r not in first]
    written, exported = [], set()
    table, failures = {}, []
    for name, argument, suffix in first + rest:
        if pt_only and argument != "-":
            continue
        group = [a for _, a, _ in (first if (name, argument, suffix) in first else rest)
                 if a in wanted and a not in exported]
        if group:
            written += export.run(weights=weights, imgsz=[imgsz], include=group, half=half, data=data,
                                  device=device.type if device.type == "cpu" else device.index)
            exported.update(group)
        w = weights if argument == "-" else _pick(written, suffix)
        why = None if argument == "-" or w else "export failed (its line above says why)"
        if test:
            table[name] = [name, "✅" if w else "❌"]
            if why and argument in wanted:
                failures.append(f"{name}: {why}")
            continue
        why = why or _not_run_here(argument, device)
        if why is None:
            table[name], why = _validated_row(name, w, validate, metric, data, batch_size, imgsz, device, half)
            if why is None:
                continue
        LOGGER.warning(f"WARNING ⚠️ Benchmark failure for {name}: {why}")
        if argument in wanted or argument == "-":
            failures.append(f"{name}: {why}")
        table[name] = [name, round(_size_mb(w), 1) if w else None, None, None]
    table = _saved_table([table[r[0]] for r in rows if r[0] in table], weights, test, t)
    if hard_fail:
        _hard_fail(table, failures, hard_fail, test)
    return table


def _validation_of(weights):
    """(validate, index of its mAP50-95 in the results): val.py's run for detection models, segment/val.py's for
    segmentation ones, as official picks them; a classifier is refused in one line."""
    import val
    from models.experimental import attempt_load
    from models.tasks import model_task
    from segment import val as segment_val
    if not weights.is_file():
        raise UserError(f"--weights {weights}: file not found; pass the path of a .pt checkpoint")
    task = model_task(attempt_load(weights, fuse=False))  # which validation runs, as official picks it
    if task == "classify":
        raise UserError(f"--weights {weights}: a classification model; benchmarks.py validates detection and "
                        "segmentation models (as official): export it with export.py and run classify/val.py on "
                        "each file")
    return (segment_val.run, 7) if task == "segment" else (val.run, 3)  # mask / box mAP50-95


def _validated_row(name, w, validate, metric, data, batch_size, imgsz, device, half):
    """(the table row of file w validated on data, None), or (None, why) when its validation fails."""
    try:
        results, _, speed = validate(data, w, batch_size, imgsz, plots=False, device=device, task="speed",
                                     half=half, project=ROOT / "runs" / "benchmarks", name="val", exist_ok=True)
        return [name, round(_size_mb(w), 1), round(float(results[metric]), 4), round(float(speed[1]), 2)], None
    except Exception as e:  # one line per format, as ultralytics; the table goes on
        return None, str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _saved_table(rows, weights, test, t):
    """The rows as a DataFrame, logged and saved to runs/benchmarks/<weights>[_export].csv."""
    import pandas as pd
    table = pd.DataFrame(rows, columns=["Format", "Export"] if test else COLUMNS)
    LOGGER.info(f"\nBenchmarks complete ({time.time() - t:.2f}s)\n{table.to_string(index=False)}")
    out = ROOT / "runs" / "benchmarks" / f"{weights.stem}{'_export' if test else ''}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    LOGGER.info(f"Table saved to {out}")
    return table


def _hard_fail(table, failures, hard_fail, test):
    # formats that cannot run on this machine by their nature (macOS, browsers, Edge TPU) are not failures
    failures = [f for f in failures if not any(k in f for k in ("needs macOS", "browser", "Edge TPU", "NVIDIA GPU"))]
    if failures:
        raise BenchmarkFailure(f"--hard-fail: {len(failures)} format(s) failed: {'; '.join(failures)}")
    if isinstance(hard_fail, str) and not test:
        floor = float(hard_fail)
        low = table[table["mAP50-95"].notna() & (table["mAP50-95"] < floor)]
        if len(low):
            names = ", ".join(f"{r.Format} {r['mAP50-95']}" for _, r in low.iterrows())
            raise BenchmarkFailure(f"--hard-fail {floor}: mAP50-95 below the floor for {names}")


def _hard_fail_arg(value):
    """--hard-fail alone is True; with a value it is the mAP50-95 floor (a number, checked here)."""
    if value is True:
        return True
    try:
        float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number: pass the mAP50-95 floor, e.g. --hard-fail "
                                         "0.25") from None
    return value


def parse_opt(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", type=str, default=ROOT / "yolov5s.pt", help="weights path")
    parser.add_argument("--imgsz", "--img", "--img-size", type=int, default=640, help="inference size (pixels)")
    parser.add_argument("--batch-size", type=int, default=1, help="batch size")
    parser.add_argument("--data", type=str, default=ROOT / "data/coco128.yaml", help="dataset.yaml path")
    parser.add_argument("--device", default="", help="cuda device, i.e. 0 or 0,1,2,3 or cpu")
    parser.add_argument("--half", action="store_true", help="use FP16 half-precision inference")
    parser.add_argument("--test", action="store_true", help="test exports only")
    parser.add_argument("--pt-only", action="store_true", help="test PyTorch only")
    parser.add_argument("--hard-fail", nargs="?", const=True, default=False, type=_hard_fail_arg,
                        help="Exception on error or < min metric")
    opt = parser.parse_args(argv)
    print_args(vars(opt))  # official: the arguments line as soon as they are parsed
    return opt


def main(opt):
    run(**vars(opt))


if __name__ == "__main__":
    with exit_on_user_error("benchmarks"):
        main(parse_opt())
