"""The study's answer: each family's best at or below the best baseline's FLOPs, against that baseline, in one sentence.

One function writes it (``verdict``); the summary, the report and the store's ``verdict`` attribute show the same words."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from reports.results.configurations import configurations
from reports.results.frame import knob_columns
from reports.results.fronts import best
from reports.results.names import FLOPS
from reports.results.quality import Quality, quality
from reports.results.statistics import difference_interval, mean_interval

VERDICT_ATTRIBUTE = "verdict"  # the study's user attribute holding ``verdict(...).sentence`` after a run


@dataclass(frozen=True)
class Comparison:
    """One family's best configuration at or below the best baseline's FLOPs, against that baseline.

    Attributes:
        family: The family's label.
        candidate, baseline: The two configurations (rows of ``configurations``).
        quality: What the values measure.
        candidate_value, baseline_value: Their means over the seeds compared.
        difference: ``candidate - baseline`` in the quality's shown unit (accuracy points,
            bits per byte); which sign is better follows ``quality.maximize``.
        interval: Its 95% interval in that unit (NaN without two fresh seeds each, or when they do not vary).
        method: How the seeds were compared: ``paired`` (fresh seeds both trained on),
            ``unpaired`` (fresh seeds of each) or ``uncorrected`` (the selected runs alone).
        seeds: How many seeds each side contributed.
    """

    family: str
    candidate: pd.Series
    baseline: pd.Series
    quality: Quality
    candidate_value: float
    baseline_value: float
    difference: float
    interval: tuple[float, float]
    method: str
    seeds: tuple[int, int]


@dataclass(frozen=True)
class Headline:
    """The study's answer in one paragraph, and the comparisons behind it (one per non-baseline family)."""

    sentence: str
    comparisons: tuple[Comparison, ...] = ()


def verdict(frame: pd.DataFrame) -> Headline:
    """The study's answer, the one text that the summary, the report and the store's
    ``verdict`` attribute show: ``headline`` over the frame's configurations."""
    return headline(configurations(frame, knob_columns(frame)))


def headline(configs: pd.DataFrame) -> Headline:
    """Each non-baseline family's best configuration at or below the best baseline's FLOPs (or,
    when it has none, its best at any cost, said so), against that baseline.

    "Best" is as the search found it (``search_score``: the configurations that seed
    repeats train again); the comparison then rests on their fresh seeds (``_compare``)
    and is called significant when its 95% interval excludes zero.
    """
    measured = quality(configs)
    baselines = configs[configs["baseline"]] if not configs.empty else configs
    if baselines.empty:
        return Headline("No baseline configuration completed, so there is no comparison yet.")
    reference = best(baselines, "search_score")  # the rule that chose what seed repeats measure
    name = reference["family"]
    sentences, comparisons = [], []
    for family, group in configs[~configs["baseline"]].groupby("family", sort=False):
        cheaper = group[group[FLOPS] <= reference[FLOPS]]
        # A family that never ran at the baseline's cost (a mix of all heads' keys costs H× MHA's
        # scores) is still compared, at its own cost, which the sentence states.
        candidate = best(group if cheaper.empty else cheaper, "search_score")
        comparison = _compare(family, candidate, reference, measured)
        comparisons.append(comparison)
        sentences.append(_sentence(comparison, name))
    if not sentences:
        sentences.append(f"No configuration of another family completed to compare with the best {name}.")
    return Headline(" ".join(sentences), tuple(comparisons))


def _compare(family: str, candidate: pd.Series, baseline: pd.Series, measured: Quality) -> Comparison:
    """Compare on fresh seeds, which the selection never saw: paired where both trained on the same ones.

    The selected runs (best of many single-seed trials) overstate their configuration, so
    they enter only when no fresh seeds exist, and the comparison then says it is uncorrected.
    """
    shared = sorted(set(candidate["fresh"]) & set(baseline["fresh"]))
    if len(shared) >= 2:
        ours = np.array([candidate["fresh"][k] for k in shared])
        theirs = np.array([baseline["fresh"][k] for k in shared])
        low, high = mean_interval(ours - theirs)  # the paired t-test's interval
        method, seeds = "paired", (len(shared), len(shared))
    elif len(candidate["fresh"]) >= 2 and len(baseline["fresh"]) >= 2:
        ours, theirs = np.array(list(candidate["fresh"].values())), np.array(list(baseline["fresh"].values()))
        low, high = difference_interval(ours, theirs)
        method, seeds = "unpaired", (len(ours), len(theirs))
    else:
        ours, theirs = np.array(candidate["values"]), np.array(baseline["values"])
        low = high = float("nan")
        method, seeds = "uncorrected", (len(ours), len(theirs))
    difference = measured.scaled(float(ours.mean() - theirs.mean()))
    interval = (measured.scaled(low), measured.scaled(high))
    return Comparison(
        family, candidate, baseline, measured, float(ours.mean()), float(theirs.mean()), difference, interval, method, seeds
    )


def _sentence(comparison: Comparison, baseline_family: str) -> str:
    """One comparison in words: lead or lag, the two values, and the interval with its test, or why there is none."""
    candidate, baseline, measured = comparison.candidate, comparison.baseline, comparison.quality
    difference, decimals = comparison.difference, measured.decimals
    ahead = difference >= 0 if measured.maximize else difference <= 0
    verb = ("gains" if measured.maximize else "leads by") if ahead else "trails by"
    ratio = candidate[FLOPS] / baseline[FLOPS]
    if ratio <= 1:
        lead = f"The best {comparison.family} at ≤ {baseline_family}'s FLOPs ({ratio:.2f}× its FLOPs)"
    else:
        lead = (
            f"No {comparison.family} configuration completed at or below the best {baseline_family}'s "
            f"{baseline[FLOPS]:.3g} FLOPs per example; its best ({ratio:.2f}× those FLOPs)"
        )
    sentence = (
        f"{lead} {verb} {abs(difference):.{decimals}f} {measured.unit} against the best {baseline_family} "
        f"({measured.shown(comparison.candidate_value)} vs {measured.shown(comparison.baseline_value)}"
        + ("" if measured.percent else f" {measured.label}")
    )
    if comparison.method == "uncorrected":
        return sentence + (
            "; the selected single-seed runs, uncorrected for selection and with no confidence interval: "
            "rerun with --repeat-seeds 3)."
        )
    low, high = comparison.interval
    test = (
        f"paired t-test over {comparison.seeds[0]} fresh seeds both trained on"
        if comparison.method == "paired"
        else f"Welch t-test over {comparison.seeds[0]} and {comparison.seeds[1]} fresh seeds"
    )
    if np.isnan(low):  # two seeds or more that do not vary (a coarse validation set): no interval
        return sentence + f" on fresh seeds; the {test} is undefined, the seeds not varying at all: not established)."
    significant = "significant" if low > 0 or high < 0 else "not significant"
    unit = "points" if measured.percent else measured.unit
    interval = f"95% CI {low:+.{decimals}f} to {high:+.{decimals}f} {unit}"
    return sentence + f" on fresh seeds; {interval}, {test}: {significant})."
