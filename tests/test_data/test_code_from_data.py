"""Code never comes from data (utils/archive_extract.py, utils/dataset_config.py): a dataset archive is staged in a
new folder off the import path, bounded in size and compression ratio while it is written (its declared sizes may
lie), refused whole if it holds importable code, and moved into the dataset folder only when complete; a refused one
leaves no file, partial ones included. A zip `download:` needs the user's consent as a script does, and no download
ever writes into the project folder or a folder Python imports from (where a missing `path:` would put it).

Archives are built here and served by file:// URLs; nothing touches the network. Framework-free code: one backend
suffices."""
import io
import os
import struct
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from utils import archive_extract, downloads
from utils.archive_extract import ArchiveError, UnsafeArchive, extract_archive, unsafe_data_folder_reason
from utils.data.converters import fetch
from utils.dataset_config import ALLOW_SCRIPTS_ENV, DataFolderRefused, DatasetError, DownloadScriptRefused, \
    check_dataset
from utils.paths import ROOT

pytestmark = pytest.mark.framework_free  # tested once, in the PyTorch suite (tests/conftest.py)

MB = 1 << 20


# ------------------------------------------------------------------------------------------------ helpers
def _zip(path, members, compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def _tar(path, members, mode="w"):
    with tarfile.open(path, mode) as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def _snapshot(*folders):
    """Every path under folders with its size: what 'leaves no file' compares."""
    out = {}
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder):
            for n in dirnames + filenames:
                p = os.path.join(dirpath, n)
                out[p] = os.lstat(p).st_size if n in filenames else "dir"
    return out


def _project_top():
    return sorted(os.listdir(ROOT))


def _one_line(e):
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


@pytest.fixture
def src(tmp_path):
    """Where the test's archives lie (outside every dataset folder)."""
    d = tmp_path / "src"
    d.mkdir()
    return d


@pytest.fixture(autouse=True)
def _no_consent_from_the_environment(monkeypatch):
    monkeypatch.delenv(ALLOW_SCRIPTS_ENV, raising=False)


def _data_yaml(tmp_path, archive, path="__folder__"):
    """A data YAML whose val images are missing and whose download: is the archive's file:// URL. path: the
    dataset folder tmp_path/datasets/<archive stem> by default; None leaves 'path:' out."""
    spec = {"train": "images", "val": "images", "names": ["a"], "download": archive.as_uri()}
    if path == "__folder__":
        path = str(tmp_path / "datasets" / archive.stem)
    if path is not None:
        spec["path"] = path
    y = tmp_path / "data.yaml"
    y.write_text(yaml.safe_dump(spec))
    return y


# ------------------------------------------------------------------------------------------------ code inside
CODE_MEMBERS = ["yaml.py", "x.pth", "sub/evil.py", "images/a.cpython-311-x86_64-linux-gnu.so", "m.pyc", "YAML.PY"]


@pytest.mark.parametrize("member", CODE_MEMBERS)
def test_a_zip_holding_code_is_refused_and_leaves_no_file(tmp_path, src, member):
    archive = _zip(src / "ds.zip", {"images/a.jpg": b"jpg", "labels/a.txt": b"0 .5 .5 .1 .1\n", member: b"import os"})
    before = _snapshot(tmp_path)
    with pytest.raises(UnsafeArchive) as e:
        extract_archive(archive, tmp_path / "ds")
    msg = _one_line(e)
    assert f"'{member}'" in msg and "code" in msg and str(archive) in msg, msg
    assert _snapshot(tmp_path) == before  # no dataset folder, no staging folder, nothing partial


@pytest.mark.parametrize("member", ["yaml.py", "x.pth", "sub/evil.py"])
def test_a_tar_holding_code_is_refused_and_leaves_no_file(tmp_path, src, member):
    archive = _tar(src / "ds.tar.gz", {"images/a.jpg": b"jpg", member: b"import os"}, mode="w:gz")
    before = _snapshot(tmp_path)
    with pytest.raises(UnsafeArchive, match=f"'{member}' is Python code"):
        fetch.unpack_archive(archive, tmp_path / "ds")
    assert _snapshot(tmp_path) == before


