"""Reading evolve.csv, the --evolve record of every generation (a header of column names, then one row of numbers per
generation), for utils/evolve.py (parents, resume, the best row) and utils/plots.py (evolve.png).

The file is appended to across runs and by hand, so a row may be cut short (a generation stopped while appending), or
hold a word or a NaN: such a row cannot be a parent, and a NaN fitness would make every row's weight NaN. Each is
skipped with one warning naming the file and line; a file without a usable header is one error line. Only numpy and
the logger here, so that both readers can import it without importing each other.
"""
from pathlib import Path

import numpy as np

from utils.errors import UserError
from utils.log import LOGGER, colorstr

_WARNED = set()  # (file, line) pairs already reported: the same file is read once per generation


class EvolveCsvError(UserError, ValueError):
    """evolve.csv cannot be read at all (no header, not text)."""


def read_evolve_csv(csv):
    """(column names, rows as a float64 array of shape (generations, columns)) of evolve.csv; rows that are not one
    finite number per column are left out, with a warning."""
    csv = Path(csv)
    try:
        lines = csv.read_text().splitlines()
    except UnicodeDecodeError:
        raise EvolveCsvError(f"{csv}: not an evolve.csv (not text); move it away to start a new search.") from None
    keys = [k.strip() for k in lines[0].split(",")] if lines else []
    if not keys or not all(keys):
        raise EvolveCsvError(f"{csv}: no header row of column names on line 1; move it away to start a new search.")
    rows, skipped = [], []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        row = _numbers(line, len(keys))
        if row is None:
            skipped.append(number)
        else:
            rows.append(row)
    _warn_skipped(csv, skipped, len(keys))
    return keys, np.array(rows, dtype=np.float64).reshape(len(rows), len(keys))


def _numbers(line, n):
    """The row's n finite numbers, or None."""
    parts = line.split(",")
    if len(parts) != n:
        return None
    try:
        values = [float(v) for v in parts]
    except ValueError:
        return None
    return values if all(np.isfinite(values)) else None


def _warn_skipped(csv, lines, n):
    new = [i for i in lines if (str(csv), i) not in _WARNED]
    if not new:
        return
    _WARNED.update((str(csv), i) for i in new)
    shown = ", ".join(map(str, new[:10])) + (f" and {len(new) - 10} more" if len(new) > 10 else "")
    LOGGER.warning(f"{colorstr('evolve: ')}WARNING ⚠️ {csv}: skipped line{'s' if len(new) > 1 else ''} {shown}, "
                   f"not {n} finite numbers (a cut or edited row)")
