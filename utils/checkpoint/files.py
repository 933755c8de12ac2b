"""Saving and loading checkpoint files: the ultralytics/PyTorch format for writing, every known format for reading."""
import pathlib

from utils.atomic_files import ZIP_MAGIC
from utils.checkpoint.encoder import ValueEncoder
from utils.checkpoint.kind import check_detection_kind
from utils.checkpoint.legacy_yolov5ck import is_legacy_checkpoint, load_legacy_checkpoint
from utils.checkpoint.materialize import Materializer, use_exact_copies
from utils.checkpoint.pickle_writer import PickleWriter
from utils.checkpoint.records import DAMAGED_REMEDY, CheckpointError, ModelRecord
from utils.checkpoint.torch_reader import read_pytorch_file
from utils.checkpoint.zip_writer import archive_name, atomic_write, torch_zip_records, write_zip

_ZIP_END_MAGICS = (b"PK\x05\x06",)


def encode_checkpoint(obj, name="archive", build_model=None):
    """obj -> the bytes torch.save(obj) would write (with module objects in the official layout)."""
    enc = ValueEncoder(build_model)
    tree = enc.encode(obj)
    data = PickleWriter().dumps(tree)
    return data, enc.storages, name


def save_checkpoint(obj, path, *also, build_model=None):
    """Write obj (nested dicts/lists/tuples of tensors, numpy arrays, numbers, strings, Namespaces, Paths, modules
    -- ``encoder.Half(module)`` for fp16 --) as a PyTorch zip archive that ``torch.load`` and the official YOLOv5
    code read, to path and to each path in also (encoded once: last.pt and best.pt of one epoch). Everything is
    encoded before a file is touched, then written atomically: a temporary file in the same folder is fsynced and
    renamed over the path, so a failed or interrupted save leaves the previous checkpoint as it was. Returns what
    the first write returned (the path written). A :class:`ModelRecord` in obj is written as the model
    ``build_model(record, source)`` makes of it (models.from_record.build_model)."""
    data, storages, _ = encode_checkpoint(obj, build_model=build_model)
    written = []
    for p in (path, *also):
        p = pathlib.Path(p)
        records = torch_zip_records(data, storages, archive_name(p))  # the archive's folder is the file's stem
        written.append(atomic_write(p, lambda f, records=records: write_zip(f, records)))
    return written[0]


def is_own_checkpoint(path):
    """A file of the project's earlier 'YOLOv5CK' format."""
    return is_legacy_checkpoint(path)


def is_official_pt(path):
    """A PyTorch file: a zip archive (torch>=1.6) or a legacy pickle (starts with a pickle protocol opcode)."""
    with open(path, "rb") as f:
        head = f.read(4)
    return head[:4] == ZIP_MAGIC or head[:1] == b"\x80"


def _check_zip_complete(path):
    """A zip whose end record is missing was cut short (an interrupted copy or save): say so plainly."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - 65557))  # the end record lies within the last 22 + 65535 (comment) bytes
        tail = f.read()
    if not any(m in tail for m in _ZIP_END_MAGICS):
        raise CheckpointError(f"{path} is truncated or not a checkpoint ({size} bytes, no zip end record: the copy or "
                              f"save did not finish); {DAMAGED_REMEDY}")


def load_checkpoint(path, map_location=None, tensors=True, build_models=None):
    """Read a checkpoint: this project's or official ultralytics ``.pt`` (PyTorch zip or legacy format), or the
    project's earlier 'YOLOv5CK' format. Never runs code from the file.

    tensors=True gives framework tensors (on ``map_location`` if given) through ``utils.backend``; False leaves
    numpy arrays (no framework needed). Stored YOLOv5 models come back as :class:`ModelRecord` (numpy state
    dict), or as what the ``build_models(record, source)`` callable makes of them (models.from_record.build_model:
    float32 ``DetectionModel``s): with this project's exact fp32 weights when the file keeps them, else in the
    stored dtype (fp16 for official files)."""
    path = pathlib.Path(path)
    if is_legacy_checkpoint(path):
        return load_legacy_checkpoint(path, map_location=map_location, tensors=tensors, build_models=build_models)
    if not is_official_pt(path):
        raise CheckpointError(f"{path}: not a YOLOv5 checkpoint: neither a checkpoint of this project nor a "
                              "PyTorch/ultralytics .pt file")
    with open(path, "rb") as f:
        is_zip = f.read(4) == ZIP_MAGIC
    if is_zip:
        _check_zip_complete(path)
        check_detection_kind(path)  # a segmentation / classification / YOLOv8 file: say so, not "refusing global"
    obj = use_exact_copies(read_pytorch_file(path))
    convert = Materializer(tensors=tensors, build_models=build_models, map_location=map_location, source=str(path))
    try:
        return convert(obj)
    except CheckpointError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        raise CheckpointError(f"{path}: unexpected checkpoint structure ({type(e).__name__}: {e})") from e


def read_official_pt(path):
    """Any PyTorch/ultralytics ``.pt`` as plain data, no framework needed: ``model`` and ``ema`` are
    :class:`ModelRecord` (or None) with numpy state dicts in the stored dtype (fp16 for release files)."""
    obj = load_checkpoint(path, tensors=False)
    if isinstance(obj, ModelRecord):  # a bare pickled model (torch.save(model))
        obj = {"model": obj}
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: holds a {type(obj).__name__}, expected a checkpoint dict")
    obj.setdefault("ema", None)
    obj.setdefault("epoch", -1)
    obj.setdefault("best_fitness", None)
    return obj


def load_any(path, map_location=None, tensors=False, build_models=None):
    """Any checkpoint -> a dict. Defaults give plain data (numpy, ModelRecord) for every format, so callers such
    as ``attempt_load`` need no branch on the file type."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if is_legacy_checkpoint(path):
        return load_legacy_checkpoint(path, map_location=map_location, tensors=tensors, build_models=build_models)
    if is_official_pt(path) and not tensors and not build_models:
        return read_official_pt(path)
    return load_checkpoint(path, map_location=map_location, tensors=tensors, build_models=build_models)
