"""The study's answer: every family (and named point) against the baseline at matched cost, on fresh
seeds and held-out test data, with Holm's correction across the comparisons.

Each comparison has one of three answers (``Comparison.answer``): better or worse (the difference
is significant, Holm-adjusted across the comparisons), the same within the metric's margin (two
one-sided tests at the level, per comparison: ``Quality.margin``), or undetermined (neither; it says
about how many seeds would decide it). Why the two kinds of test share the error rate so: docs/verdict.md.

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

from storage import record
from studies.results.configurations import configuration_keys, configurations
from studies.results.frame import knob_columns, search_runs
from studies.results.matching import COST_BAND, Pairing, front_relation, pairings
from studies.results.names import FAMILIES_ATTRIBUTE, TASK_ATTRIBUTE
from studies.results.quality import Quality, quality
from studies.results.statistics import LEVEL, Test, equivalence_p, holm, paired_test, seeds_to_decide, welch_test


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
        equivalence_p: The two one-sided tests' p-value that the difference lies within the
            quality's margin, this comparison's own (NaN: no test, or no margin).
        seeds_needed: About how many seeds in all would decide the comparison, were it undetermined
            (``statistics.seeds_to_decide``; None: unknown).
    """

    pairing: Pairing
    candidate: pd.Series
    baseline: pd.Series
    quality: Quality
    test: Test | None
    adjusted_p: float
    candidate_value: float
    baseline_value: float
    equivalence_p: float = float("nan")
    seeds_needed: int | None = None

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

    @property
    def same(self) -> bool:
        """Whether two one-sided tests put the difference within the margin (p below 0.05) and no difference was found."""
        return not self.significant and not math.isnan(self.equivalence_p) and self.equivalence_p < 1 - LEVEL

    @property
    def answer(self) -> str:
        """``better``, ``worse``, ``same`` (within the margin) or ``undetermined``."""
        if self.significant:
            ahead = self.difference >= 0 if self.quality.maximize else self.difference <= 0
            return "better" if ahead else "worse"
        return "same" if self.same else "undetermined"


@dataclass(frozen=True)
class Headline:
    """The study's answer in one paragraph, and the comparisons behind it."""

    sentence: str
    comparisons: tuple[Comparison, ...] = ()


def provisional(frame: pd.DataFrame) -> str:
    """Why the verdict of ``frame`` may still change: trials of the study still running (under other drivers, or
    left RUNNING by a driver that stopped), in a sentence; "" when none runs.

    Args:
        frame: ``trials_frame`` (its seed repeats' among them).
    """
    running = int((frame["state"] == "RUNNING").sum()) if not frame.empty else 0
    if not running:
        return ""
    trials = "trial of the study is" if running == 1 else "trials of the study are"
    return (
        f"Provisional: {running} {trials} still running (under another driver, or left by one that stopped); the "
        "driver that ends last writes the final verdict, and python -m reports recomputes it from the store."
    )


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
    if frame.empty or not frame[record.BASELINE].any():
        return Headline("No baseline configuration completed, so there is no comparison yet.")
    baseline_family = str(frame.loc[frame[record.BASELINE], record.FAMILY].iloc[0])
    by_number = _configuration_of_trials(frame, configs)
    chosen = pairings(frame, families)
    compared = [(pairing, by_number.get(pairing.candidate), by_number.get(pairing.baseline)) for pairing in chosen]
    tests = [
        _test(candidate, baseline) if candidate is not None and baseline is not None else None
        for _, candidate, baseline in compared
    ]
    measured = quality(frame)
    adjusted = iter(_holm_per_pair(compared, [test and test.p_value for test in tests]))
    # Equivalence is tested per comparison, unadjusted: each "same" is a claim of its own (docs/verdict.md).
    equivalence = [_equivalence(candidate, baseline, measured.margin) for _, candidate, baseline in compared]
    sentences, comparisons = [], []
    for (pairing, candidate, baseline), test, adjusted_p, (same_p, needed) in zip(
        compared, tests, adjusted, equivalence, strict=True
    ):
        if candidate is None or baseline is None:
            why = pairing.why_none or "its selected configurations did not complete on fresh seeds"
            sentences.append(f"{_name(pairing)}: no comparison, {why}.")
            continue
        if test is None:  # the selected search runs alone: validation values, biased upward by the selection
            values = (np.array(candidate["search_values"]), np.array(baseline["search_values"]))
        else:  # the values the test compares (the shared seeds where it pairs): every figure of it from the same
            values = _fresh_values(candidate, baseline)[:2]
        means = (float(values[0].mean()), float(values[1].mean()))
        same_p = float("nan") if test is None else same_p
        comparison = Comparison(pairing, candidate, baseline, measured, test, adjusted_p, *means, same_p, needed)
        same_as = next((c for c in comparisons if duplicates(comparison, c)), None)
        comparisons.append(comparison)
        if same_as is not None:  # a named point that is a family's selected configuration: said once
            sentences.append(f"{_name(pairing)} is {same_as.family}'s selected configuration: the comparison above.")
            continue
        sentences.append(_sentence(comparison, baseline_family))
    if comparisons and (data := _data_sentence(frame, comparisons)):
        sentences.append(data)
    relations = [front_relation(frame, family, baseline_family) for family in families if family != baseline_family]
    if relations := [relation for relation in relations if relation]:
        sentences.append(f"The searches' fronts (complete search runs, validation): {'; '.join(relations)}.")
    if not sentences:
        sentences.append(f"The study has no family to compare with {baseline_family}.")
    return Headline(" ".join(sentences), tuple(comparisons))