def test_code_found_on_disk_after_writing_is_refused_too(tmp_path):
    """The second look, from the staged files themselves (names the archive spelt otherwise, links)."""
    staged = tmp_path / "staged"
    (staged / "sub").mkdir(parents=True)
    (staged / "sub" / "a.jpg").write_bytes(b"1")
    archive_extract._refuse_code_left(staged, "x.zip")
    (staged / "sub" / "site.pth").write_text("import os")
    with pytest.raises(UnsafeArchive, match="'sub/site.pth' is Python code"):
        archive_extract._refuse_code_left(staged, "x.zip")
    (staged / "sub" / "site.pth").unlink()
    (staged / "link").symlink_to("/etc")
    with pytest.raises(UnsafeArchive, match="'link' is not a plain file or folder"):
        archive_extract._refuse_code_left(staged, "x.zip")


def test_code_in_a_zip_download_is_refused_through_check_dataset(tmp_path, src):
    archive = _zip(src / "coco128.zip", {"coco128/images/a.jpg": b"jpg", "coco128/yaml.py": b"import os"})
    y = _data_yaml(tmp_path, archive)
    with pytest.raises(DatasetError) as e:
        check_dataset(str(y), allow_scripts=True)
    msg = _one_line(e)
    assert "'coco128/yaml.py' is Python code" in msg and "network" not in msg, msg
    assert sorted(os.listdir(tmp_path)) == ["data.yaml", "src"]  # no datasets/, no download left behind


# ------------------------------------------------------------------------------------------------ bounds
def test_a_zip_bomb_is_refused_before_writing(tmp_path, src):
    archive = _zip(src / "bomb.zip", {"images/a.jpg": b"jpg", "labels/zeros.txt": bytes(50 * MB)})
    assert archive.stat().st_size < 200_000  # 50 MB of zeros in ~50 KB
    before = _snapshot(tmp_path)
    with pytest.raises(UnsafeArchive) as e:
        extract_archive(archive, tmp_path / "ds")
    msg = _one_line(e)
    assert "'labels/zeros.txt' expands" in msg and "compression bomb" in msg, msg
    assert _snapshot(tmp_path) == before


def test_the_ratio_bound_holds_while_writing(tmp_path, src, monkeypatch):
    """Declared sizes that pass the first check do not let a member expand past the ratio: it is counted as written
    and stopped, its partial file removed."""
    archive = _zip(src / "bomb.zip", {"images/a.jpg": b"jpg", "labels/zeros.txt": bytes(8 * MB)})
    real_check = archive_extract._check_declared
    monkeypatch.setattr(archive_extract, "_check_declared", lambda plan, budget: None)  # as if the sizes lied
    seen = []
    real_copy = archive_extract._copy_counted

    def copy(m, dst, budget):
        seen.append(dst)
        return real_copy(m, dst, budget)
    monkeypatch.setattr(archive_extract, "_copy_counted", copy)
    before = _snapshot(tmp_path)
    with pytest.raises(UnsafeArchive, match="'labels/zeros.txt' expands .* compression bomb"):
        extract_archive(archive, tmp_path / "ds")
    assert _snapshot(tmp_path) == before and seen and not any(p.exists() for p in seen)
    monkeypatch.setattr(archive_extract, "_check_declared", real_check)
    with pytest.raises(UnsafeArchive, match="expands"):  # and the first check alone refuses it too
        extract_archive(archive, tmp_path / "ds")


def test_the_total_bound_is_checked_before_and_while_writing(tmp_path, src, monkeypatch):
    archive = _zip(src / "big.zip", {f"images/{i}.jpg": os.urandom(MB) for i in range(3)}, zipfile.ZIP_STORED)
    before = _snapshot(tmp_path)
    with pytest.raises(UnsafeArchive, match="unpacks to 3.1 MB or more, over 2.1 MB .the bound set"):
        extract_archive(archive, tmp_path / "ds", max_bytes=2 * MB)
    monkeypatch.setattr(archive_extract, "_check_declared", lambda plan, budget: None)  # as if the sizes lied
    with pytest.raises(UnsafeArchive, match="unpacks to .* over 2.1 MB"):
        extract_archive(archive, tmp_path / "ds", max_bytes=2 * MB)
    assert _snapshot(tmp_path) == before
    assert len(extract_archive(archive, tmp_path / "ds", max_bytes=4 * MB)) == 3  # under the bound: unpacked


