"""Image listing (utils/data/files.py list_image_files) over folders with symbolic links: a link that loops back into
the image folder, or reaches a folder or file a second way, lists each real image once, with one warning naming the
link (it used to turn 8 images into 328)."""
import logging

import pytest

from utils.data.files import list_image_files

pytestmark = pytest.mark.framework_free  # tested once, in the PyTorch suite (tests/conftest.py)


@pytest.fixture
def warnings_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="yolov5"):
        yield lambda: [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _images(folder, n=8):
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"{i}.jpg").write_bytes(b"x")
    return folder


def test_a_link_looping_back_lists_each_image_once(tmp_path, warnings_logged):
    images = _images(tmp_path / "images")
    (images / "loop").symlink_to("..")  # images/loop -> tmp_path, which holds images/ again
    (images / "self").symlink_to(".")
    files = list_image_files(images)
    assert files == sorted(str(images / f"{i}.jpg") for i in range(8))
    lines = warnings_logged()
    assert len(lines) == 1 and "symbolic links" in lines[0] and str(images / "loop") in lines[0], lines


def test_two_ways_to_one_folder_or_file_list_it_once(tmp_path, warnings_logged):
    images = _images(tmp_path / "images" / "a", n=3)
    (tmp_path / "images" / "b").symlink_to(images)
    (tmp_path / "images" / "c.jpg").symlink_to(images / "0.jpg")
    files = list_image_files(tmp_path / "images")
    assert files == sorted(str(images / f"{i}.jpg") for i in range(3))
    assert len(warnings_logged()) == 1


def test_plain_folders_and_hidden_names_as_before(tmp_path, warnings_logged):
    images = _images(tmp_path / "images" / "sub", n=2)
    (images / ".hidden.jpg").write_bytes(b"x")
    (tmp_path / "images" / ".cache").mkdir()
    (tmp_path / "images" / ".cache" / "x.jpg").write_bytes(b"x")
    (tmp_path / "images" / "noext").write_bytes(b"x")
    assert list_image_files(tmp_path / "images") == [str(images / "0.jpg"), str(images / "1.jpg")]
    assert warnings_logged() == []
