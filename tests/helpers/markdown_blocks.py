"""Runs the shell and Python blocks of the project's Markdown pages (README.md, ARCHITECTURE.md, docs/**/*.md), so
that a command in the documentation that stops working fails a test (tests/test_docs/test_markdown_blocks.py).

What runs
    Fenced blocks (``` or ~~~, indented ones inside lists and admonitions too) whose language is bash, sh, shell,
    python or py. Every other language (text, yaml, console with its `$ ` prompts, ...) is documentation only.

Marking a block: an HTML comment on the lines just above its fence (blank lines between are allowed):
    <!-- docs-test: skip REASON free text -->   not run; REASON is one of SKIP_REASONS, printed with the text
    <!-- docs-test: file PATH -->               not run: its text is written to PATH (relative to the project
                                                folder) before the page's next block runs ("save this as PATH")
    <!-- docs-test: epochs N -->               this block's `--epochs` become N instead of 1 (a resume example
                                                needs a run still going when its one-second poll for last.pt
                                                ends: 12, as a tiny epoch takes 0.2 s on a fast CPU)
    <!-- docs-test: plots -->                  this block's training commands keep their plots (no --noplots)
    Any other `docs-test:` comment is an error, so a typo cannot silently skip or run a block.

Where it runs: one sandbox per page, its blocks in page order, each in a fresh shell started in the project folder
(as a reader's terminal after `source .venv-torch/bin/activate`: the backend's environment is first on PATH):
    <tmp>/<project>/        the project's files as a commit would hold them (`git ls-files`, plus new files git
                            does not ignore), .venv-* linked to the built environments, and yolov5n.pt,
                            yolov5n-seg.pt, yolov5n-cls.pt linked to the shared test weights (the -seg and -cls
                            ones are coco128 fine-tunes standing in for the official files of those names)
    <tmp>/datasets/         coco128 and coco128-seg from the shared test data but only their first COCO128_IMAGES
                            images (an epoch there is the cost of most blocks), coco128-cls whole, and shapes,
                            shapes-seg, shapes-cls as `make train-demo` leaves them but small (SHAPES_TRAIN +
                            SHAPES_VAL scenes): folders of links to the files, so caches a run writes beside its
                            labels land in the sandbox and never in the shared data
    <tmp>/shared            the shared test data (read only)
bash blocks run with `bash -euo pipefail`, python blocks with the backend's Python (`python -c`, so the project
folder is on sys.path as it is in an interactive session there).

Tiny sizes, and only these (each rewrite is printed with the block's line):
    --epochs N                      -> 1 (or the block's `docs-test: epochs`)
    --img/--imgsz/--img-size N [M]  -> 64 (both values of a height-width pair)
    --batch-size/--batch N          -> min(N, 8) (-1, AutoBatch, stays)
    --train N / --val N             -> min(N, SHAPES_TRAIN) / min(N, SHAPES_VAL) (make_shapes.py's scene counts)
    train.py, segment/train.py      -> with --noplots (unless the block is marked `plots`): at these sizes the
                                       plots are 70% of a run's CPU time (4 s without, 14 s with); the plots have
                                       tests of their own (tests/test_utils/test_plots.py)
and the environment of every block (ENV below): the Makefile's EPOCHS, IMG, SEG_IMG, SEG_EPOCHS and CLS_EPOCHS
(make train-demo's sizes; the Makefile's `?=` takes them from the environment), YOLO_QUIET=1, MPLBACKEND=Agg.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

RUN_LANGUAGES = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python", "py": "python", "python3": "python"}
SKIP_REASONS = {
    "gpu": "needs a CUDA GPU",
    "multi-gpu": "needs several GPUs",
    "multi-node": "needs several machines",
    "network": "downloads or installs from the network",
    "service": "needs an outside service or runs as one (a logger's server, a camera, a stream, TensorBoard)",
    "suite": "runs the test suite, which is what runs this block",
}
SHAPES_TRAIN, SHAPES_VAL = 16, 8
COCO128_IMAGES = 32  # of coco128's and coco128-seg's 128 (their train and val set are the same images)
TINY_IMG, TINY_BATCH, TINY_EPOCHS = 64, 8, 1
ENV = {"YOLO_QUIET": "1", "MPLBACKEND": "Agg", "EPOCHS": str(TINY_EPOCHS), "IMG": str(TINY_IMG),
       "SEG_IMG": str(TINY_IMG), "SEG_EPOCHS": str(TINY_EPOCHS), "CLS_EPOCHS": str(TINY_EPOCHS)}
SHARED_WEIGHTS = {"yolov5n.pt": "yolov5n.pt", "yolov5n-seg.pt": "yolov5n-seg-coco128.pt",
                  "yolov5n-cls.pt": "yolov5n-cls-coco128cls.pt"}
BLOCK_TIMEOUT = 600

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
_ANY_DIRECTIVE = re.compile(r"docs-test\s*:")


class DocsTestError(ValueError):
    """A malformed `docs-test:` comment or fence in a page."""


@dataclass
class Block:
    page: str          # path relative to the project, e.g. docs/training.md
    line: int          # 1-based line of the opening fence
    language: str      # the fence's first word, lower case ('' for none)
    code: str
    skip: tuple = ()   # (reason, text) when marked `skip`
    file: str = ""     # where a `file` block is written
    epochs: int = TINY_EPOCHS
    plots: bool = False  # marked `docs-test: plots`: its training commands keep their plots

    @property
    def runner(self):
        return RUN_LANGUAGES.get(self.language)

    @property
    def where(self):
        return f"{self.page}:{self.line}"


@dataclass
class PageResult:
    page: str
    ran: list = field(default_factory=list)        # (Block, wall seconds, CPU seconds of its processes)
    skipped: list = field(default_factory=list)    # Block
    files: list = field(default_factory=list)      # Block
    rewrites: list = field(default_factory=list)   # (Block, [(before, after)])
    failure: str = ""
    seconds: float = 0.0

    def summary(self):
        reasons = {}
        for b in self.skipped:
            reasons[b.skip[0]] = reasons.get(b.skip[0], 0) + 1
        skipped = ", ".join(f"{r}: {n}" for r, n in sorted(reasons.items()))
        cpu = sum(c for _, _, c in self.ran)
        text = [f"{self.page}: {len(self.ran)} blocks ran in {self.seconds:.1f} s ({cpu:.1f} s CPU), "
                f"{len(self.skipped)} skipped"
                + (f" ({skipped})" if skipped else "")
                + (f", {len(self.files)} written as files" if self.files else "")]
        text += [f"  skipped {b.where}: {b.skip[0]} ({SKIP_REASONS[b.skip[0]]}){': ' + b.skip[1] if b.skip[1] else ''}"
                 for b in self.skipped]
        text += [f"  ran {b.where} ({b.language}) in {s:.1f} s ({c:.1f} s CPU)" for b, s, c in self.ran]
        for b, changes in self.rewrites:
            text.append(f"  rewrote {b.where}: " + ", ".join(f"{a!r} -> {c!r}" for a, c in changes))
        return "\n".join(text)


# ------------------------------------------------------------------------------------------------- finding blocks
def pages(root):
    """README.md, ARCHITECTURE.md (the site's architecture page includes it) and every Markdown page under docs/, in
    a stable order."""
    root = Path(root)
    found = [root / name for name in ("README.md", "ARCHITECTURE.md") if (root / name).is_file()]
    found += sorted((root / "docs").rglob("*.md")) if (root / "docs").is_dir() else []
    return found


def _parse_directive(body, where):
    word, _, rest = body.partition(" ")
    rest = rest.strip()
    if word == "skip":
        reason, _, text = rest.partition(" ")
        if reason not in SKIP_REASONS:
            raise DocsTestError(f"{where}: 'docs-test: skip {rest}': the reason must be one of "
                                f"{', '.join(SKIP_REASONS)} (then free text)")
        return "skip", (reason, text.strip())
    if word == "file":
        if not rest or Path(rest).is_absolute() or ".." in Path(rest).parts and not rest.startswith("../datasets/"):
            raise DocsTestError(f"{where}: 'docs-test: file {rest}': give a path relative to the project folder")
        return "file", rest
    if word == "epochs":
        if not rest.isdigit() or int(rest) < 1:
            raise DocsTestError(f"{where}: 'docs-test: epochs {rest}': give a whole number of epochs >= 1")
        return "epochs", int(rest)
    if word == "plots" and not rest:
        return "plots", True
    raise DocsTestError(f"{where}: unknown 'docs-test: {body}' (skip REASON, file PATH, epochs N or plots)")


def parse_blocks(text, page):
    """Every fenced block of a page with the directives just above it. Raises DocsTestError on a directive that is
    malformed or marks no block, and on a fence that is never closed."""
    lines = text.splitlines()
    blocks, pending, i = [], {}, 0
    while i < len(lines):
        line = lines[i]
        where = f"{page}:{i + 1}"
        m = _FENCE.match(line)
        if m:
            indent, fence = m["indent"], m["fence"]
            language = m["info"].strip().split(" ")[0].strip("{}.").lower() if m["info"].strip() else ""
            body, j = [], i + 1
            while j < len(lines):
                close = _FENCE.match(lines[j])
                if close and close["fence"][0] == fence[0] and len(close["fence"]) >= len(fence) \
                        and not close["info"].strip():
                    break
                # the block's lines lose the fence's indentation (a fence inside a list item or an admonition)
                body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
                j += 1
            else:
                raise DocsTestError(f"{where}: the code fence {fence} is never closed")
            block = Block(page, i + 1, language, "\n".join(body) + "\n")
            if "skip" in pending:
                block.skip = pending["skip"]
            if "file" in pending:
                block.file = pending["file"]
            if "epochs" in pending:
                block.epochs = pending["epochs"]
            block.plots = pending.get("plots", False)
            if block.file and block.skip:
                raise DocsTestError(f"{where}: a block is either written as a file or skipped, not both")
            blocks.append(block)
            pending, i = {}, j + 1
            continue
        d = _DIRECTIVE.match(line)
        if d:
            key, value = _parse_directive(d["body"], where)
            pending[key] = value
        elif _ANY_DIRECTIVE.search(line):
            raise DocsTestError(f"{where}: a docs-test comment must stand alone on its line: {line.strip()!r}")
        elif line.strip() and pending:
            raise DocsTestError(f"{where}: 'docs-test' comment above text, not above a code block")
        i += 1
    if pending:
        raise DocsTestError(f"{page}: a 'docs-test' comment at the end of the page marks no block")
    return blocks


# ---------------------------------------------------------------------------------------------------- tiny sizes
def _rewrite(pattern, replace, code, changes):
    def sub(m):
        new = replace(m)
        if new != m[0]:
            changes.append((m[0], new))
        return new
    return re.sub(pattern, sub, code, flags=re.M)


def tiny(block):
    """The block's code with the documented tiny sizes, and the list of (before, after) rewrites."""
    code, changes = block.code, []
    if block.runner != "bash":
        return code, changes
    end = r"(?=[\s;|&)\\]|$)"
    code = _rewrite(r"(--epochs)([ =])(\d+)" + end, lambda m: f"{m[1]}{m[2]}{block.epochs}", code, changes)
    code = _rewrite(r"(--img(?:sz|-size)?)([ =])(\d+)(?:([ \t]+)(\d+))?" + end,
                    lambda m: f"{m[1]}{m[2]}{TINY_IMG}" + (f"{m[4]}{TINY_IMG}" if m[5] else ""), code, changes)
    code = _rewrite(r"(--batch(?:-size)?)([ =])(\d+)" + end,
                    lambda m: f"{m[1]}{m[2]}{min(int(m[3]), TINY_BATCH)}", code, changes)
    code = _rewrite(r"(--train)([ =])(\d+)" + end, lambda m: f"{m[1]}{m[2]}{min(int(m[3]), SHAPES_TRAIN)}", code,
                    changes)
    code = _rewrite(r"(--val)([ =])(\d+)" + end, lambda m: f"{m[1]}{m[2]}{min(int(m[3]), SHAPES_VAL)}", code,
                    changes)
    if not block.plots:  # a training command's plots are most of a one-epoch run's CPU time
        code = _rewrite(r"(?<![\w/.-])((?:\S*/)?(?:segment/)?train\.py)(?=[ \t]|$)(?!.*--noplots)",
                        lambda m: m[0] if "classify/" in m[1] else f"{m[1]} --noplots", code, changes)
    return code, changes


# ------------------------------------------------------------------------------------------------------- sandbox
def project_files(root):
    """The project's files as a clone would hold them: tracked ones (as they are in the work tree) and new ones git
    does not ignore."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                             capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an unpacked archive): all but what is built
        built = re.compile(r"^(\.venv[^/]*|\.git|runs|site|\.gpu_kit|__pycache__)$|\.(pyc|cache)$")
        out = "\0".join(p.relative_to(root).as_posix() for p in Path(root).rglob("*")
                        if not any(built.search(part) for part in p.relative_to(root).parts))
    return sorted({p for p in out.split("\0") if p and (Path(root) / p).is_file()})


def _mirror(src, dst, keep=None):
    """dst: real folders holding links to src's files (those whose stem is in keep, when given), so that what a run
    writes there (label caches, .npy) stays in dst."""
    for dirpath, _, files in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            if keep is None or Path(f).stem in keep or not rel.parts or rel.parts[0] not in ("images", "labels"):
                os.symlink(Path(dirpath) / f, dst / rel / f)


def _first_images(dataset, n):
    """The stems of a YOLO dataset's first n images (by name), over all its image folders."""
    images = sorted(p for p in (Path(dataset) / "images").rglob("*") if p.is_file())
    return {p.stem for p in images[:n]}


def make_shapes_sets(root, python, out):
    """The three shapes sets, small, made once per test session under out (read through mirrors)."""
    out = Path(out)
    script = str(Path(root) / "data" / "scripts" / "make_shapes.py")
    for name, extra in (("shapes", []), ("shapes-seg", ["--segments"]), ("shapes-cls", ["--classify"])):
        if not (out / name).is_dir():
            subprocess.run([python, script, "--out", str(out / name), "--train", str(SHAPES_TRAIN), "--val",
                            str(SHAPES_VAL), *extra], check=True, capture_output=True, timeout=300)
    return out


def make_sandbox(root, base, shared, shapes):
    """The folder a page's blocks run in (see the module's docstring); returns the project folder inside it."""
    root, base = Path(root), Path(base)
    project = base / root.name
    for rel in project_files(root):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, project / rel)
    for venv in sorted(root.glob(".venv-*")):
        if (venv / "bin" / "python").exists():
            os.symlink(venv.resolve(), project / venv.name)
    datasets = base / "datasets"
    datasets.mkdir()
    if shared is not None and Path(shared).is_dir():
        os.symlink(Path(shared).resolve(), base / "shared")
        for name in ("coco128", "coco128-seg"):
            if (shared / "data" / name).is_dir():
                _mirror(shared / "data" / name, datasets / name,
                        keep=_first_images(shared / "data" / name, COCO128_IMAGES))
        if (shared / "data" / "coco128-cls").is_dir():
            _mirror(shared / "data" / "coco128-cls", datasets / "coco128-cls")
        for name, source in SHARED_WEIGHTS.items():
            if (shared / "weights" / source).is_file() and not (project / name).exists():
                os.symlink(shared / "weights" / source, project / name)
    for made in sorted(Path(shapes).iterdir()):
        _mirror(made, datasets / made.name)
    return project


