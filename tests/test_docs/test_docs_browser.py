"""The docs site in a real browser: the built site is served on 127.0.0.1 and opened in headless Chromium (Debian's
`chromium`, installed by `make setup`), driven through the Chrome DevTools Protocol (tests/helpers/docs_site.py).
On the index and the three pages with the most pictures: every picture loads (decoded, naturalWidth > 0), and no
console error, uncaught exception or failed load (every host but 127.0.0.1 is unreachable, so a page that needs the
network shows it). Then "resume" is typed into the search box, as a reader would, and must give results (Material's
search runs in a web worker over search/search_index.json).

A browser test per backend would be the same test twice: it runs in the PyTorch suite."""
import re

import cv2
import numpy as np
import pytest

from tests.helpers import docs_site
from utils.backend import BACKEND

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(BACKEND != "torch", reason="the site does not depend on the backend: the browser test runs "
                                                  "in the PyTorch suite"),
]
PAGES_WITH_PICTURES = 3


@pytest.fixture(scope="module")
def chromium_binary():
    binary = docs_site.find_chromium()
    if binary is None:
        message = ("no Chromium found (" + ", ".join(docs_site.CHROMIUM_NAMES) + "): `make setup` installs Debian's "
                   "chromium package (scripts/setup.sh browser)")
        if docs_site.in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return binary


def _look_at(page, url):
    """What a reader would see go wrong on url: pictures that did not load, and errors."""
    page.errors.clear()
    page.open(url)
    broken = [f"{i['src']} (complete={i['complete']}, naturalWidth={i['width']})"
              for i in page.evaluate(docs_site.IMAGES_JS) if not (i["complete"] and i["width"] > 0)]
    return broken, list(page.errors)


def _pages_with_most_pictures(site, n):
    counts = {p.relative_to(site).as_posix(): len(re.findall(r"<img\b", p.read_text(encoding="utf-8")))
              for p in site.glob("*.html") if p.name not in ("index.html", "404.html")}
    return sorted(counts, key=lambda p: (-counts[p], p))[:n]


def test_the_checks_see_a_broken_page(chromium_binary, tmp_path):
    """The checks can fail: a missing picture, a console error, an uncaught exception and a stylesheet from the
    network (web fonts: the machine may have no network) are each reported, and a picture that loads is not."""
    site = tmp_path / "site"
    site.mkdir()
    cv2.imwrite(str(site / "ok.png"), np.full((8, 8, 3), 200, np.uint8))
    (site / "broken.html").write_text(
        "<html><head><link rel='stylesheet' href='https://fonts.googleapis.com/css?family=Roboto'></head>"
        "<body><img src='ok.png'><img src='missing.png'>"
        "<script>console.error('a console error'); setTimeout(() => { throw new Error('uncaught'); }, 0);</script>"
        "</body></html>")
    with docs_site.serve(site) as base, docs_site.chromium(chromium_binary, tmp_path / "profile") as page:
        broken, errors = _look_at(page, base + "broken.html")
    assert len(broken) == 1 and "missing.png" in broken[0], broken
    assert any("a console error" in e for e in errors), errors
    assert any("uncaught" in e for e in errors), errors
    assert any("missing.png" in e for e in errors), errors  # the failed load, as the network log says it
    assert any("fonts.googleapis.com" in e for e in errors), errors


def test_site_in_chromium(built_site, chromium_binary, tmp_path, capsys):
    site, _ = built_site
    pages = ["index.html", *_pages_with_most_pictures(site, PAGES_WITH_PICTURES)]
    problems, seen = [], []
    with docs_site.serve(site) as base, docs_site.chromium(chromium_binary, tmp_path / "profile") as page:
        for name in pages:
            broken, errors = _look_at(page, base + name)
            seen.append(f"{name}: {page.evaluate('document.images.length')} pictures")
            problems += [f"{name}: picture did not load: {b}" for b in broken]
            problems += [f"{name}: {e}" for e in errors]
        page.errors.clear()
        page.open(base + "index.html")
        results = docs_site.search(page, "resume")
        page.idle(0.5)
        problems += [f"index.html, searching: {e}" for e in page.errors]
    with capsys.disabled():
        print(f"\nbrowser: {'; '.join(seen)}; search 'resume': {results}")
    assert results and results["count"] > 0, f"searching 'resume' showed no result: {results}"
    assert not problems, "in Chromium:\n  " + "\n  ".join(problems)
