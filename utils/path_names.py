"""Names that come from files (class names in a checkpoint or data YAML, image and stream names) made into ONE safe
path component before they are joined to a folder: a class called '../../x' or '/etc' must not write crops outside
the run folder. Every place that turns such a name into a path calls safe_path_component. Framework-free."""
import re

MAX_BYTES = 255  # the usual file-name limit (ext4, xfs, APFS)
_UNSAFE = re.compile(r"[/\\\x00-\x1f\x7f]")  # separators (both kinds: a Windows reader too) and control characters


def safe_path_component(name, fallback="_"):
    """str(name) as one file or folder name: separators and control characters become '_', a name of dots only
    ('.', '..') or an empty one gets a '_' prefix (so it names a child, never the folder or its parent), and it is
    cut to 255 bytes of UTF-8. Ordinary names ('person', 'traffic light', 'zebra.jpg') are unchanged."""
    s = _UNSAFE.sub("_", str(name))
    if not s.strip("."):
        s = fallback + s
    raw = s.encode("utf-8", errors="surrogateescape")
    if len(raw) > MAX_BYTES:
        s = raw[:MAX_BYTES].decode("utf-8", errors="ignore")
    return s
