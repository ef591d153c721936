"""How far the truth's conclusions can be trusted: each comparison's power at the table's seeds, and how
often the truth recomputed on resamples of those seeds (leave one out, bootstrap) changes its pick,
its sign or its significance.

Seeds are resampled together (seed ``i`` is shared by every configuration that has it), within strata
of the seeds that the same configurations have: a table whose deciding configurations have 9 seeds
and the rest 3 is resampled 3 from the first 3 and 6 from the others, so that every configuration
keeps its number of seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from benchmarks.truth.table import Table
from benchmarks.truth.truth import true_verdict
from storage import record
from studies.results.statistics import paired_power, seeds_for_power
from studies.results.verdict import Comparison

STABLE_SHARE = 0.95  # a conclusion is stable when at least this share of bootstrap resamples, and every leave-one-out, keeps it


@dataclass(frozen=True)
class Changes:
    """How often resamples of the seeds change one comparison of the truth.

    Attributes:
        resamples: How many resamples.
        pick: The share that select another candidate configuration.
        sign: The share whose difference has the other sign.
        significance: The share whose significance differs.
    """

    resamples: int
    pick: float
    sign: float
    significance: float


@dataclass(frozen=True)
class Stability:
    """One comparison of the truth and how far it can be trusted.

    Attributes:
        comparison: The truth's comparison (``studies.results.verdict.Comparison``).
        deviation: The paired differences' standard deviation over its seeds (points).
        power: The paired t-test's power to find its observed difference at its seeds, at Holm's
            first step (the level divided by the comparisons).
        seeds_needed: Seeds at which that power reaches 0.8.
        leave_one_out: Changes when one seed is left out (each in turn).
        bootstrap: Changes over bootstrap resamples of the seeds.
    """

    comparison: Comparison
    deviation: float
    power: float
    seeds_needed: int
    leave_one_out: Changes
    bootstrap: Changes

    @property
    def sign_stable(self) -> bool:
        """No leave-one-out and at most 5% of bootstrap resamples flip the difference's sign."""
        return self.leave_one_out.sign == 0 and self.bootstrap.sign <= 1 - STABLE_SHARE

    @property
    def significance_stable(self) -> bool:
        """No leave-one-out and at most 5% of bootstrap resamples change the significance."""
        return self.leave_one_out.significance == 0 and self.bootstrap.significance <= 1 - STABLE_SHARE

    @property
    def pick_stable(self) -> bool:
        """No leave-one-out and at most 5% of bootstrap resamples select another configuration."""
        return self.leave_one_out.pick == 0 and self.bootstrap.pick <= 1 - STABLE_SHARE


def with_seeds(table: Table, draws: Sequence[int]) -> Table:
    """The table on the drawn seed indices, relabelled ``0, 1, ...`` in draw order (a seed drawn twice
    counts twice); a configuration keeps the draws it has."""
    parts = []
    for new, old in enumerate(draws):
        part = table.rows[table.rows[record.SEED_INDEX] == old]
        parts.append(part.assign(seed_index=new))
    return replace(table, rows=pd.concat(parts, ignore_index=True))


def seed_strata(table: Table) -> list[list[int]]:
    """The table's seed indices grouped by the configurations that have them (seeds every configuration
    has; seeds only the deciding configurations have), each stratum in order."""
    keys = [table.configuration_of(row) for row in table.rows.to_dict("records")]
    having: dict[int, set] = {}
    for key, index in zip(keys, table.rows[record.SEED_INDEX].astype(int), strict=True):
        having.setdefault(index, set()).add(key)
    strata: dict[frozenset, list[int]] = {}
    for index in sorted(having):
        strata.setdefault(frozenset(having[index]), []).append(index)
    return list(strata.values())


def stability(table: Table, resamples: int = 200, seed: int = 0) -> list[Stability]:
    """Each comparison of the truth with its power and its changes under resampled seeds.

    Args:
        table: The truth table.
        resamples: Bootstrap resamples (each recomputes the truth: about a second).
        seed: The bootstrap's random seed (the same seed gives the same figures).

    Returns:
        One entry per comparison of the true verdict, in its order.
    """
    truth = true_verdict(table)
    strata = seed_strata(table)
    indices = [index for stratum in strata for index in stratum]
    left_out = [true_verdict(with_seeds(table, [i for i in indices if i != out])) for out in indices]
    rng = np.random.default_rng(seed)
    drawn = [
        true_verdict(with_seeds(table, [int(i) for stratum in strata for i in rng.choice(stratum, len(stratum))]))
        for _ in range(resamples)
    ]
    entries = []
    for comparison in truth.comparisons:
        deviation = _deviation(comparison)
        alpha = 0.05 / max(len(truth.comparisons), 1)
        seeds = comparison.test.seeds[0] if comparison.test else 0
        defined = seeds >= 2 and deviation > 0
        entries.append(
            Stability(
                comparison,
                deviation,
                paired_power(comparison.difference, deviation, seeds, alpha) if defined else math.nan,
                seeds_for_power(comparison.difference, deviation, alpha=alpha) if defined else 0,
                _changes(comparison, left_out),
                _changes(comparison, drawn),
            )
        )
    return entries


def _deviation(comparison: Comparison) -> float:
    """The standard deviation of the comparison's paired differences (points) over the seeds both sides have."""
    candidate, baseline = comparison.candidate["fresh"], comparison.baseline["fresh"]
    shared = sorted(set(candidate) & set(baseline))
    if len(shared) < 2:
        return math.nan
    return float(np.std([comparison.quality.scaled(candidate[k] - baseline[k]) for k in shared], ddof=1))


def _changes(truth: Comparison, resampled: list) -> Changes:
    """How often the resampled verdicts change ``truth``'s pick, sign and significance (a comparison a
    resample lacks counts as changed in all three)."""
    pick = sign = significance = 0
    for headline in resampled:
        got = next((c for c in headline.comparisons if c.family == truth.family), None)
        if got is None:
            pick, sign, significance = pick + 1, sign + 1, significance + 1
            continue
        pick += got.candidate["config"] != truth.candidate["config"]
        sign += math.copysign(1, got.difference) != math.copysign(1, truth.difference)
        significance += got.significant != truth.significant
    count = max(len(resampled), 1)
    return Changes(len(resampled), pick / count, sign / count, significance / count)