def duplicates(one: Comparison, other: Comparison) -> bool:
    """Whether two comparisons compare the same two configurations (a named point that is also its
    family's selected configuration): the verdict and its tables say it once."""
    return one.candidate["config"] == other.candidate["config"] and one.baseline["config"] == other.baseline["config"]


def _data_sentence(frame: pd.DataFrame, comparisons: list[Comparison]) -> str:
    """What the figures were judged on: the task's held-out split and its size a seed (for a percentage,
    what one prediction is worth), so a reader can weigh a difference against it."""
    if record.TEST_COUNT not in frame.columns or record.REPEAT_INDEX not in frame.columns:  # a frame made elsewhere: unknown
        return ""
    numbers = {n for c in comparisons for row in (c.candidate, c.baseline) for n in row["numbers"]}
    judged = frame[record.REPEAT_OF].isin(numbers) & frame[record.REPEAT_INDEX].notna()
    counts = pd.to_numeric(frame.loc[judged, record.TEST_COUNT], errors="coerce")
    if counts.dropna().empty:
        return ""
    count = int(counts.median())
    measured = comparisons[0].quality
    task = frame.attrs.get(TASK_ATTRIBUTE)
    split = f"{task}'s held-out test split" if task else "the held-out test split"
    worth = f" (one is {measured.scaled(1 / count):.2g} accuracy points)" if measured.percent else ""
    return f"Judged on {split}: {count:,} test predictions a seed{worth}."


def _configuration_of_trials(frame: pd.DataFrame, configs: pd.DataFrame) -> dict[int, pd.Series]:
    """Search trial number -> the row of ``configs`` its configuration has (trials stopped early included, whose
    configuration only its seed repeats completed)."""
    if configs.empty:
        return {}
    rows = {row["config"]: row for _, row in configs.iterrows()}
    search = frame[search_runs(frame)]  # seed repeats are numbered in a study of their own
    keys = configuration_keys(search, knob_columns(search))
    return {int(number): rows[key] for number, key in zip(search["number"], keys, strict=True) if key in rows}


