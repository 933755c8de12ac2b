"""Reading the YAML files a user hands over (data, hyp and model YAMLs, export metadata): one safe reader for all.

A YAML file is untrusted input. PyYAML's safe loader already refuses tags that build Python objects, but it
does not bound what a small file can make the program allocate: nested aliases (a "billion laughs") compose to
a few hundred shared nodes that expand to billions once the values are walked, printed or turned to strings. This
reader counts every node as it would be expanded and refuses a file over MAX_EXPANDED_NODES (and recursive
aliases), so a 456-byte file cannot run the program out of memory. Every failure -- missing file, folder,
syntax error, a tag, an alias bomb, an empty file, a list where a mapping is due -- is one line naming the file
and what to do, raised as the caller's UserError subclass.
"""
import re
from pathlib import Path

import yaml

from utils.atomic_files import write_text
from utils.errors import UserError

MAX_FILE_BYTES = 16 << 20  # ImageNet's 1000 class names are 30 KB; no YOLOv5 YAML comes near this
MAX_EXPANDED_NODES = 200_000  # nodes after alias expansion: coco.yaml has ~170, a 10,000-class list ~10,000


class YamlError(UserError, ValueError):
    """A YAML file that cannot be used; the message names the file and what to do."""


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that weighs each composed node by its size with aliases expanded (linear time: a node's weight
    is computed once) and stops before the constructor builds anything too large."""

    def __init__(self, stream):
        super().__init__(stream)
        self._weight = {}  # id(node) -> (node, expanded size); the node is held so its id is not reused

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):  # the node it names, counted again where it is used
            target = self.anchors.get(self.peek_event().anchor)
            if target is not None and id(target) not in self._weight:  # still composing: used inside itself
                raise _Refused("a recursive alias (an anchor used inside itself)")
            return super().compose_node(parent, index)
        node = super().compose_node(parent, index)
        children = node.value if isinstance(node, yaml.SequenceNode) else (
            [x for kv in node.value for x in kv] if isinstance(node, yaml.MappingNode) else ())
        w = 1 + sum(self._weight[id(child)][1] for child in children)
        if w > MAX_EXPANDED_NODES:
            raise _Refused(f"more than {MAX_EXPANDED_NODES:,} values once its aliases are expanded (nested "
                           "'&anchor'/'*alias' references)")
        self._weight[id(node)] = (node, w)
        return node


class _Refused(Exception):
    pass


def _error_line(file, e):
    mark = getattr(e, "problem_mark", None)
    where = f"{file}, line {mark.line + 1}" if mark is not None else str(file)
    tag = re.search(r"tag:yaml\.org,2002:(\S+?)'", str(getattr(e, "problem", "")))
    if isinstance(e, yaml.constructor.ConstructorError) and tag:
        return (f"{where}: the tag '!!{tag.group(1)}' is not allowed here, the file holds plain values only "
                "(paths, names, numbers): remove the tag.")
    problem = " ".join(str(getattr(e, "problem", None) or e).split())
    return f"{where}: not valid YAML ({problem}): fix the file."


def parse_yaml(text, file="<yaml>", error=YamlError):
    """YAML text -> plain Python values (dict, list, str, int, float, bool, None), bounded as above."""
    loader = None
    try:
        loader = _BoundedLoader(text)  # the reader refuses control characters here already
        return loader.get_single_data()
    except _Refused as e:
        raise error(f"{file}: refused, the file holds {e}; write the values out plainly.") from None
    except yaml.YAMLError as e:
        raise error(_error_line(file, e)) from None
    except RecursionError:
        raise error(f"{file}: refused, nested too deeply to read; flatten it.") from None
    except (ValueError, TypeError, IndexError, KeyError, AttributeError) as e:
        # PyYAML's constructors raise these, unwrapped, for an explicit tag the value cannot hold ('a: !!int x')
        raise error(f"{file}: a value cannot be read as its explicit !!tag says ({type(e).__name__}: {e}); "
                    "remove the tag or fix the value.") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml(file, what="YAML file", error=YamlError, mapping=True):
    """The values of a user's YAML file. mapping=True (every YAML the project reads holds `key: value` lines):
    anything else at the top -- an empty file, a list, a bare string -- is refused in one line naming `what`."""
    file = Path(file)
    try:
        size = file.stat().st_size
        if file.is_dir():
            raise error(f"{what} {file} is a folder; give the path of a .yaml file.")
        if size > MAX_FILE_BYTES:
            raise error(f"{what} {file} is {size:,} bytes, over the {MAX_FILE_BYTES >> 20} MiB a YAML of this "
                        "project can be; is it the right file?")
        raw = file.read_bytes()
    except FileNotFoundError:
        raise error(f"{what} {file} not found; check the path.") from None
    except OSError as e:
        raise error(f"{what} {file} cannot be read ({e.strerror or e}); check the path and its permissions.") from None
    text = raw.decode("utf-8", errors="replace")  # names in another encoding still read; YAML needs text
    data = parse_yaml(text, file, error)
    if mapping and not isinstance(data, dict):
        held = "nothing (the file is empty)" if data is None else f"a {type(data).__name__} ({describe(data)})"
        raise error(f"{what} {file} holds {held}, expected 'key: value' lines; see data/coco128.yaml, "
                    "data/hyps/hyp.scratch-low.yaml or models/yolov5s.yaml for the layout.")
    return data


def describe(v, n=60):
    """A value as an error line shows it: its repr, cut to n characters."""
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


# ----------------------------------------------------------------------------------------------------------------
# ultralytics' names (utils.general.yaml_load / yaml_save), for users' scripts
def yaml_load(file="data.yaml"):
    """A YAML file's values by the bounded safe reader above (any top level, as ultralytics' yaml_load)."""
    return read_yaml(file, mapping=False)


def yaml_save(file="data.yaml", data=None):
    """data written as YAML in its own key order, Path values as text; whole or not at all (utils/atomic_files)."""
    data = {k: str(v) if isinstance(v, Path) else v for k, v in (data or {}).items()}
    write_text(file, yaml.safe_dump(data, sort_keys=False))
