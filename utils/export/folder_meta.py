"""metadata.yaml, the file export.py leaves in every model folder it writes (SavedModel, Paddle, NCNN): stride,
names, and for fixed-size graphs the export's imgsz and batch."""
import yaml

from utils.atomic_files import write_text


def read_folder_meta(path):
    """-> the dict in metadata.yaml at `path`, {} when there is none (a folder written by another tool)."""
    if path.is_file():
        with open(path) as f:
            return yaml.safe_load(f) or {}
    return {}


def stride_and_names(meta):
    """(stride, names) from such a dict; (32, None) without them (names then come from --data)."""
    return (int(meta["stride"]), meta["names"]) if "stride" in meta and "names" in meta else (32, None)


def write_folder_meta(folder, metadata, im=None):
    """metadata.yaml in `folder`; with the example input `im`, also its size and batch (fixed in the graph)."""
    meta = dict(metadata)
    if im is not None:
        meta.update(imgsz=[int(x) for x in im.shape[2:]], batch=int(im.shape[0]))
    write_text(folder / "metadata.yaml", yaml.safe_dump(meta, sort_keys=False))