def _holm_per_pair(compared: list[tuple], p_values: list[float | None]) -> list[float]:
    """Holm-adjusted p-values, one per comparison (None: no test); a pair of configurations compared
    twice (a named point that is also its family's selected configuration) counts once among the tests."""
    pairs = [
        None if p is None else (candidate["config"], baseline["config"])
        for (_, candidate, baseline), p in zip(compared, p_values, strict=True)
    ]
    unique = list(dict.fromkeys(pair for pair in pairs if pair is not None))
    first = {pair: next(p for q, p in zip(pairs, p_values, strict=True) if q == pair) for pair in unique}
    adjusted = dict(zip(unique, holm([float(first[pair]) for pair in unique]), strict=True))
    return [float("nan") if pair is None else adjusted[pair] for pair in pairs]


def _fresh_values(candidate: pd.Series, baseline: pd.Series) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """The two sides' fresh-seed values to test, and whether they pair: the shared seeds where there are
    two or more, else all of each side's (Welch's); None with fewer than two on a side."""
    shared = sorted(set(candidate["fresh"]) & set(baseline["fresh"]))
    if len(shared) >= 2:
        return np.array([candidate["fresh"][k] for k in shared]), np.array([baseline["fresh"][k] for k in shared]), True
    if len(candidate["fresh"]) >= 2 and len(baseline["fresh"]) >= 2:
        return np.array(list(candidate["fresh"].values())), np.array(list(baseline["fresh"].values())), False
    return None


def _equivalence(candidate: pd.Series | None, baseline: pd.Series | None, margin: float | None) -> tuple[float, int | None]:
    """The two one-sided tests' p-value that candidate and baseline differ by less than ``margin`` on the
    values ``_test`` tests (``_fresh_values``), and about how many seeds would decide the comparison
    (``seeds_to_decide``); NaN and None where there is nothing to test."""
    values = None if candidate is None or baseline is None or margin is None else _fresh_values(candidate, baseline)
    if values is None:
        return float("nan"), None
    a, b, paired = values
    deviation = float(np.std(a - b, ddof=1)) if paired else math.sqrt(float(np.var(a, ddof=1)) + float(np.var(b, ddof=1)))
    return equivalence_p(a, b, margin, paired=paired), seeds_to_decide(float(a.mean() - b.mean()), deviation, margin)


def _test(candidate: pd.Series, baseline: pd.Series) -> Test | None:
    """Fresh seeds, which the selection never saw: paired where both trained on the same ones, else Welch's."""
    values = _fresh_values(candidate, baseline)
    if values is None:
        return None
    a, b, paired = values
    return paired_test(a, b) if paired else welch_test(a, b)


def _name(pairing: Pairing) -> str:
    return f"The {pairing.label}" if pairing.point else pairing.label


def _sentence(comparison: Comparison, baseline_family: str) -> str:
    """One comparison in words: what was compared at which cost, lead or lag, the values, the test."""
    pairing, measured = comparison.pairing, comparison.quality
    ratio = float(comparison.candidate[record.FLOPS]) / float(comparison.baseline[record.FLOPS])
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
    return (
        f"{what} {verb} {abs(difference):.{decimals}f} {measured.unit} ({values} {judged} over {over}; "
        f"95% CI {low:+.{decimals}f} to {high:+.{decimals}f} {unit}, {comparison.test.name}, "
        f"Holm-adjusted p {_p(comparison.adjusted_p)}: {_answer_words(comparison, unit)})."
    )


def _answer_words(comparison: Comparison, unit: str) -> str:
    """The comparison's answer as its sentence ends: significant; the same within the margin; undetermined."""
    if comparison.significant:
        return "significant"
    measured = comparison.quality
    if measured.margin is None:
        return "not significant"
    margin = f"±{measured.scaled(measured.margin):.{measured.decimals}f} {unit}"
    if comparison.same:
        return f"the same within {margin} (two one-sided tests, p {_p(comparison.equivalence_p)})"
    needed = comparison.seeds_needed
    more = f"about {needed} seeds in all would decide it" if needed else "the seeds' spread leaves it open"
    return f"undetermined, neither a difference nor the same within {margin}, {more}"


def _p(value: float) -> str:
    """A p-value as the verdict writes it: ``= 0.187``, or ``< 0.001``."""
    return "< 0.001" if value < 0.001 else f"= {value:.3f}"