def test_the_free_disk_space_bounds_an_archive(tmp_path, src, monkeypatch):
    archive = _zip(src / "ds.zip", {"images/a.jpg": os.urandom(MB)}, zipfile.ZIP_STORED)
    usage = archive_extract.shutil.disk_usage(tmp_path)
    monkeypatch.setattr(archive_extract.shutil, "disk_usage", lambda p: usage._replace(free=MB // 2))
    with pytest.raises(UnsafeArchive) as e:
        extract_archive(archive, tmp_path / "ds")
    assert "free on the disk" in _one_line(e) and not (tmp_path / "ds").exists()


def test_a_tar_bomb_is_refused(tmp_path, src):
    archive = _tar(src / "bomb.tar.gz", {"images/a.jpg": b"jpg", "labels/zeros.txt": bytes(20 * MB)}, mode="w:gz")
    before = _snapshot(tmp_path)
    with pytest.raises(UnsafeArchive, match="compression bomb"):
        fetch.unpack_archive(archive, tmp_path / "ds")
    assert _snapshot(tmp_path) == before


# ------------------------------------------------------------------------------------------------ sizes that lie
def _patch_sizes(archive, name, file_size=None, compress_size=None):
    """Rewrite the sizes the zip declares for member `name` (local header and central directory)."""
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as z:
        local = z.getinfo(name).header_offset
    central = data.find(b"PK\x01\x02")  # the central directory's entries, until the one of this name
    while data[central + 46:central + 46 + len(name)] != name.encode():
        central = data.find(b"PK\x01\x02", central + 4)
    for off, field in ((local + 18, compress_size), (local + 22, file_size),
                       (central + 20, compress_size), (central + 24, file_size)):
        if field is not None:
            data[off:off + 4] = struct.pack("<I", field)
    archive.write_bytes(bytes(data))
    return archive


def test_a_member_declaring_fewer_bytes_than_it_holds_is_refused(tmp_path, src):
    archive = _patch_sizes(_zip(src / "lie.zip", {"images/a.jpg": b"jpg", "labels/zeros.txt": bytes(50 * MB)}),
                           "labels/zeros.txt", file_size=1000)
    before = _snapshot(tmp_path)
    with pytest.raises(ArchiveError) as e:
        extract_archive(archive, tmp_path / "ds")
    msg = _one_line(e)
    assert "labels/zeros.txt" in msg and "nothing was extracted" in msg, msg
    assert _snapshot(tmp_path) == before


def test_a_member_declaring_more_packed_bytes_than_it_has_room_for_is_measured(tmp_path, src):
    """compress_size = file_size (ratio 1 declared) for 50 MB of zeros in 50 KB: its real room in the file counts."""
    archive = _patch_sizes(_zip(src / "lie.zip", {"labels/zeros.txt": bytes(50 * MB), "images/a.jpg": b"jpg"}),
                           "labels/zeros.txt", compress_size=50 * MB)
    before = _snapshot(tmp_path)
    with pytest.raises(UnsafeArchive, match="'labels/zeros.txt' expands .* compression bomb"):
        extract_archive(archive, tmp_path / "ds")
    assert _snapshot(tmp_path) == before


def test_a_stream_longer_than_declared_is_cut_at_the_declaration(tmp_path, src, monkeypatch):
    """Whatever a reader returns, no member writes more than it declared (an endless stream ends the test only so)."""
    archive = _zip(src / "ds.zip", {"images/a.jpg": b"jpg", "labels/a.txt": b"0 .5 .5 .1 .1\n"})

    class Endless(io.RawIOBase):
        def readable(self):
            return True

        def readinto(self, b):
            b[:] = bytes(len(b))
            return len(b)
    real = archive_extract._zip_members

    def members(z, a):
        out = real(z, a)
        out[-1].open = lambda: io.BufferedReader(Endless())
        return out
    monkeypatch.setattr(archive_extract, "_zip_members", members)
    before = _snapshot(tmp_path)
    with pytest.raises(UnsafeArchive, match="'labels/a.txt' holds more than the 14 bytes it declares"):
        extract_archive(archive, tmp_path / "ds")
    assert _snapshot(tmp_path) == before


def test_overlapping_members_are_refused(tmp_path, src):
    """Two directory entries pointing at one member's data: the construction of the best zip bombs."""
    archive = _zip(src / "ov.zip", {"a.txt": b"x" * 100, "b.txt": b"y" * 100})
    data = bytearray(archive.read_bytes())
    second = data.rfind(b"PK\x01\x02")  # b.txt's central entry: point it at a.txt's local header (offset 0)
    data[second + 42:second + 46] = struct.pack("<I", 0)
    archive.write_bytes(bytes(data))
    with pytest.raises(ArchiveError) as e:
        extract_archive(archive, tmp_path / "ds")
    assert "b.txt" in _one_line(e) and not (tmp_path / "ds").exists()


# ------------------------------------------------------------------------------------------------ disk full
def _full_disk(monkeypatch, after, where):
    """archive_extract's and downloads' open() for writing ('xb') fails with ENOSPC once `after` bytes are written to
    files whose path satisfies where(path); returns the list of chunk sizes written."""
    real_open = open
    written = []

    class Full(io.FileIO):
        def write(self, b):
            if sum(written) + len(b) > after:
                raise OSError(28, "No space left on device")
            written.append(len(b))
            return super().write(b)

    def fake_open(file, mode="r", *a, **k):
        return Full(file, mode) if mode == "xb" and where(str(file)) else real_open(file, mode, *a, **k)
    monkeypatch.setattr(archive_extract, "open", fake_open, raising=False)
    monkeypatch.setattr(downloads, "open", fake_open, raising=False)  # the download's file (utils/downloads.py)
    return written


def test_a_full_disk_while_unpacking_says_so_and_leaves_no_partial_file(tmp_path, src, monkeypatch):
    archive = _zip(src / "coco128.zip", {f"coco128/images/{i}.jpg": os.urandom(300_000) for i in range(4)},
                   zipfile.ZIP_STORED)
    written = _full_disk(monkeypatch, 700_000, lambda f: "yolo-partial" in os.path.dirname(f))  # staged members
    y = _data_yaml(tmp_path, archive)
    with pytest.raises(DatasetError) as e:
        check_dataset(str(y), allow_scripts=True)
    msg = _one_line(e)
    assert "filled up" in msg and "network" not in msg and str(archive.name) in msg, msg
    assert written and sorted(os.listdir(tmp_path)) == ["data.yaml", "src"]


def test_a_full_disk_while_downloading_says_so_and_leaves_no_partial_file(tmp_path, src, monkeypatch):
    archive = _zip(src / "coco128.zip", {"coco128/images/a.jpg": os.urandom(3 * MB)}, zipfile.ZIP_STORED)
    written = _full_disk(monkeypatch, 2 * MB, lambda f: f.endswith(".zip"))  # the download itself
    y = _data_yaml(tmp_path, archive)
    with pytest.raises(DatasetError) as e:
        check_dataset(str(y), allow_scripts=True)
    msg = _one_line(e)
    assert "filled up" in msg and "partial download was removed" in msg and "network" not in msg, msg
    assert written and sorted(os.listdir(tmp_path)) == ["data.yaml", "src"]


# ------------------------------------------------------------------------------------------------ staging
def test_staging_is_a_new_folder_off_the_import_path_removed_after(tmp_path, src, monkeypatch):
    """Even for a dataset folder inside a folder on sys.path, staging happens elsewhere."""
    on_path = tmp_path / "onpath"
    (on_path / "sub").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(on_path))
    made = []
    real = archive_extract._new_staging_folder

    def staging(parent, name):
        tmp = real(parent, name)
        made.append((tmp, sorted(os.listdir(tmp))))
        return tmp
    monkeypatch.setattr(archive_extract, "_new_staging_folder", staging)
    archive = _zip(src / "ds.zip", {"images/a.jpg": b"jpg"})
    for folder in (tmp_path / "plain" / "ds", on_path / "sub" / "ds"):
        assert extract_archive(archive, folder) == [folder / "images" / "a.jpg"]
    for tmp, listing in made:
        assert listing == [] and not tmp.exists()  # new and empty when made; gone after
        import_path = [Path(os.path.realpath(p or ".")) for p in sys.path]
        assert not any(tmp == p or p in tmp.parents for p in import_path)
    assert made[0][0].parent == tmp_path  # beside the dataset (the same disk) when that is off the import path


def test_a_link_on_disk_cannot_take_the_files_out(tmp_path, src):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "images").symlink_to(outside)
    with pytest.raises(UnsafeArchive, match="outside the dataset folder"):
        extract_archive(_zip(src / "ds.zip", {"images/a.jpg": b"jpg"}), tmp_path / "ds")
    assert list(outside.iterdir()) == []


