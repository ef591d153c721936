"""Tests and intervals for a handful of seeds (Student's t, paired or Welch's), and Holm's correction.

With the 2 to 6 seeds a study repeats, a bootstrap's percentile interval is far too narrow
(three values have ten distinct resampled means); Student's t accounts for so few.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Values closer than this are the same (accuracies: the same count of correct examples, up to float rounding of k/n).
SAME_VALUE = 1e-9
LEVEL = 0.95  # every interval's coverage, and 1 - the significance level of every test


def _varies(values: np.ndarray) -> bool:
    """Whether the values spread at all: with none, a t statistic is undefined (0/0), not infinitely sure."""
    return len(values) > 0 and float(np.ptp(values)) > SAME_VALUE


def _stats():  # noqa: ANN202 (the scipy.stats module)
    """``scipy.stats``, imported on first use: a second of import that listing a store never needs."""
    from scipy import stats

    return stats


def t_quantile(degrees_of_freedom: float) -> float:
    """Student's t quantile of a two-sided 95% interval; NaN below one degree of freedom."""
    if degrees_of_freedom < 1:
        return float("nan")
    return float(_stats().t.ppf(0.5 + LEVEL / 2, degrees_of_freedom))


def mean_interval(values: np.ndarray) -> tuple[float, float]:
    """The 95% t-interval of the mean (a paired t-test's, for differences); NaNs with fewer than two
    values, or values that do not vary."""
    if len(values) < 2 or not _varies(values):
        return float("nan"), float("nan")
    mean = float(np.mean(values))
    half = t_quantile(len(values) - 1) * float(np.std(values, ddof=1)) / math.sqrt(len(values))
    return mean - half, mean + half


@dataclass(frozen=True)
class Test:
    """A two-sided test of a difference of means ``a - b``.

    Attributes:
        name: ``paired t-test`` or ``Welch t-test``.
        difference: ``mean(a) - mean(b)``.
        interval: Its 95% interval (NaNs where the values do not vary).
        p_value: The two-sided p-value (NaN where undefined).
        seeds: How many values each side contributed.
    """

    name: str
    difference: float
    interval: tuple[float, float]
    p_value: float
    seeds: tuple[int, int]


def paired_test(a: np.ndarray, b: np.ndarray) -> Test:
    """Student's paired t-test of ``a - b`` (values of the same seeds, in the same order)."""
    differences = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    p_value = float(_stats().ttest_rel(a, b).pvalue) if len(a) >= 2 and _varies(differences) else float("nan")
    return Test("paired t-test", float(differences.mean()), mean_interval(differences), p_value, (len(a), len(b)))


def welch_test(a: np.ndarray, b: np.ndarray) -> Test:
    """Welch's t-test of ``mean(a) - mean(b)`` (unpaired, unequal variances)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    difference = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2 or not (_varies(a) or _varies(b)):
        return Test("Welch t-test", difference, (float("nan"), float("nan")), float("nan"), (len(a), len(b)))
    va, vb = float(np.var(a, ddof=1)) / len(a), float(np.var(b, ddof=1)) / len(b)
    degrees = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))  # Welch-Satterthwaite
    half = t_quantile(degrees) * math.sqrt(va + vb)
    p_value = float(_stats().ttest_ind(a, b, equal_var=False).pvalue)
    return Test("Welch t-test", difference, (difference - half, difference + half), p_value, (len(a), len(b)))


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment of several p-values (family-wise error at most the level).

    NaNs (tests that could not be made) stay NaN and do not count among the tests.

    Args:
        p_values: One p-value per comparison, in any order.

    Returns:
        The adjusted p-values, in the same order.
    """
    defined = sorted((p, index) for index, p in enumerate(p_values) if not math.isnan(p))
    adjusted = [float("nan")] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(defined):
        running = max(running, min(1.0, (len(defined) - rank) * p))
        adjusted[index] = running
    return adjusted


