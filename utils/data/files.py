"""Image and label files: which files a dataset path means, where each image's label file is, and image sizes as
the EXIF orientation tag displays them.

Only regular files are opened as images and labels: a FIFO named like an image (x.jpg made by mkfifo) blocks the
first read of it for good, and a device can return data without end. Listings skip such files with one warning
naming them (drop_special_files); readers open through open_regular_file, which refuses them without blocking."""
import errno
import glob
import logging
import os
import stat
from pathlib import Path

from PIL import ExifTags, ImageOps

IMG_FORMATS = "bmp", "dng", "jpeg", "jpg", "mpo", "png", "tif", "tiff", "webp", "pfm"
VID_FORMATS = "asf", "avi", "gif", "m4v", "mkv", "mov", "mp4", "mpeg", "mpg", "ts", "wmv"
NUM_THREADS = min(8, max(1, (os.cpu_count() or 1) - 1))
WARN = "WARNING ⚠️"
HELP_URL = "See https://docs.ultralytics.com/yolov5/tutorials/train_custom_data"

ORIENTATION_TAG = next((k for k, v in ExifTags.TAGS.items() if v == "Orientation"), 274)
TRANSPOSING_ORIENTATIONS = (5, 6, 7, 8)  # EXIF orientations whose display swaps width and height


class NotRegularFileError(OSError):
    """A path that is a FIFO, socket, device or folder where a file's data is expected."""


def _kind(mode):
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def is_regular_file(path):
    """True for a regular file (or a link to one); False for anything else, or a path that cannot be examined."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def special_file_kind(path):
    """What an EXISTING non-regular path is ('a FIFO (named pipe)', ...), or None: a regular file, or a path that
    does not exist (the reader reports that one as missing)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(mode) else _kind(mode)