# ------------------------------------------------------------------------------------------------ where data may go
@pytest.mark.parametrize("path", [None, "", ".", "utils", "data/..", ".."])
def test_no_download_into_the_project_folder(tmp_path, src, path):
    """'path:' missing, empty or '.' resolves to the project folder (as in ultralytics/yolov5); a download there is
    refused in one line saying to set 'path:', before anything is fetched."""
    archive = _zip(src / "ds.zip", {"images/a.jpg": b"jpg", "yaml.py": b"raise SystemExit('imported')"})
    y = _data_yaml(tmp_path, archive, path=path)
    before = _project_top()
    with pytest.raises(DataFolderRefused) as e:
        check_dataset(str(y), allow_scripts=True)
    msg = _one_line(e)
    assert "Set 'path:'" in msg and str(y) in msg, msg
    assert _project_top() == before and not (ROOT / "yaml.py").exists()
    assert sorted(os.listdir(tmp_path)) == ["data.yaml", "src"]


def test_unpacking_into_the_project_folder_is_refused_directly(src):
    archive = _zip(src / "ds.zip", {"images/a.jpg": b"jpg"})
    before = _project_top()
    for folder in (ROOT, ROOT / "utils", ROOT / "models" / "x", ROOT.parent):
        with pytest.raises(UnsafeArchive, match="not extracted, because the dataset folder"):
            extract_archive(archive, folder)
    assert _project_top() == before


