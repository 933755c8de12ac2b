"""The one owner of the backend choice, made once per process: it reads YOLO_BACKEND (declared in utils/settings.py),
asks the rule (utils/backend_choice.py, which imports no framework, so the Makefile can ask it from a shell) for an
order to try, imports the first per-backend module that imports, and prints the one-line notice of what it chose.
Only utils/backend/__init__.py calls this.

The choice is made while utils.backend is imported, which the entry scripts do at their top, before their main and
its one-line error handling (utils/signals.py exit_on_user_error) run. So a bad YOLO_BACKEND (or another setting read
during that import) would end the script with the import machinery's traceback; instead, an error raised here that
nothing catches is printed as the one line that handler prints, and the exit status is 1 as for any uncaught error.
Code that catches it (a test, a user's own fallback) sees the exception as before."""
import importlib
import os
import sys
from pathlib import Path

from utils.backend.common import installed
from utils.backend_choice import BACKEND_NAMES, BackendError, choose_backend, gpu_seen_here
from utils.errors import UserError, one_line
from utils.settings import BACKEND, BACKEND_ANNOUNCED, HOST_MALLOC, QUIET

# The settings read while utils.backend is imported (here, in host_memory.keep_freed_memory and in the backend
# notice): checked first, so that a bad value gets the same one line as a bad YOLO_BACKEND.
READ_AT_IMPORT = (BACKEND, QUIET, HOST_MALLOC)


def select_backend():
    """(name, its per-backend module, why) for this process: YOLO_BACKEND=oneflow|torch, or unset: the backend
    follows the device. A preferred framework that fails to import makes way for the other, and the reason says so."""
    try:
        for setting in READ_AT_IMPORT:
            setting.get()
        return _select()
    except (UserError, BackendError) as e:
        _one_line_if_uncaught()
        raise e from None  # the chain (an ImportError inside the framework) is in the message already


def _select():
    requested = BACKEND.get()
    gpu, gpu_why = gpu_seen_here() if not requested else (None, "")
    order, why = choose_backend(requested, gpu, gpu_why, {k: installed(k) for k in BACKEND_NAMES})
    errors = []
    for name in order:
        try:
            module = importlib.import_module(f"utils.backend.{name}_backend")
        except BackendError as e:
            if len(order) == 1:
                raise
            errors.append(f"  {BACKEND_NAMES[name]}: {e}")
            continue
        if errors:  # the preferred one failed to import: say so in the notice
            why = f"{why}; {BACKEND_NAMES[order[0]]} failed to import"
        return name, module, why
    raise BackendError("No backend imports.\n" + "\n".join(errors))


def _one_line_if_uncaught():
    """From now on, a UserError or BackendError that reaches the top of the program prints as `<script>: message`
    (one line, as exit_on_user_error prints it) instead of a traceback; anything else keeps the previous hook."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        if not isinstance(value, (UserError, BackendError)):
            return previous(kind, value, tb)
        script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else "yolov5"
        prog = Path(script).stem
        print(f"{prog}: {one_line(value, prog)}", file=sys.stderr, flush=True)

    sys.excepthook = hook


def announce_backend_once(name, version, why):
    """The notice of the choice on stderr, printed by the first process of a tree (its dataloader workers and DDP
    ranks inherit the marker and stay quiet), unless YOLO_QUIET=1."""
    if QUIET.get() or BACKEND_ANNOUNCED.get():
        return
    os.environ[BACKEND_ANNOUNCED.name] = "1"
    print(f"YOLOv5 backend: {name} {version} ({why}; set YOLO_BACKEND=oneflow|torch to choose)", file=sys.stderr)
