"""The class list and the samples of an ImageFolder split (root/<class>/<image>), as torchvision's ImageFolder lists
them (classes: sorted folder names; images: each class folder walked in sorted order, symlinks followed), with
these rules on top:

* hidden folders (a name starting with '.', such as Jupyter's .ipynb_checkpoints/) are never classes, and are not
  walked inside a class folder either: they hold a tool's files, not samples;
* a run has ONE class list, its training split's folders (or the model's names, for classify/val.py); the other
  splits are read against it BY NAME, so a class folder missing from val/ cannot shift the labels of the classes
  after it. A missing folder is a warning naming it (that class has no images in this split); a folder that is not
  in the list stops with one line naming it;
* only regular files are samples: anything else named like an image (a FIFO would block the reader for good) is
  skipped with a warning naming it."""
import os
from collections import Counter
from pathlib import Path

from utils.classify.errors import ClassificationDataError
from utils.data.files import WARN
from utils.log import LOGGER

# the extensions torchvision's ImageFolder accepts (what official classification datasets hold)
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def is_hidden(name):
    return name.startswith(".")


def quoted(names, limit=5):
    """'a', 'b', 'c' (+N more): a few names for a one-line message."""
    names = list(names)
    text = ", ".join(repr(str(n)) for n in names[:limit])
    return text + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


def find_classes(root):
    """The sorted names of root's visible sub-folders: the class list of a training split."""
    root = Path(root)
    if not root.is_dir():
        raise ClassificationDataError(f"{root}: classification data folder not found (expected {root}/<class>/<image>)")
    try:
        classes = sorted(e.name for e in os.scandir(root) if e.is_dir() and not is_hidden(e.name))
    except OSError as e:
        raise ClassificationDataError(f"{root}: cannot list the class folders ({e.strerror or e})") from None
    if not classes:
        raise ClassificationDataError(f"{root}: no class folders inside (expected {root}/<class>/<image>; folders "
                                      "whose name starts with '.' are not classes)")
    return classes


def missing_class_folders(root, classes, source):
    """The names in classes (the run's one class list, from `source`, e.g. "train/ (/data/train)") that have no
    folder in root. A visible folder of root whose name is not in classes stops with one line: its images have no
    label index in this run."""
    named = [c for c in classes if c]  # a model's names may leave an index unnamed
    dups = sorted(c for c, n in Counter(named).items() if n > 1)
    if dups:
        raise ClassificationDataError(f"{source}: class name{'s' * (len(dups) > 1)} {quoted(dups)} given to more than "
                                      f"one class index; folders are matched to classes by name, so names must be "
                                      "unique")
    folders = find_classes(root)
    known = set(named)
    extra = [f for f in folders if f not in known]
    if extra:
        s = "s" * (len(extra) > 1)
        raise ClassificationDataError(
            f"{root}: class folder{s} {quoted(extra)} not among the {len(classes)} classes of {source}; every split "
            f"is labelled with that one class list, by folder name: remove or rename the folder{s}, or add "
            f"{'them' if s else 'it'} to the training classes")
    present = set(folders)
    return [c for c in named if c not in present]


def warn_missing_classes(root, missing, source):
    if missing:
        many = len(missing) > 1
        LOGGER.warning(f"{WARN} {root}: no folder for class{'es' * many} {quoted(missing)} of {source}: "
                       f"{'those classes have' if many else 'that class has'} no images in this split; the other "
                       f"classes keep their indices in {source}")


def _walk_class_folder(folder):
    """([(dirpath, sorted image names)] sorted by dirpath, as sorted(os.walk(folder)) orders them, and the paths
    named like images that are not regular files) of folder and its visible sub-folders."""
    found, odd, pending = [], [], [str(folder)]
    while pending:
        d = pending.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:  # as os.walk does: a folder that cannot be listed contributes nothing
            continue
        files = []
        for e in entries:
            if e.is_dir():  # follows symlinks, as ImageFolder does
                if not is_hidden(e.name):
                    pending.append(e.path)
            elif e.name.lower().endswith(IMG_EXTENSIONS):
                if e.is_file():  # a regular file, or a link to one
                    files.append(e.name)
                else:
                    odd.append(e.path)
        found.append((d, sorted(files)))
    return sorted(found), sorted(odd)


def image_folder_samples(root, classes):
    """[(file, class index)] in ImageFolder's order: classes in order, each folder walked with sorted names; the
    index is the position in classes, whatever folders root holds (a class without a folder has no samples)."""
    samples, skipped = [], []
    for ci, c in enumerate(classes):
        folder = Path(root) / c
        if not folder.is_dir():
            continue
        found, odd = _walk_class_folder(folder)
        skipped.extend(odd)
        for dirpath, fnames in found:
            samples.extend((os.path.join(dirpath, f), ci) for f in fnames)
    if skipped:
        LOGGER.warning(f"{WARN} {root}: skipped {len(skipped)} image name{'s' * (len(skipped) > 1)} that "
                       f"{'are' if len(skipped) > 1 else 'is'} not a regular file (a pipe, socket, device or broken "
                       f"link cannot be read as an image): {quoted(skipped, 3)}")
    if not samples:
        raise ClassificationDataError(f"{root}: no images ({', '.join(IMG_EXTENSIONS)}) in its class folders")
    return samples
