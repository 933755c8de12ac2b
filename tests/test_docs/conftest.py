"""The built docs site, shared by the build and browser tests (one `mkdocs build --strict` per session)."""
import pytest

from tests.helpers import docs_site


@pytest.fixture(scope="session")
def built_site(tmp_path_factory, root_dir):
    """(site folder, build output) of a clean copy of the project. Without MkDocs the tests skip, except in CI
    (CI=true), where the set-up installs it and its absence is a failure."""
    missing = docs_site.mkdocs_missing()
    if missing:
        message = f"{missing}: `make setup` installs it (requirements.txt)"
        if docs_site.in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    if not (root_dir / "mkdocs.yml").is_file():
        pytest.fail("mkdocs.yml not found in the project folder", pytrace=False)
    return docs_site.build_site(root_dir, tmp_path_factory.mktemp("docs-site"))