def open_regular_file(path, mode="rb", **kwargs):
    """open(path, mode) for reading, refused with NotRegularFileError (naming the path and what it is) unless path is
    a regular file. Decided on the opened descriptor: opening does not block on a FIFO (O_NONBLOCK), and a file
    swapped for a FIFO after a listing is still refused."""
    if any(c in mode for c in "wax+"):
        raise ValueError(f"open_regular_file reads only (mode {mode!r})")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            raise NotRegularFileError(errno.EINVAL, f"{path} is {_kind(st_mode)}, not a regular file: remove it or "
                                                    "replace it with a file", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def drop_special_files(files, prefix=""):
    """files without those that exist but are not regular files (FIFOs, sockets, devices), with one warning naming
    them; paths that do not exist stay, for the reader to report as missing."""
    kept, dropped = [], []
    for f in files:
        kind = special_file_kind(f)
        (dropped if kind else kept).append((f, kind))
    if dropped:
        shown = ", ".join(f"{f} ({k})" for f, k in dropped[:3]) + (f" and {len(dropped) - 3} more"
                                                                     if len(dropped) > 3 else "")
        logging.getLogger("yolov5").warning(f"{prefix}{WARN} skipped {len(dropped)} path(s) that are not regular "
                                            f"files (only files are read as images or videos): {shown}")
    return [f for f, _ in kept]


def img2label_paths(img_paths):
    """/images/ -> /labels/ and the extension -> .txt (last /images/ in the path, like ultralytics)."""
    sa, sb = f"{os.sep}images{os.sep}", f"{os.sep}labels{os.sep}"
    return [sb.join(x.rsplit(sa, 1)).rsplit(".", 1)[0] + ".txt" for x in img_paths]


def _walk_folder(folder, prefix=""):
    """Every file under folder, following links to folders as glob('**') does, but each real folder and each real
    file once: a link that leads back into a folder already listed (a loop) or to a folder or file listed by another
    way (a duplicate) is skipped, with one warning naming the first such link; of two paths to one file, the one
    through no link is kept. Without this, a link looping back into an image folder listed its 8 images 328 times."""
    seen_dirs, by_real, skipped = set(), {}, []
    for top, dirs, names in os.walk(folder, followlinks=True):
        st = os.stat(top)
        if (st.st_dev, st.st_ino) in seen_dirs:  # reached again through a link: go no deeper
            skipped.append(top)
            dirs[:] = []
            continue
        seen_dirs.add((st.st_dev, st.st_ino))
        # hidden names skipped as glob skips them; a fixed walk order keeps the same path for a folder reached twice
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(n for n in names if not n.startswith(".")):
            f = os.path.join(top, name)
            real = os.path.realpath(f)
            kept = by_real.setdefault(real, f)
            if kept != f:
                direct = os.path.abspath(f) == real  # this path is the file itself, the kept one a link to it
                by_real[real], f = (f, kept) if direct else (kept, f)
                skipped.append(f)
    if skipped:
        logging.getLogger("yolov5").warning(
            f"{prefix}{WARN} {folder}: skipped {len(skipped)} folder(s) or file(s) reached again through symbolic "
            f"links (a loop or a duplicate), first {skipped[0]} -> {os.path.realpath(skipped[0])}")
    return list(by_real.values())


def list_image_files(path, prefix=""):
    """A folder (recursive), a .txt list of images (relative to the list's folder), a glob, or a list of those."""
    files = []
    for p in path if isinstance(path, (list, tuple)) else [path]:
        p = Path(p)
        if p.is_dir():
            files += [f for f in _walk_folder(p, prefix) if "." in os.path.basename(f)]  # as glob('**/*.*')
        elif p.is_file():
            parent = str(p.parent) + os.sep
            with open_regular_file(p, "r", errors="surrogateescape") as t:  # names in another encoding stay the OS's bytes
                lines = t.read().strip().splitlines()
            files += [x.replace("./", parent, 1) if x.startswith("./") else x for x in lines
                      if x.strip() and "\0" not in x]  # a NUL cannot be in a path: such a line names no file
        elif any(c in str(p) for c in "*?["):
            files += glob.glob(str(p), recursive=True)
        else:
            raise FileNotFoundError(f"{prefix}{p} does not exist")
    files = sorted(x.replace("/", os.sep) for x in files if x.split(".")[-1].lower() in IMG_FORMATS)
    files = drop_special_files(files, prefix)  # a FIFO named x.jpg would block the first read of it for good
    if not files:
        raise FileNotFoundError(f"{prefix}No images found in {path}. Supported formats are {IMG_FORMATS}. {HELP_URL}")
    return files


def is_writeable(d):
    """A folder we may write to: os.access, and also its mode bits, because root passes os.access on folders
    that are marked read-only (shared data must never be modified)."""
    try:
        return os.access(d, os.W_OK) and bool(os.stat(d).st_mode & 0o222)
    except OSError:
        return False


def exif_orientation(img):
    """The EXIF orientation tag (1-8) of a PIL image, 0 when it has none or it cannot be read."""
    try:
        value = int(img.getexif().get(ORIENTATION_TAG) or 0)
    except Exception:  # a broken EXIF block is the image's problem, not the loader's: treat as untagged
        return 0
    return value if 1 <= value <= 8 else 0


def displayed_size(wh, orientation):
    """Stored (w, h) -> (w, h) as displayed: OpenCV and PIL apply the orientation tag when decoding, and for
    orientations 5-8 (transposed, rotated 90 or 270) that swaps width and height."""
    return (wh[1], wh[0]) if orientation in TRANSPOSING_ORIENTATIONS else tuple(wh)


def exif_size(img):
    """PIL image size (w, h) as displayed (see displayed_size)."""
    return displayed_size(img.size, exif_orientation(img))


def exif_transpose(image):
    """A PIL image with its EXIF orientation applied (and the tag removed), as ultralytics' helper of that name."""
    return ImageOps.exif_transpose(image)


def ultralytics_rect_wh(wh, orientation):
    """(w, h) as ultralytics' label cache records it, which decides --rect batch order and shapes there: its EXIF
    size swaps only for orientations 6 and 8, so 5 and 7 keep their stored, untransposed size. Used only for
    --rect batches, so that they (and the padding that moves mAP) are the official ones; everything that touches
    pixels uses the displayed size."""
    w, h = wh
    return (h, w) if orientation in (5, 7) else (w, h)
