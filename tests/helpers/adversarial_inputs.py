"""Damaged and hostile variants of the files the project reads, and the rule each must obey (tests/test_adversarial.py).

Every case is drawn from a seeded random.Random: ADVERSARIAL_SEED (default: today's date, so each day's CI run tries
other cases and a failure is replayed by setting the seed it prints) and ADVERSARIAL_CASES cases per format
(default 6). These two variables are read by the tests only.

The rule (`outcome`): the loader returns (and the test checks the result is well-formed), or raises a UserError /
FileNotFoundError / SystemExit whose message is one non-empty line -- what the entry scripts print before exit 1.
Any other exception, or a call that runs past HANG_S seconds, fails the case with its seed and label.
"""
import datetime
import os
import random
import signal
import traceback
from contextlib import contextmanager

import yaml

from utils.errors import UserError

HANG_S = 30  # one load of a small file; the slowest legitimate case (a model YAML under OneFlow) takes ~3 s
MARKER = "ADVERSARIAL_CODE_RAN"  # a file that a payload would create if the loader ran code from the input


def seed():
    return int(os.environ.get("ADVERSARIAL_SEED") or datetime.date.today().strftime("%Y%m%d"))


def cases(n_default=6):
    return int(os.environ.get("ADVERSARIAL_CASES") or n_default)


def rng_for(fmt):
    """One stream per format, so adding a format does not change another's cases."""
    return random.Random(f"{seed()}:{fmt}")


# ------------------------------------------------------------------------------------------- byte mutations
def truncate(rng, b):
    return b[: rng.randrange(0, max(len(b), 1))]


def flip(rng, b, k=None):
    b = bytearray(b)
    for _ in range(k or rng.randint(1, 8)):
        if b:
            b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def splice(rng, b):
    i = rng.randrange(len(b) + 1)
    return b[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) + b[i:]


def random_bytes(rng, b):
    return bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 7, 64, 512, 4096))))


def duplicate(rng, b):
    if len(b) < 2:
        return b + b
    i = rng.randrange(len(b) - 1)
    j = rng.randrange(i + 1, min(len(b), i + 4096) + 1)
    return b[:j] + b[i:j] * rng.randint(1, 4) + b[j:]


BYTE_MUTATIONS = (truncate, flip, splice, random_bytes, duplicate)


def mutate_bytes(rng, b):
    m = rng.choice(BYTE_MUTATIONS)
    return m(rng, b), m.__name__


# ------------------------------------------------------------------------------------------ value type swaps
def swap_values(marker_path):
    """Values of every type a YAML can hold, the awkward ones first: None, empty, text that is a number, NaN,
    huge, negative, nested, a path that escapes its folder, and text that is a code-running tag's payload."""
    return [None, "", "abc", "1e-3", -1, 0, 1, 10 ** 12, 1e308, float("nan"), float("-inf"), True, [], [1, 2], {},
            {"a": 1}, [[[[[[[[1]]]]]]]], "../../../outside", "/", "nc", 3.5, "x" * 5000,
            f"!!python/object/apply:os.system ['touch {marker_path}']"]


def _paths(x, prefix=()):
    yield prefix
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _paths(v, prefix + (i,))


def swap_in(rng, d, marker_path):
    """A copy of the YAML value d with one random entry replaced by an awkward value, or deleted."""
    import copy
    d = copy.deepcopy(d)
    paths = [p for p in _paths(d) if p]
    p = rng.choice(paths)
    parent = d
    for k in p[:-1]:
        parent = parent[k]
    if isinstance(parent, dict) and rng.random() < 0.2:
        del parent[p[-1]]
        return d, f"delete {p}"
    v = rng.choice(swap_values(marker_path))
    parent[p[-1]] = v
    return d, f"{p} = {str(v)[:40]!r}"


def yaml_variant(rng, d, marker_path):
    """(text, label): a type swap of d dumped as YAML, a byte mutation of its text, or a code-running tag."""
    r = rng.random()
    if r < 0.55:
        d2, label = swap_in(rng, d, marker_path)
        return yaml.safe_dump(d2, sort_keys=False, width=10 ** 6), "swap " + label
    text = yaml.safe_dump(d, sort_keys=False, width=10 ** 6)
    if r < 0.9:
        b, name = mutate_bytes(rng, text.encode())
        return b.decode("utf-8", "replace"), name
    key = rng.choice(list(d))
    return text + f"{key}: !!python/object/apply:os.system ['touch {marker_path}']\n", "python tag"


# --------------------------------------------------------------------------------------------------- checks
class Hang(Exception):
    pass


@contextmanager
def time_limit(seconds=HANG_S):
    def on_alarm(*_):
        raise Hang(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def outcome(fn, label):
    """('ok', result) or ('error', message) when fn obeys the rule; raises AssertionError naming the case else."""
    where = f"[ADVERSARIAL_SEED={seed()}] {label}"
    try:
        with time_limit():
            return "ok", fn()
    except (UserError, FileNotFoundError) as e:
        msg = str(e)
        assert msg.strip() and "\n" not in msg.strip(), f"{where}: a message that is not one line: {msg!r}"
        return "error", msg
    except SystemExit as e:
        assert e.code not in (0, None), f"{where}: SystemExit({e.code!r}) where an error was due"
        return "error", str(e.code)
    except Hang as e:
        raise AssertionError(f"{where}: hang, {e}") from None
    except Exception:  # noqa: BLE001 (this is the failure being tested for)
        raise AssertionError(f"{where}: a traceback instead of one line:\n{traceback.format_exc()}") from None


def listing(*folders):
    """What each folder holds (names only, one level): compared before and after to catch writes outside."""
    return {str(f): sorted(os.listdir(f)) for f in folders if os.path.isdir(f)}
