"""Docs that cannot rot: every bash and Python block of README.md and docs/**/*.md runs, page by page, in a sandbox
copy of the project at tiny sizes (tests/helpers/markdown_blocks.py says how, and which rewrites it makes; each page's
test prints them). Blocks marked `<!-- docs-test: skip REASON -->` are counted with their reason, and must stay
under 15% of the blocks.

The pages run train.py, val.py, ... as processes (slow tier), in the PyTorch suite only: the pages document the
same commands for both backends, and OneFlow's CPU kernels would take several times the 4 minutes they take here.
DOCS_TEST_JOBS (default 2) pages run side by side, each in its own sandbox."""
import os
import sys

import pytest

from tests.helpers import markdown_blocks as mb
from tests.helpers.process_helpers import alive
from utils.backend import BACKEND

ROOT = mb.Path(__file__).resolve().parents[2]
PAGES = [p.relative_to(ROOT).as_posix() for p in mb.pages(ROOT)]
SKIPPED_SHARE_LIMIT = 0.15

needs_torch = pytest.mark.skipif(BACKEND != "torch", reason="the docs' blocks run in the PyTorch suite only (the "
                                 "same commands under OneFlow's single-threaded CPU kernels would take several times "
                                 "the docs test's 4 minutes)")


def _blocks(page):
    return mb.parse_blocks((ROOT / page).read_text(encoding="utf-8"), page)


def _say(capsys, text):
    """Print past pytest's capture: the counts belong in the suite's output, not only in a failure's."""
    with capsys.disabled():
        print("\n" + text)


# ------------------------------------------------------------------------------------------- the runner's rules
def test_directives_and_fences_are_parsed():
    page = "\n".join([
        "Intro", "",
        "<!-- docs-test: skip gpu needs CUDA -->", "", "```bash", "python train.py --device 0", "```",
        "- a list item:", "",
        "    ```python", "    print('indented')", "    ```",
        "<!-- docs-test: file data/my.yaml -->", "```yaml", "nc: 1", "```",
        "<!-- docs-test: epochs 3 -->", "<!-- docs-test: plots -->", "~~~sh", "python train.py --epochs 30", "~~~",
        "```text", "not run", "```", "````bash", "```", "````"])
    blocks = mb.parse_blocks(page, "p.md")
    assert [(b.line, b.language, b.runner) for b in blocks] == [
        (5, "bash", "bash"), (10, "python", "python"), (14, "yaml", None), (19, "sh", "bash"), (22, "text", None),
        (25, "bash", "bash")]
    assert blocks[0].skip == ("gpu", "needs CUDA")
    assert blocks[1].code == "print('indented')\n"
    assert blocks[2].file == "data/my.yaml" and blocks[2].code == "nc: 1\n"
    assert blocks[3].epochs == 3 and blocks[3].plots and mb.tiny(blocks[3])[0] == "python train.py --epochs 3\n"
    assert blocks[5].code == "```\n"  # a longer fence holds a shorter one


@pytest.mark.parametrize("bad, says", [
    ("<!-- docs-test: skip slow -->\n```bash\nls\n```", "the reason must be one of"),
    ("<!-- docs-test: sikp gpu -->\n```bash\nls\n```", "unknown 'docs-test: sikp gpu'"),
    ("<!-- docs-test: skip gpu -->\nSome text.\n```bash\nls\n```", "above text, not above a code block"),
    ("```bash\nls\n```\n<!-- docs-test: skip gpu -->\n", "marks no block"),
    ("```bash\nls\n", "never closed"),
    ("<!-- docs-test: file /etc/passwd -->\n```yaml\na: 1\n```", "relative to the project folder"),
    ("<!-- docs-test: epochs 0 -->\n```bash\nls\n```", "whole number of epochs"),
    ("<!-- docs-test: plots yes -->\n```bash\nls\n```", "unknown 'docs-test: plots yes'"),
    ("Text <!-- docs-test: skip gpu --> more\n```bash\nls\n```", "must stand alone on its line"),
])
def test_a_malformed_directive_fails_the_page(bad, says):
    with pytest.raises(mb.DocsTestError, match=mb.re.escape(says)):
        mb.parse_blocks(bad, "p.md")


def test_tiny_sizes_are_the_documented_rewrites_only():
    code = ("python train.py --data d.yaml --img 640 --imgsz=320 --img-size 640 480 --batch-size 64 --batch 4 "
            "--epochs 300 --workers 8 --batch-size -1\n"
            "python data/scripts/make_shapes.py --train 100 --val 20 && python val.py --noval --img-size=1280\n"
            "python segment/train.py\npython classify/train.py --img 64\npython train.py --noplots\n"
            "echo --epochsX 3 --image-weights")
    new, changes = mb.tiny(mb.Block("p.md", 1, "bash", code))
    assert new == ("python train.py --noplots --data d.yaml --img 64 --imgsz=64 --img-size 64 64 --batch-size 8 "
                   "--batch 4 --epochs 1 --workers 8 --batch-size -1\n"
                   "python data/scripts/make_shapes.py --train 16 --val 8 && python val.py --noval --img-size=64\n"
                   "python segment/train.py --noplots\npython classify/train.py --img 64\npython train.py --noplots\n"
                   "echo --epochsX 3 --image-weights")
    assert ("--epochs 300", "--epochs 1") in changes and ("train.py", "train.py --noplots") in changes
    assert len(changes) == 10
    assert mb.tiny(mb.Block("p.md", 1, "python", "run(epochs=300) # --epochs 300"))[1] == []  # Python: as written


