"""What a report says, computed from the trial frame: configurations over seeds, the headline, provenance.

Pure functions of pandas frames and Optuna studies; no plotting here.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
import pandas as pd
from optuna.trial import TrialState

from storage import masked_url
from storage.trials import (
    FLOPS,
    SCORE,
    Quality,
    best,
    configuration_key,
    family_of,
    knob_columns,
    outcome,
    quality,
    quality_of,
    search_runs,
)

VERDICT_ATTRIBUTE = "verdict"  # the study's user attribute holding ``verdict(...).sentence`` after a run


def configurations(frame: pd.DataFrame, knobs: list[str]) -> pd.DataFrame:
    """Complete trials grouped by configuration: the mean of the study's first objective (its
    ``Quality``: accuracy, bits per byte ...) over seeds, with a 95% interval.

    Args:
        frame: ``storage.trials.trials_frame``.
        knobs: The knob columns that identify a configuration.

    Returns:
        One row per configuration: ``config``, ``family``, ``baseline``, the knobs, ``seeds`` (count),
        ``values`` (list), ``mean``, ``ci_low``/``ci_high`` (t-interval of the mean; NaN with
        one seed), ``fresh`` (the value of each fresh-seed repeat, by its ``repeat_index``),
        ``search_value``, ``search_score`` and ``number`` (its best run in the search itself,
        which selected it; its best repeat when it has only repeats), ``flops_per_example``,
        ``parameters``, ``examples_per_s``, ``numbers`` (trial numbers), ``point`` (the named
        point it is, or None). ``attrs`` hold the ``Quality``.
    """
    measured = quality(frame)
    complete = frame[frame["state"] == "COMPLETE"].copy()
    if complete.empty:
        empty = pd.DataFrame(columns=["config", "family", "baseline", *knobs, "seeds", "mean", "ci_low", "ci_high", FLOPS])
        empty.attrs["quality"] = measured
        return empty
    complete["config"] = [configuration_key({k: row.get(k) for k in knobs}) for _, row in complete.iterrows()]
    rows = []
    for key, group in complete.groupby("config", sort=False):
        values = group[measured.column].astype(float).to_numpy()
        low, high = mean_interval(values)
        first = group.iloc[0]
        searched = group[search_runs(group)]
        chosen = best(searched) if not searched.empty else best(group)  # the run the search judged it by
        rows.append(
            {
                "config": key,
                "family": first["family"],
                "baseline": bool(first["baseline"]),
                **{k: first.get(k) for k in knobs},
                "seeds": len(values),
                "values": values.tolist(),
                "fresh": {
                    int(index): float(value)
                    for index, value in zip(group["repeat_index"], group[measured.column], strict=True)
                    if pd.notna(index)
                },
                "mean": float(values.mean()),
                "search_value": float(chosen[measured.column]),
                "search_score": float(chosen[SCORE]),
                "number": int(chosen["number"]),
                "ci_low": low,
                "ci_high": high,
                FLOPS: float(first[FLOPS]),
                "parameters": first.get("parameters"),
                "examples_per_s": float(group["examples_per_s"].astype(float).mean()),
                "numbers": group["number"].tolist(),
                "point": first.get("point"),
            }
        )
    configs = pd.DataFrame(rows)
    configs.attrs["quality"] = measured
    return configs


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


def learning_curves(study: optuna.Study, numbers: list[int]) -> pd.DataFrame:
    """Intermediate values of some trials (the study's first objective), long format: ``number``,
    ``step``, ``value``, ``state``, ``family``, ``baseline``."""
    wanted = set(numbers)
    rows = [
        {
            "number": t.number,
            "step": step,
            "value": value,
            "state": t.state.name,
            "family": family_of(t),
            "baseline": bool(t.user_attrs.get("baseline")),
        }
        for t in study.get_trials(deepcopy=False)
        if t.number in wanted
        for step, value in sorted(t.intermediate_values.items())
    ]
    return pd.DataFrame(rows, columns=["number", "step", "value", "state", "family", "baseline"])


def importances(study: optuna.Study) -> dict[str, float]:
    """Knob importances for the study's first objective (Optuna's default PED-ANOVA evaluator); empty when too few trials."""
    results = [t for t in study.get_trials(deepcopy=False) if outcome(t) == "COMPLETE"]  # infeasible ones are no result
    if len(results) < 3:
        return {}
    only_results = optuna.create_study(directions=study.directions)  # in memory: the importances' input
    only_results.add_trials(results)
    sign = quality_of(study).sign
    try:  # PED-ANOVA explains low target values: negate a value the study maximises
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "few trials per regime": expected in small studies
            return optuna.importance.get_param_importances(only_results, target=lambda trial: -sign * trial.values[0])
    except (ValueError, RuntimeError, ZeroDivisionError):
        return {}


def provenance(study: optuna.Study, frame: pd.DataFrame, storage_url: str) -> dict[str, Any]:
    """Versions, devices, dates, device-hours, trial counts, store (password masked)."""
    trials = study.get_trials(deepcopy=False)
    starts = [t.datetime_start for t in trials if t.datetime_start]
    ends = [t.datetime_complete for t in trials if t.datetime_complete]
    wall = pd.to_numeric(frame.get("wall_seconds"), errors="coerce").fillna(0).sum() if not frame.empty else 0.0
    return {
        "study": study.study_name,
        "store": masked_url(storage_url),
        "code versions": sorted({str(t.user_attrs["code_version"]) for t in trials if "code_version" in t.user_attrs}),
        "devices": sorted({str(d) for d in frame.get("device", pd.Series(dtype=object)).dropna()}),
        "first trial started": min(starts).isoformat(timespec="seconds") if starts else "-",
        "last trial ended": max(ends).isoformat(timespec="seconds") if ends else "-",
        "device-hours (sum of trial wall time)": round(float(wall) / 3600, 3),
        "trials by state": frame["state"].value_counts().to_dict() if not frame.empty else {},
        "failed: could not train": frame["infeasible"].value_counts().to_dict() if not frame.empty else {},
        "queued, not yet run": sum(t.state == TrialState.WAITING for t in trials),
        "optuna": optuna.__version__,
    }
