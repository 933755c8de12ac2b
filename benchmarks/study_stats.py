"""The statistics of benchmarks/learning_study.py, numpy and the standard library only: a sample's summary, and the
difference of two configurations' means with a 95% interval, by Welch's t (unequal variances) and by the bootstrap.

Student's t quantile is computed here rather than taken from scipy (not a dependency of this project): the t CDF is
1 - I_x(df/2, 1/2) / 2 for t >= 0 with x = df / (df + t^2), where I is the regularized incomplete beta function,
evaluated by its continued fraction (modified Lentz), and the quantile is found by bisection."""
import math

import numpy as np

LEVEL = 0.95
RESAMPLES = 10000


def summary(values):
    """{n, mean, std (sample, ddof 1; None below 2 values), min, max} of a list of numbers; None for an empty one."""
    x = np.asarray([v for v in values if v is not None], dtype=float)
    if x.size == 0:
        return None
    return {"n": int(x.size), "mean": float(x.mean()), "std": float(x.std(ddof=1)) if x.size > 1 else None,
            "min": float(x.min()), "max": float(x.max())}


def _beta_continued_fraction(a, b, x, max_terms=300, eps=3e-16):
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, max_terms + 1):
        for numerator in (m * (b - m) * x / ((a - 1 + 2 * m) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1 + 2 * m))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def incomplete_beta(a, b, x):
    """The regularized incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):  # the continued fraction converges fast on this side; use symmetry on the other
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def t_cdf(t, df):
    """P(T <= t) for Student's t with df (> 0, not necessarily whole) degrees of freedom."""
    tail = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p, df):
    """The t with P(T <= t) = p (0 < p < 1), by bisection to 1e-12."""
    if not 0 < p < 1:
        raise ValueError(f"t_quantile: p={p} is not between 0 and 1")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:  # bracket: df = 1 needs 63.7 for p = 0.995
        high *= 2
    while high - low > 1e-12 * max(1.0, high):
        mid = (low + high) / 2
        low, high = (mid, high) if t_cdf(mid, df) < p else (low, mid)
    return (low + high) / 2


def welch_interval(a, b, level=LEVEL):
    """mean(a) - mean(b) with its Welch t interval: {diff, low, high, df, se}; None with fewer than 2 values a side.
    df is the Welch-Satterthwaite degrees of freedom; with no spread on either side the interval is the point."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size < 2 or b.size < 2:
        return None
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    diff, se = float(a.mean() - b.mean()), math.sqrt(va + vb)
    if se == 0:
        return {"diff": diff, "low": diff, "high": diff, "df": None, "se": 0.0}
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = t_quantile(0.5 + level / 2, df) * se
    return {"diff": diff, "low": diff - half, "high": diff + half, "df": float(df), "se": se}


def bootstrap_interval(a, b, level=LEVEL, resamples=RESAMPLES, seed=0):
    """mean(a) - mean(b) with the percentile bootstrap interval (each side resampled with replacement, resamples
    times, a fixed seed so the same runs give the same interval): {diff, low, high}; None when a side is empty."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size == 0 or b.size == 0:
        return None
    rng = np.random.default_rng(seed)
    means_a = a[rng.integers(0, a.size, (resamples, a.size))].mean(1)
    diffs = means_a - b[rng.integers(0, b.size, (resamples, b.size))].mean(1)
    low, high = np.quantile(diffs, [(1 - level) / 2, (1 + level) / 2])
    return {"diff": float(a.mean() - b.mean()), "low": float(low), "high": float(high)}


def compare(a, b, level=LEVEL):
    """Both intervals of mean(a) - mean(b), and whether each includes 0."""
    welch, boot = welch_interval(a, b, level), bootstrap_interval(a, b, level)
    out = {"level": level, "welch": welch, "bootstrap": boot}
    for key in ("welch", "bootstrap"):
        r = out[key]
        out[f"{key}_includes_0"] = None if r is None else bool(r["low"] <= 0 <= r["high"])
    return out
