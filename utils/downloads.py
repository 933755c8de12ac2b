"""Fetching a dataset's download URL into a new file, bounded by the free disk space (utils/data_folders.py); a
partial file never stays. Framework-free."""
import errno
import http.client
import logging
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from utils.archive_extract import CHUNK, ArchiveError, link_or_copy
from utils.atomic_files import temp_path_for
from utils.data_folders import human_size, write_bound


def download_file(url, dest, max_bytes=None):
    """Fetch url into the new file dest, counting bytes against the free space (and max_bytes); a partial file never
    stays. Raises ArchiveError naming what happened: the fetch failed (network, a wrong URL), too large, disk full."""
    dest = Path(dest)
    if os.path.lexists(dest):
        raise ArchiveError(f"{dest} exists already; not downloading {url} over it.")
    bound, why = write_bound({dest.parent}, max_bytes)
    tmp = temp_path_for(dest)
    n = 0
    try:
        with urllib.request.urlopen(url) as r, open(tmp, "xb") as out:  # noqa: S310 (a URL the user consented to)
            declared = r.headers.get("Content-Length") if hasattr(r, "headers") else None
            if declared and declared.isdigit() and int(declared) > bound:
                raise ArchiveError(f"{url} is {human_size(int(declared))}, over {human_size(bound)} ({why}); not "
                                   "downloaded. Free space, or fetch it yourself.")
            while True:
                chunk = r.read(CHUNK)
                if not chunk:
                    break
                n += len(chunk)
                if n > bound:
                    raise ArchiveError(f"{url} is over {human_size(bound)} ({why}); the download was stopped and "
                                       "removed. Free space, or fetch it yourself.")
                out.write(chunk)
        link_or_copy(tmp, dest)  # never over a file that appeared meanwhile
    except ArchiveError:
        raise
    except urllib.error.URLError as e:  # before OSError: URLError is one
        raise ArchiveError(f"could not fetch {url} ({getattr(e, 'reason', e)}): download failed.") from None
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise ArchiveError(f"the disk of {dest.parent} filled up after {human_size(n)} of {url}; the partial "
                               "download was removed. Free space and rerun.") from None
        raise ArchiveError(f"could not fetch {url} into {dest} ({e.strerror or e}): download failed.") from None
    except (ValueError, http.client.HTTPException) as e:  # a malformed URL, a connection cut short
        raise ArchiveError(f"could not fetch {url} ({e}): download failed.") from None
    finally:
        tmp.unlink(missing_ok=True)
    return dest


# ----------------------------------------------------------------------------------------------------------------
# ultralytics' names (utils.downloads), for users' scripts; the project itself fetches only consented dataset URLs
def is_url(url, check=True):
    """Whether url is an http(s)/ftp URL; with check, whether it answers (a HEAD request, 5 s)."""
    try:
        p = urllib.parse.urlparse(str(url))
        if p.scheme not in ("http", "https", "ftp") or not p.netloc:
            return False
        if not check:
            return True
        with urllib.request.urlopen(urllib.request.Request(str(url), method="HEAD"), timeout=5) as r:  # noqa: S310
            return r.status == 200
    except (OSError, ValueError, http.client.HTTPException):
        return False


class WeightsNotFound(ArchiveError, FileNotFoundError):
    pass


def attempt_download(file, repo="ultralytics/yolov5", release="v7.0"):
    """The path of a weights file that is here. ultralytics fetches a missing yolov5*.pt from its releases; this
    project downloads nothing unasked, so a missing file is one error line saying where to get it."""
    file = Path(str(file).strip().replace("'", ""))
    if file.exists():
        return str(file)
    raise WeightsNotFound(f"{file} not found (this project downloads nothing): download it from "
                          f"https://github.com/{repo}/releases/tag/{release} and give its path.")


def safe_download(file, url, url2=None, min_bytes=1.0, error_msg=""):
    """Fetch url (else url2) into file, which is replaced only by a whole download of at least min_bytes."""
    file = Path(file)
    last = None
    for u in [url, url2] if url2 else [url]:
        tmp = file.with_name(f".{file.name}.download")
        tmp.unlink(missing_ok=True)
        try:
            download_file(u, tmp)
            if tmp.stat().st_size < min_bytes:
                raise ArchiveError(f"{u} gave {tmp.stat().st_size} bytes, fewer than {min_bytes:g}")
            os.replace(tmp, file)
            return
        except ArchiveError as e:
            last = e
        finally:
            tmp.unlink(missing_ok=True)
    raise ArchiveError(f"{last}{' ' + error_msg if error_msg else ''}")


def curl_download(url, filename, *, silent=False):
    """Fetch url into filename (replacing it); True when it arrived whole. Named for ultralytics' curl call; Python's
    own HTTP client does the work here, so no curl binary is needed."""
    try:
        safe_download(filename, url)
        return True
    except ArchiveError as e:
        if not silent:
            logging.getLogger("yolov5").warning(f"WARNING ⚠️ {e}")
        return False


def gsutil_getsize(url=""):
    """Size in bytes of a gs:// object through the gsutil command when it is installed; else 0 (as ultralytics)."""
    import shutil
    import subprocess

    if not shutil.which("gsutil"):
        return 0
    out = subprocess.run(["gsutil", "du", str(url)], capture_output=True, text=True, check=False).stdout.split()
    return int(out[0]) if out and out[0].isdigit() else 0