def paired_power(difference: float, deviation: float, seeds: int, alpha: float = 1 - LEVEL) -> float:
    """The power of a two-sided paired t-test at level ``alpha``: how often ``seeds`` shared seeds find
    a true mean difference ``difference`` significant, when paired differences spread by ``deviation``
    (standard deviation) from seed to seed (the noncentral t distribution).

    Args:
        difference: The true mean difference (any unit; ``deviation``'s).
        deviation: The paired differences' standard deviation, > 0.
        seeds: Paired values, at least 2.
        alpha: The test's level (Holm's smallest step divides it by the comparisons).

    Returns:
        The probability of a significant result, in [alpha, 1).

    Raises:
        ValueError: fewer than 2 seeds, or a deviation that is not positive.
    """
    if seeds < 2 or not deviation > 0:
        raise ValueError(f"power needs at least 2 seeds and a positive deviation, got {seeds} and {deviation}")
    stats = _stats()
    degrees = seeds - 1
    critical = float(stats.t.ppf(1 - alpha / 2, degrees))
    shift = difference / deviation * math.sqrt(seeds)
    # The far tail's mass underflows to NaN in scipy for large shifts: it is then 0.
    tails = (stats.nct.sf(critical, degrees, abs(shift)), stats.nct.cdf(-critical, degrees, abs(shift)))
    return float(sum(0.0 if math.isnan(tail) else tail for tail in tails))


def seeds_for_power(difference: float, deviation: float, power: float = 0.8, alpha: float = 1 - LEVEL, most: int = 1000) -> int:
    """The fewest shared seeds at which a paired t-test finds ``difference`` significant with ``power``
    (``paired_power``); ``most + 1`` when even ``most`` seeds do not."""
    for seeds in range(2, most + 1):
        if paired_power(difference, deviation, seeds, alpha) >= power:
            return seeds
    return most + 1


def detectable_difference(deviation: float, seeds: int, power: float = 0.8, alpha: float = 1 - LEVEL) -> float:
    """The smallest true mean difference that a paired t-test on ``seeds`` shared seeds finds significant at
    level ``alpha`` with ``power`` (``paired_power``), when paired differences spread by ``deviation``: the
    minimum detectable difference, in ``deviation``'s unit.

    Raises:
        ValueError: fewer than 2 seeds, or a deviation that is not positive (``paired_power``'s).
    """
    low, high = 0.0, deviation
    while paired_power(high, deviation, seeds, alpha) < power:  # power rises with the difference: bracket, then bisect
        low, high = high, 2 * high
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (low, middle) if paired_power(middle, deviation, seeds, alpha) >= power else (middle, high)
    return high


def equivalence_p(a: np.ndarray, b: np.ndarray, margin: float, *, paired: bool) -> float:
    """Two one-sided t-tests (TOST) that ``mean(a) - mean(b)`` lies within ``±margin``: the larger of the
    two one-sided p-values (below the level: the same within the margin). Paired (the same seeds, in
    the same order) or Welch's; NaN where the values do not vary or are too few.

    Args:
        a, b: The two sides' values.
        margin: The equivalence margin, > 0, in the values' unit.
        paired: Whether ``a[i]`` and ``b[i]`` share a seed.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if paired:
        differences = a - b
        if len(differences) < 2 or not _varies(differences):
            return float("nan")
        difference, error = float(differences.mean()), float(np.std(differences, ddof=1)) / math.sqrt(len(differences))
        degrees: float = len(differences) - 1
    else:
        if len(a) < 2 or len(b) < 2 or not (_varies(a) or _varies(b)):
            return float("nan")
        va, vb = float(np.var(a, ddof=1)) / len(a), float(np.var(b, ddof=1)) / len(b)
        difference, error = float(a.mean() - b.mean()), math.sqrt(va + vb)
        degrees = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    t = _stats().t
    above = float(t.sf((difference + margin) / error, degrees))  # H0: difference <= -margin
    below = float(t.cdf((difference - margin) / error, degrees))  # H0: difference >= +margin
    return max(above, below)


def seeds_to_decide(difference: float, deviation: float, margin: float, most: int = 1000) -> int | None:
    """About how many shared seeds in all would decide an undetermined comparison, taking the observed
    difference and the paired differences' deviation as true: the fewest at which a paired t-test finds
    the difference with power 0.8 or, when it lies inside ``±margin``, at which two one-sided tests
    would expect to show it within the margin (the 90% interval's expected half-width below the room
    left). None where neither happens within ``most`` seeds or the deviation is unknown."""
    if not (math.isfinite(deviation) and deviation > 0 and math.isfinite(difference)):
        return None
    options = []
    if difference != 0 and (found := seeds_for_power(difference, deviation, most=most)) <= most:
        options.append(found)
    room = margin - abs(difference)
    if room > 0:
        t = _stats().t
        for seeds in range(2, most + 1):  # each one-sided test at the level's complement: t's LEVEL quantile
            if t.ppf(LEVEL, seeds - 1) * deviation / math.sqrt(seeds) < room:
                options.append(seeds)
                break
    return min(options) if options else None