def test_folders_python_imports_from_are_refused(tmp_path, monkeypatch):
    import site
    on_path = tmp_path / "lib"
    on_path.mkdir()
    monkeypatch.syspath_prepend(str(on_path))
    assert "on sys.path" in unsafe_data_folder_reason(on_path)
    assert "holds" in unsafe_data_folder_reason(tmp_path)  # a folder above one
    for sp in site.getsitepackages():
        if os.path.isdir(sp):
            assert "imports modules and .pth files from" in unsafe_data_folder_reason(os.path.join(sp, "ds"))
    assert unsafe_data_folder_reason(on_path / "ds") is None  # below a user's folder on the path: data may go there
    assert unsafe_data_folder_reason(ROOT.parent / "datasets" / "coco128") is None  # coco128.yaml's official place


def test_no_download_into_site_packages(tmp_path, src):
    """A YAML naming a site-packages folder: a .pth file there would run at every Python start."""
    import site
    sp = next((p for p in site.getsitepackages() if os.path.isdir(p)), None)
    if sp is None:
        pytest.skip("no site-packages folder")
    archive = _zip(src / "ds.zip", {"images/a.jpg": b"jpg", "x.pth": b"import os"})
    y = _data_yaml(tmp_path, archive, path=os.path.join(sp, "ds"))
    before = sorted(os.listdir(sp))
    with pytest.raises(DataFolderRefused) as e:
        check_dataset(str(y), allow_scripts=True)
    assert "Set 'path:'" in _one_line(e) and sorted(os.listdir(sp)) == before


def test_reading_data_with_path_missing_still_works(tmp_path, coco128_dir):
    """Only downloads are refused: data already there is read from paths relative to the project, as before."""
    rel = os.path.relpath(coco128_dir / "images" / "train2017", ROOT)
    y = tmp_path / "d.yaml"
    y.write_text(yaml.safe_dump({"train": rel, "val": rel, "names": ["a"],
                                 "download": "https://example.invalid/x.zip"}))
    d = check_dataset(str(y))
    assert d["path"] == str(ROOT) and d["val"] == str((coco128_dir / "images" / "train2017").resolve())


# ------------------------------------------------------------------------------------------------ consent
def test_a_zip_download_without_consent_is_refused_in_one_line(tmp_path, src):
    archive = _zip(src / "coco128.zip", {"coco128/images/a.jpg": b"jpg"})
    y = _data_yaml(tmp_path, archive)
    with pytest.raises(DownloadScriptRefused) as e:
        check_dataset(str(y))
    msg = _one_line(e)
    assert "--allow-download-scripts" in msg and f"{ALLOW_SCRIPTS_ENV}=1" in msg and archive.as_uri() in msg, msg
    assert sorted(os.listdir(tmp_path)) == ["data.yaml", "src"]


def test_a_zip_download_with_consent_lands_in_the_dataset_folder(tmp_path, src, monkeypatch):
    archive = _zip(src / "coco128.zip", {"coco128/images/a.jpg": b"jpg", "coco128/labels/a.txt": b"0 .5 .5 .1 .1\n"})
    y = _data_yaml(tmp_path, archive)
    d = check_dataset(str(y), allow_scripts=True)
    folder = tmp_path / "datasets" / "coco128"
    assert d["val"] == str(folder / "images") and (folder / "labels" / "a.txt").read_bytes() == b"0 .5 .5 .1 .1\n"
    assert sorted(os.listdir(tmp_path)) == ["data.yaml", "datasets", "src"]  # the download itself is gone
    assert sorted(os.listdir(tmp_path / "datasets")) == ["coco128"]
    (folder / "images" / "a.jpg").unlink()  # the environment's consent works as the flag does
    (folder / "images").rmdir()
    (folder / "labels" / "a.txt").unlink()
    monkeypatch.setenv(ALLOW_SCRIPTS_ENV, "1")
    assert check_dataset(str(y))["val"] == str(folder / "images")
