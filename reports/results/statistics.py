"""Intervals for a handful of seeds: Student's t for a mean and a paired difference, Welch's for two samples."""

from __future__ import annotations

import numpy as np

# Student's t, 0.975 quantile (two-sided 95%), for 1..30, 40, 60 and 120 degrees of freedom.
_T_975_ROWS = (
    "12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145 2.131 "
    "2.120 2.110 2.101 2.093 2.086 2.080 2.074 2.069 2.064 2.060 2.056 2.052 2.048 2.045 2.042 2.021 2.000 1.980"
)
T_975 = dict(zip((*range(1, 31), 40, 60, 120), map(float, _T_975_ROWS.split()), strict=True))
NORMAL_975 = 1.960


def t_quantile(degrees_of_freedom: float) -> float:
    """Student's t 0.975 quantile; a fractional or untabulated value takes the next lower row (a wider interval)."""
    if degrees_of_freedom < 1:
        return float("nan")
    rows = [df for df in T_975 if df <= degrees_of_freedom]
    return T_975[max(rows)] if degrees_of_freedom <= max(T_975) else NORMAL_975


# Values closer than this are the same (accuracies: the same count of correct examples, up to float rounding of k/n).
SAME_VALUE = 1e-9


def _varies(values: np.ndarray) -> bool:
    """Whether the values spread at all: with none, a t statistic is undefined (0/0), not infinitely sure."""
    return float(np.ptp(values)) > SAME_VALUE


def mean_interval(values: np.ndarray) -> tuple[float, float]:
    """The 95% t-interval of the mean (a paired t-test's, for differences); NaNs with fewer than two
    values, or values that do not vary.

    With the 2 to 5 seeds a study repeats, a bootstrap's percentile interval is far too narrow
    (three values have ten distinct resampled means); Student's t accounts for so few.
    """
    if len(values) < 2 or not _varies(values):
        return float("nan"), float("nan")
    mean = float(np.mean(values))
    half = t_quantile(len(values) - 1) * float(np.std(values, ddof=1)) / float(np.sqrt(len(values)))
    return mean - half, mean + half


def difference_interval(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """The 95% Welch t-interval of ``mean(a) - mean(b)`` (unpaired, unequal variances); NaNs below two
    values each, or when neither side varies."""
    if len(a) < 2 or len(b) < 2 or not (_varies(a) or _varies(b)):
        return float("nan"), float("nan")
    va, vb = float(np.var(a, ddof=1)) / len(a), float(np.var(b, ddof=1)) / len(b)
    difference = float(np.mean(a) - np.mean(b))
    degrees = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))  # Welch-Satterthwaite
    half = t_quantile(degrees) * (va + vb) ** 0.5
    return difference - half, difference + half