# ------------------------------------------------------------------------------------------------------- running
def block_env(python):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    bin_dir = str(Path(python).parent)
    env.update(ENV)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env["VIRTUAL_ENV"] = str(Path(python).parent.parent)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    return env


def _run(argv, cwd, env, timeout):
    """Run argv in its own process group; whatever it leaves running in the background is stopped once it ends (the
    output goes to a file, not a pipe, so a background process holding it open cannot hold the block).
    Returns (exit status, output, CPU seconds of the process and the children it waited for)."""
    with tempfile.TemporaryFile() as log:
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        deadline, cpu = time.monotonic() + timeout, 0.0
        try:
            while True:  # wait4: this child's own CPU time, whatever runs beside it in other threads
                pid, wait_status, usage = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    p.returncode = status = os.waitstatus_to_exitcode(wait_status)
                    cpu = usage.ru_utime + usage.ru_stime
                    break
                if time.monotonic() > deadline:
                    status = f"timed out after {timeout} s"
                    break
                time.sleep(0.05)
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if p.returncode is None:
                p.wait()
        log.seek(0)
        return status, log.read().decode(errors="replace"), cpu


_PROGRESS = re.compile(r"\d+%\|")


def readable_lines(output):
    """The output's lines, of each run of one progress bar's states (tqdm) only the last."""
    lines = [part for line in output.rstrip().splitlines() for part in line.split("\r") if part.strip()]

    def bar(line):  # which bar a line draws (the first word before its percentage: an epoch, "Class"), or None
        m = _PROGRESS.search(line)
        return (line[:m.start()].split() or [""])[0] if m else None

    return [line for i, line in enumerate(lines)
            if bar(line) is None or i + 1 == len(lines) or bar(lines[i + 1]) != bar(line)]


