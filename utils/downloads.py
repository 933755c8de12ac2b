"""Fetching a dataset's download URL into a new file, bounded by the free disk space (utils/data_folders.py); a
partial file never stays. Framework-free."""
import errno
import http.client
import os
import urllib.error
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