def test_a_failing_block_names_its_page_line_and_output(tmp_path):
    blocks = mb.parse_blocks("```bash\necho first > made.txt\n```\n\n```bash\ncat made.txt\necho to-stderr >&2\n"
                             "false\necho never\n```\n```bash\necho not reached\n```\n", "docs/x.md")
    result = mb.run_page(blocks, "docs/x.md", tmp_path, sys.executable)
    assert len(result.ran) == 2 and (tmp_path / "made.txt").read_text() == "first\n"
    assert result.failure.startswith("docs/x.md:5: the bash block failed (exit status 1)")
    assert "first\nto-stderr" in result.failure and "never" not in result.failure.split("output lines:")[1]


def test_a_file_block_is_written_for_the_blocks_after_it(tmp_path):
    (tmp_path / "project").mkdir()
    page = ("<!-- docs-test: file ../datasets/my.yaml -->\n```yaml\nnames: [a]\n```\n"
            "```bash\ngrep -q 'names: \\[a\\]' ../datasets/my.yaml\n```\n")
    result = mb.run_page(mb.parse_blocks(page, "p.md"), "p.md", tmp_path / "project", sys.executable)
    assert not result.failure and len(result.files) == 1 and len(result.ran) == 1
    assert (tmp_path / "datasets" / "my.yaml").read_text() == "names: [a]\n"


def test_progress_bars_are_shortened_to_their_last_state():
    out = "start\n 10%|#  | 1/10\r 50%|##  | 5/10\n100%|###| 10/10\nval  0%| | 0/1\nval 100%|#| 1/1\ndone\n"
    assert mb.readable_lines(out) == ["start", "100%|###| 10/10", "val 100%|#| 1/1", "done"]


def test_a_background_process_left_by_a_block_is_stopped(tmp_path):
    blocks = mb.parse_blocks("```bash\n(sleep 30; touch late.txt) &\necho $! > pid\n```\n", "p.md")
    t0 = mb.time.monotonic()
    result = mb.run_page(blocks, "p.md", tmp_path, sys.executable)
    assert not result.failure and mb.time.monotonic() - t0 < 20
    pid = int((tmp_path / "pid").read_text())
    deadline = mb.time.monotonic() + 5
    while alive(pid) and mb.time.monotonic() < deadline:
        mb.time.sleep(0.05)
    assert not alive(pid), "the block's background process outlived the block"


# --------------------------------------------------------------------------------------------------- the pages
def test_every_page_parses_and_few_blocks_are_skipped(capsys):
    assert "README.md" in PAGES
    all_blocks = [b for page in PAGES for b in _blocks(page)]
    runnable, skipped, files = mb.count(all_blocks)
    n_skipped = sum(len(v) for v in skipped.values())
    total = len(runnable) + n_skipped
    reasons = ", ".join(f"{r}: {len(v)}" for r, v in sorted(skipped.items()))
    _say(capsys, f"docs blocks: {len(PAGES)} pages, {total} shell/Python blocks: {len(runnable)} run, {n_skipped} "
                 f"skipped ({reasons or 'none'}), {len(files)} written as files")
    assert runnable, "no bash or python block found in README.md and docs/"
    assert n_skipped < SKIPPED_SHARE_LIMIT * total, (
        f"{n_skipped} of {total} blocks are skipped ({reasons}): at most {SKIPPED_SHARE_LIMIT:.0%}; run them at tiny "
        f"sizes instead (tests/helpers/markdown_blocks.py)")


JOBS = int(os.environ.get("DOCS_TEST_JOBS", "2"))  # pages run side by side: most of a block is one process


@pytest.fixture(scope="session")
def page_runs(request, tmp_path_factory, shared_dir):
    """The selected pages' runs, started together on JOBS threads (each page in its own sandbox); maps a page to
    the future of its PageResult."""
    from concurrent.futures import ThreadPoolExecutor
    selected = [item.callspec.params["page"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_page_blocks_run"]
    shapes = mb.make_shapes_sets(ROOT, sys.executable, tmp_path_factory.mktemp("shapes"))
    pool = ThreadPoolExecutor(max_workers=max(1, JOBS), thread_name_prefix="docs-page")
    runs = {}
    for page in selected:
        base = tmp_path_factory.mktemp("page-" + page.replace("/", "-").removesuffix(".md"))
        runs[page] = pool.submit(_run_page, page, base, shared_dir, shapes)
    yield runs
    pool.shutdown(wait=True, cancel_futures=True)


def _run_page(page, base, shared, shapes):
    project = mb.make_sandbox(ROOT, base, shared, shapes)
    return mb.run_page(_blocks(page), page, project, sys.executable)


@pytest.mark.slow
@needs_torch
@pytest.mark.parametrize("page", PAGES)
def test_page_blocks_run(page, page_runs, capsys):
    blocks = _blocks(page)
    if not any(b.runner or b.skip for b in blocks):
        pytest.skip(f"{page} has no bash or python block")
    result = page_runs[page].result()
    _say(capsys, result.summary())
    if result.failure:
        pytest.fail(result.failure, pytrace=False)
