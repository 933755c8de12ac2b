"""The docs site builds from a fresh clone with `mkdocs build --strict` (a broken link, a missing picture or page,
a missing snippet fails it), every page under docs/ is built and in the navigation, and every picture, script and
stylesheet a page names is in the site. Without MkDocs these tests skip, except in CI (CI=true), where they fail."""
import json
import re

import pytest

from tests.helpers import docs_site
from utils.backend import BACKEND

pytestmark = pytest.mark.skipif(BACKEND != "torch", reason="the site does not depend on the backend: it is built in "
                                                           "the PyTorch suite")


def test_site_builds_strict_from_a_clean_copy(built_site, root_dir):
    site, output = built_site
    assert (site / "index.html").is_file(), output[-3000:]
    pages = sorted(p.relative_to(root_dir / "docs") for p in (root_dir / "docs").rglob("*.md"))
    nav = (site / "index.html").read_text(encoding="utf-8")
    for page in pages:
        html = page.with_suffix(".html")
        assert (site / html).is_file(), f"docs/{page} was not built ({html} missing):\n{output[-3000:]}"
        if page.name != "index.md":
            assert re.search(rf'href="(\./)?{re.escape(html.as_posix())}"', nav), \
                f"docs/{page} is not in the site's navigation (mkdocs.yml nav:)"


def test_every_local_picture_script_and_stylesheet_is_in_the_site(built_site):
    site, _ = built_site
    missing = docs_site.missing_local_files(site)
    assert not missing, "pages name files the site does not have:\n" + "\n".join(f"  {p}: {r}" for p, r in missing)


def test_search_index_holds_the_pages(built_site):
    site, _ = built_site
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    docs = index["docs"]
    assert any("resume" in (d.get("title", "") + d.get("text", "")).lower() for d in docs), \
        "no page of the search index mentions 'resume'"
    assert len({d["location"].split("#")[0] for d in docs}) > 5, "the search index holds fewer than 6 pages"
