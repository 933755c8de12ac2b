"""The project's C kernels (utils/native/*.c): compiled on first use with the machine's C compiler, kept in
YOLO_CACHE_DIR/native/ and loaded with ctypes.

A kernel is the project's own source file, never anything from data or from the network. The library's name holds
a hash of the source, the flags and the compiler's version line, so a changed source or compiler builds anew and an
old library is never loaded for new code. The library is written through utils/atomic_files (a build that fails
or is interrupted leaves nothing under the final name; two processes building at once each rename a whole file).
A library found in the cache is loaded only when this user owns it and its folder and neither is writable by
others: loading it runs its code.

Where there is no compiler (CC, else cc or gcc on PATH), or the build fails, NativeBuildError says why in one line
and the caller keeps its framework path. No framework import here.
"""
import contextlib
import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from utils import atomic_files
from utils.settings import CACHE_DIR

SOURCE_DIR = Path(__file__).resolve().parent / "native"
BASE_FLAGS = ("-O3", "-fPIC", "-shared", "-fno-trapping-math", "-fno-math-errno", "-fopenmp-simd")
BUILD_LIMIT_SECONDS = 120  # a compiler still running by then is stuck: training goes on without the kernel
KEEP_BUILDS = 8  # libraries kept per kernel (older sources, other flags or compilers): the cache stays bounded


class NativeBuildError(RuntimeError):
    """No library: no compiler, a failed build, or an unsafe cached file. The message is one line."""


def compiler():
    """The C compiler command: $CC, else cc or gcc on PATH; None when there is none."""
    cc = os.environ.get("CC", "").strip()
    if cc:
        return shutil.which(cc) or None
    return shutil.which("cc") or shutil.which("gcc")


@functools.lru_cache(maxsize=None)
def _compiler_version(cc):
    try:
        p = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise NativeBuildError(f"the C compiler {cc} does not run ({e})") from e
    return (p.stdout or p.stderr).splitlines()[0] if (p.stdout or p.stderr) else cc


def library_name(source, flags, cc):
    """<stem>-<16 hex digits of sha256(source bytes, flags, compiler version)>.so"""
    h = hashlib.sha256(Path(source).read_bytes())
    h.update("\0".join((*flags, _compiler_version(cc))).encode())
    return f"{Path(source).stem}-{h.hexdigest()[:16]}.so"


def _safe_to_load(path):
    """Owned by this user, as is its folder, and neither writable by group or others."""
    if not hasattr(os, "getuid"):
        return True
    for p in (path, path.parent):
        st = p.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return False
    return True


def _cache_dir():
    """YOLO_CACHE_DIR/native, created private (0700); None when it cannot be created or is not ours."""
    d = CACHE_DIR.get() / "native"
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return None
    return d if os.access(d, os.W_OK) else None


def _compile(cc, source, flags, out):
    cmd = [cc, *BASE_FLAGS, *flags, "-o", str(out), str(source), "-lpthread", "-lm"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_LIMIT_SECONDS)
    except subprocess.TimeoutExpired as e:
        raise NativeBuildError(f"{Path(source).name}: the build took over {BUILD_LIMIT_SECONDS} s") from e
    except OSError as e:
        raise NativeBuildError(f"{Path(source).name}: {cc} did not run ({e})") from e
    if p.returncode != 0:
        first = next((ln for ln in p.stderr.splitlines() if "error" in ln), p.stderr.strip()[:200] or "no output")
        raise NativeBuildError(f"{Path(source).name}: {cc} failed ({first.strip()})")


def prune(cache, stem, keep=KEEP_BUILDS):
    """Remove all but the `keep` newest libraries of this kernel from the cache: only names of library_name's shape
    (<stem>-<16 hex digits>.so); a process that loaded a removed one keeps its mapping."""
    shape = re.compile(rf"{re.escape(stem)}-[0-9a-f]{{16}}\.so")
    libs = [p for p in Path(cache).iterdir() if shape.fullmatch(p.name)]
    for p in sorted(libs, key=lambda p: p.stat().st_mtime, reverse=True)[keep:]:
        with contextlib.suppress(OSError):
            p.unlink()


@functools.lru_cache(maxsize=None)
def load(name, flags=()):
    """The ctypes library built from utils/native/<name>.c with these extra compiler flags (an instruction set),
    from the cache when it is there. Raises NativeBuildError."""
    source = SOURCE_DIR / f"{name}.c"
    cc = compiler()
    if cc is None:
        raise NativeBuildError("no C compiler (set CC, or install cc/gcc)")
    flags = tuple(flags)
    cache = _cache_dir()
    if cache is None:  # nowhere to keep it: build for this process only
        folder = Path(tempfile.mkdtemp(prefix="yolo-native-"))
        try:
            lib = folder / library_name(source, flags, cc)
            _compile(cc, source, flags, lib)
            return ctypes.CDLL(str(lib))  # mapped: the file can go
        except OSError as e:
            raise NativeBuildError(f"{name}.c: the built library does not load ({e})") from e
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    lib = cache / library_name(source, flags, cc)
    try:
        if not lib.exists():
            with atomic_files.output_path(lib, mode=0o755) as tmp:
                _compile(cc, source, flags, tmp)
            prune(cache, source.stem)
        safe = _safe_to_load(lib)
    except OSError as e:  # a full disk (OutputWriteError), a folder pulled away: no kernel, and no crash
        raise NativeBuildError(f"{lib} could not be written ({e})") from e
    if not safe:
        raise NativeBuildError(f"{lib} is not private to this user (owner or permissions): not loaded; delete it")
    try:
        return ctypes.CDLL(str(lib))
    except OSError as e:
        raise NativeBuildError(f"{lib} does not load ({e}); delete it to rebuild") from e
