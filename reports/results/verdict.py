"""The study's answer: every family (and named point) against the baseline at matched cost, on fresh
seeds and held-out test data, with Holm's correction across the comparisons.

One function writes it (``verdict``); the summary, the report and the store's ``verdict``
attribute show the same words. What it compares is ``matching.pairings`` (the same rule chose
what the seed repeats trained); how each family's Pareto front relates to the baseline's is
``matching.front_relation``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from reports.results.configurations import configuration_keys, configurations
from reports.results.frame import knob_columns
from reports.results.matching import COST_BAND, Pairing, front_relation, pairings
from reports.results.names import FAMILIES_ATTRIBUTE, FLOPS
from reports.results.quality import Quality, quality
from reports.results.statistics import LEVEL, Test, holm, paired_test, welch_test

VERDICT_ATTRIBUTE = "verdict"  # the study's user attribute holding ``verdict(...).sentence`` after a run


@dataclass(frozen=True)
class Comparison:
    """One pairing's comparison.

    Attributes:
        pairing: What is compared (``matching.Pairing``).
        candidate, baseline: The two configurations (rows of ``configurations``).
        quality: What the values measure.
        test: The test of ``candidate - baseline`` on fresh seeds, in the values' own unit
            (None: too few fresh seeds, so the search's own validation runs are compared, uncorrected).
        adjusted_p: Its Holm-adjusted p-value over the study's comparisons (NaN: no test).
        candidate_value, baseline_value: The means compared.
    """

    pairing: Pairing
    candidate: pd.Series
    baseline: pd.Series
    quality: Quality
    test: Test | None
    adjusted_p: float
    candidate_value: float
    baseline_value: float

    @property
    def family(self) -> str:
        return self.pairing.label

    @property
    def difference(self) -> float:
        """``candidate - baseline`` in the unit differences are shown in (accuracy points, bits per byte)."""
        return self.quality.scaled(self.candidate_value - self.baseline_value)

    @property
    def interval(self) -> tuple[float, float]:
        """The difference's 95% interval in that unit (NaNs without a test or where seeds do not vary)."""
        if self.test is None:
            return float("nan"), float("nan")
        low, high = self.test.interval
        return self.quality.scaled(low), self.quality.scaled(high)

    @property
    def significant(self) -> bool:
        """Whether the Holm-adjusted p-value is below the level's complement (0.05)."""
        return not math.isnan(self.adjusted_p) and self.adjusted_p < 1 - LEVEL


@dataclass(frozen=True)
class Headline:
    """The study's answer in one paragraph, and the comparisons behind it."""

    sentence: str
    comparisons: tuple[Comparison, ...] = ()


def verdict(frame: pd.DataFrame) -> Headline:
    """The study's answer, the one text the summary, the report and the store's ``verdict`` attribute show."""
    return headline(frame, configurations(frame, knob_columns(frame)))


def headline(frame: pd.DataFrame, configs: pd.DataFrame) -> Headline:
    """Each pairing (``matching.pairings``) compared on fresh seeds, Holm-corrected, in words.

    Args:
        frame: ``trials_frame``.
        configs: ``configurations(frame, knob_columns(frame))``.
    """
    families = frame.attrs.get(FAMILIES_ATTRIBUTE) or []
    if frame.empty or not frame["baseline"].any():
        return Headline("No baseline configuration completed, so there is no comparison yet.")
    baseline_family = str(frame.loc[frame["baseline"], "family"].iloc[0])
    by_number = _configuration_of_trials(frame, configs)
    chosen = pairings(frame, families)
    compared = [(pairing, by_number.get(pairing.candidate), by_number.get(pairing.baseline)) for pairing in chosen]
    tests = [
        _test(candidate, baseline) if candidate is not None and baseline is not None else None
        for _, candidate, baseline in compared
    ]
    adjusted = iter(_holm_per_pair(compared, tests))
    measured = quality(frame)
    sentences, comparisons = [], []
    for (pairing, candidate, baseline), test, adjusted_p in zip(compared, tests, adjusted, strict=True):
        if candidate is None or baseline is None:
            why = pairing.why_none or "its selected configurations did not complete on fresh seeds"
            sentences.append(f"{_name(pairing)}: no comparison, {why}.")
            continue
        values = (np.array(list(candidate["fresh"].values())), np.array(list(baseline["fresh"].values())))
        if test is None:  # the selected search runs alone: validation values, biased upward by the selection
            values = (np.array(candidate["search_values"]), np.array(baseline["search_values"]))
        comparison = Comparison(pairing, candidate, baseline, measured, test, adjusted_p, *(float(v.mean()) for v in values))
        comparisons.append(comparison)
        sentences.append(_sentence(comparison, baseline_family))
    relations = [front_relation(frame, family, baseline_family) for family in families if family != baseline_family]
    if relations := [relation for relation in relations if relation]:
        sentences.append(f"The searches' fronts (complete search runs, validation): {'; '.join(relations)}.")
    if not sentences:
        sentences.append(f"The study has no family to compare with {baseline_family}.")
    return Headline(" ".join(sentences), tuple(comparisons))


def _configuration_of_trials(frame: pd.DataFrame, configs: pd.DataFrame) -> dict[int, pd.Series]:
    """Trial number -> the row of ``configs`` its configuration has (trials stopped early included, whose
    configuration only its seed repeats completed)."""
    if configs.empty:
        return {}
    rows = {row["config"]: row for _, row in configs.iterrows()}
    keys = configuration_keys(frame, knob_columns(frame))
    return {int(number): rows[key] for number, key in zip(frame["number"], keys, strict=True) if key in rows}


def _holm_per_pair(compared: list[tuple], tests: list[Test | None]) -> list[float]:
    """Holm-adjusted p-values, one per comparison; a pair of configurations compared twice (a named
    point that is also its family's selected configuration) counts once among the tests."""
    pairs = [
        None if test is None else (candidate["config"], baseline["config"])
        for (_, candidate, baseline), test in zip(compared, tests, strict=True)
    ]
    unique = list(dict.fromkeys(pair for pair in pairs if pair is not None))
    first = {pair: next(test for p, test in zip(pairs, tests, strict=True) if p == pair) for pair in unique}
    adjusted = dict(zip(unique, holm([first[pair].p_value for pair in unique]), strict=True))
    return [float("nan") if pair is None else adjusted[pair] for pair in pairs]


def _test(candidate: pd.Series, baseline: pd.Series) -> Test | None:
    """Fresh seeds, which the selection never saw: paired where both trained on the same ones, else Welch's."""
    shared = sorted(set(candidate["fresh"]) & set(baseline["fresh"]))
    if len(shared) >= 2:
        return paired_test(np.array([candidate["fresh"][k] for k in shared]), np.array([baseline["fresh"][k] for k in shared]))
    if len(candidate["fresh"]) >= 2 and len(baseline["fresh"]) >= 2:
        return welch_test(np.array(list(candidate["fresh"].values())), np.array(list(baseline["fresh"].values())))
    return None


def _name(pairing: Pairing) -> str:
    return f"The {pairing.label}" if pairing.point else pairing.label


def _sentence(comparison: Comparison, baseline_family: str) -> str:
    """One comparison in words: what was compared at which cost, lead or lag, the values, the test."""
    pairing, measured = comparison.pairing, comparison.quality
    ratio = float(comparison.candidate[FLOPS]) / float(comparison.baseline[FLOPS])
    band = f"±{round(100 * (COST_BAND - 1))}%"
    if pairing.point:
        what = (
            f"The {pairing.label}, trained as they specify ({ratio:.2f}× the FLOPs of the {baseline_family} it is compared with)"
        )
    elif pairing.at_best_baseline:
        what = f"The best {pairing.label} at the best {baseline_family}'s cost ({ratio:.2f}× its FLOPs)"
    elif pairing.matched:
        what = (
            f"{pairing.label} has no configuration within {band} of the best {baseline_family}'s FLOPs; "
            f"its best, against the best {baseline_family} at its own cost ({ratio:.2f}× its FLOPs),"
        )
    else:
        what = (
            f"{pairing.label}'s best has no {baseline_family} configuration within {band} of its FLOPs; "
            f"against the nearest ({ratio:.2f}× its FLOPs, not matched in cost), it"
        )
    difference = comparison.difference
    ahead = difference >= 0 if measured.maximize else difference <= 0
    verb = ("gains" if measured.maximize else "leads by") if ahead else "trails by"
    decimals = measured.decimals
    values = f"{measured.shown(comparison.candidate_value)} vs {measured.shown(comparison.baseline_value)}"
    if comparison.test is None:
        return (
            f"{what} {verb} {abs(difference):.{decimals}f} {measured.unit} ({values} {measured.label} of the selected "
            "search runs, uncorrected for selection and untested: rerun with --repeat-seeds 3)."
        )
    judged = measured.test_label if comparison.candidate["judged_on"] == "test" else measured.label
    seeds = comparison.test.seeds
    over = f"{seeds[0]} fresh seeds" if comparison.test.name == "paired t-test" else f"{seeds[0]} and {seeds[1]} fresh seeds"
    low, high = comparison.interval
    if math.isnan(comparison.test.p_value):
        untested = "the seeds do not vary, so no test: not established"
        return f"{what} {verb} {abs(difference):.{decimals}f} {measured.unit} ({values} {judged} over {over}; {untested})."
    unit = "points" if measured.percent else measured.unit
    significance = "significant" if comparison.significant else "not significant"
    return (
        f"{what} {verb} {abs(difference):.{decimals}f} {measured.unit} ({values} {judged} over {over}; "
        f"95% CI {low:+.{decimals}f} to {high:+.{decimals}f} {unit}, {comparison.test.name}, "
        f"Holm-adjusted p {_p(comparison.adjusted_p)}: {significance})."
    )


def _p(value: float) -> str:
    """A p-value as the verdict writes it: ``= 0.187``, or ``< 0.001``."""
    return "< 0.001" if value < 0.001 else f"= {value:.3f}"