def run_page(page_blocks, page, project, python, timeout=BLOCK_TIMEOUT, tail=40):
    """Run a page's blocks in order in the sandbox; stops at the first failing block (the later ones build on it).
    Returns a PageResult whose failure names the page, the line and the last lines of the output."""
    result = PageResult(page)
    env = block_env(python)
    start = time.monotonic()
    for block in page_blocks:
        if block.skip:
            result.skipped.append(block)
            continue
        if block.file:
            target = project / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code)
            result.files.append(block)
            continue
        if block.runner is None:
            continue
        code, changes = tiny(block)
        if changes:
            result.rewrites.append((block, changes))
        t0 = time.monotonic()
        if block.runner == "bash":
            status, out, cpu = _run(["bash", "-euo", "pipefail", "-c", code], project, env, timeout)
        else:
            status, out, cpu = _run([python, "-c", code], project, env, timeout)
        result.ran.append((block, time.monotonic() - t0, cpu))
        if status != 0:
            last = "\n".join(readable_lines(out)[-tail:])
            result.failure = (f"{block.where}: the {block.language} block failed (exit status {status}):\n"
                              + "\n".join("    " + c for c in code.rstrip().splitlines())
                              + f"\n  its last output lines:\n{last}")
            break
    result.seconds = time.monotonic() - start
    return result


def count(all_blocks):
    """(runnable, skipped by reason, written as files) over blocks of every page."""
    runnable = [b for b in all_blocks if b.runner and not b.skip and not b.file]
    skipped = {}
    for b in all_blocks:
        if b.skip:
            skipped.setdefault(b.skip[0], []).append(b)
    return runnable, skipped, [b for b in all_blocks if b.file]


if __name__ == "__main__":  # list a page's blocks and what the runner would do with them
    for p in sys.argv[1:]:
        for b in parse_blocks(Path(p).read_text(), p):
            state = ("skip " + b.skip[0]) if b.skip else ("file " + b.file) if b.file else (b.runner or "-")
            print(f"{b.where}\t{b.language or '-'}\t{state}\t{tiny(b)[1] or ''}")
