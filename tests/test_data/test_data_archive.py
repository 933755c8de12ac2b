"""A dataset's download: zip extracts only inside its dataset folder (utils/archive_extract.py): members that leave it
(`../`, absolute names, links) or replace existing files refuse the whole archive in one line naming the archive and
the member, before anything is written; the official layout (coco128.zip holds coco128/...) lands where it should.
The zips are served by file:// URLs (no network), with the user's consent (a zip download needs it)."""
import stat
import zipfile

import pytest
import yaml

from utils.archive_extract import UnsafeArchive, safe_extract_zip
from utils.dataset_config import DatasetError, check_dataset

pytestmark = pytest.mark.framework_free  # tested once, in the PyTorch suite (tests/conftest.py)


def _zip(path, members, links=()):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
        for name, target in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, target)
    return path


def _tree(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _dataset_yaml(tmp_path, archive):
    y = tmp_path / "ds.yaml"
    y.write_text(yaml.safe_dump({"path": str(tmp_path / "datasets" / "coco128"), "train": "images", "val": "images",
                                 "names": ["a"], "download": archive.as_uri()}))
    return y


def test_official_layout_lands_in_the_dataset_folder(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    archive = _zip(src / "coco128.zip", {"coco128/images/a.jpg": b"jpg", "coco128/labels/a.txt": b"0 .5 .5 .1 .1\n"})
    d = check_dataset(str(_dataset_yaml(tmp_path, archive)), allow_scripts=True)
    folder = tmp_path / "datasets" / "coco128"
    assert d["val"] == str(folder / "images")
    assert _tree(tmp_path / "datasets") == ["coco128", "coco128/images", "coco128/images/a.jpg", "coco128/labels",
                                            "coco128/labels/a.txt"]  # and the downloaded zip is gone


def test_archive_without_the_folder_name_extracts_into_the_folder(tmp_path):
    folder = tmp_path / "ds"
    safe_extract_zip(_zip(tmp_path / "x.zip", {"images/a.jpg": b"1", "README.txt": b"r"}), folder)
    assert _tree(tmp_path) == ["ds", "ds/README.txt", "ds/images", "ds/images/a.jpg", "x.zip"]


@pytest.mark.parametrize("member,why", [("../evil.py", "'..' path"), ("coco128/../../evil.py", "'..' path"),
                                       ("/tmp/evil.py", "absolute"), ("coco128\\..\\..\\evil.py", "'..' path")])
def test_members_that_leave_the_folder_refuse_the_archive(tmp_path, member, why):
    src = tmp_path / "src"
    src.mkdir()
    archive = _zip(src / "coco128.zip", {"coco128/images/a.jpg": b"jpg", member: b"data"})
    with pytest.raises(DatasetError) as e:
        check_dataset(str(_dataset_yaml(tmp_path, archive)), allow_scripts=True)
    msg = str(e.value)
    assert "\n" not in msg and archive.name in msg and f"'{member}'" in msg and why in msg, msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.yaml", "src"], "nothing extracted, the download removed"
    assert not (tmp_path / "evil.py").exists()


def test_link_members_and_links_on_disk_are_refused(tmp_path):
    folder, outside = tmp_path / "ds", tmp_path / "outside"
    outside.mkdir()
    folder.mkdir()
    with pytest.raises(UnsafeArchive, match="'images/x' is a symbolic link"):
        safe_extract_zip(_zip(tmp_path / "l.zip", {"images/a.jpg": b"1"}, links=[("images/x", "/etc")]), folder)
    (folder / "labels").symlink_to(outside)  # a folder of the dataset that is a link out of it
    with pytest.raises(UnsafeArchive, match=f"'labels/a.txt' would be written outside the dataset folder {folder}"):
        safe_extract_zip(_zip(tmp_path / "o.zip", {"images/a.jpg": b"1", "labels/a.txt": b"0"}), folder)
    assert list(outside.iterdir()) == [] and not (folder / "images").exists()


def test_existing_files_are_never_replaced(tmp_path):
    folder = tmp_path / "ds"
    (folder / "labels").mkdir(parents=True)
    (folder / "labels" / "a.txt").write_text("mine")
    with pytest.raises(UnsafeArchive, match=f"'labels/a.txt' would replace the existing file {folder}/labels/a.txt"):
        safe_extract_zip(_zip(tmp_path / "x.zip", {"images/a.jpg": b"1", "labels/a.txt": b"theirs"}), folder)
    assert (folder / "labels" / "a.txt").read_text() == "mine" and not (folder / "images").exists()
    with pytest.raises(UnsafeArchive, match="'./images/b.jpg' appears twice"):
        safe_extract_zip(_zip(tmp_path / "d.zip", {"images/b.jpg": b"1", "./images/b.jpg": b"2"}), folder)
