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
from storage.trials import ACCURACY, FLOPS, configuration_key, outcome

BOOTSTRAP_SAMPLES = 10_000
CONFIDENCE = 0.95


def configurations(frame: pd.DataFrame, knobs: list[str]) -> pd.DataFrame:
    """Complete trials grouped by configuration: mean accuracy over seeds with a 95% interval.

    Args:
        frame: ``storage.trials.trials_frame``.
        knobs: The knob columns that identify a configuration.

    Returns:
        One row per configuration: ``config``, ``baseline``, the knobs, ``seeds`` (count),
        ``accuracies`` (list), ``mean_accuracy``, ``ci_low``/``ci_high`` (bootstrap of the
        mean; NaN with one seed), ``flops_per_example``, ``parameters``, ``examples_per_s``,
        ``numbers`` (trial numbers).
    """
    complete = frame[frame["state"] == "COMPLETE"].copy()
    if complete.empty:
        return pd.DataFrame(columns=["config", "baseline", *knobs, "seeds", "mean_accuracy", "ci_low", "ci_high", FLOPS])
    complete["config"] = [configuration_key({k: row.get(k) for k in knobs}) for _, row in complete.iterrows()]
    rows = []
    for key, group in complete.groupby("config", sort=False):
        accuracies = group[ACCURACY].astype(float).to_numpy()
        low, high = mean_interval(accuracies)
        first = group.iloc[0]
        rows.append(
            {
                "config": key,
                "baseline": bool(first["baseline"]),
                **{k: first.get(k) for k in knobs},
                "seeds": len(accuracies),
                "accuracies": accuracies.tolist(),
                "mean_accuracy": float(accuracies.mean()),
                "ci_low": low,
                "ci_high": high,
                FLOPS: float(first[FLOPS]),
                "parameters": first.get("parameters"),
                "examples_per_s": float(group["examples_per_s"].astype(float).mean()),
                "numbers": group["number"].tolist(),
            }
        )
    return pd.DataFrame(rows)


def mean_interval(values: np.ndarray, *, seed: int = 0) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval of the mean; NaNs with fewer than two values."""
    if len(values) < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(BOOTSTRAP_SAMPLES, len(values))).mean(axis=1)
    return tuple(float(q) for q in np.quantile(means, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2]))


def difference_interval(a: np.ndarray, b: np.ndarray, *, seed: int = 0) -> tuple[float, float]:
    """A 95% bootstrap interval of ``mean(a) - mean(b)``, each resampled on its own; NaNs below two values each."""
    if len(a) < 2 or len(b) < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    differences = rng.choice(a, size=(BOOTSTRAP_SAMPLES, len(a))).mean(1) - rng.choice(b, size=(BOOTSTRAP_SAMPLES, len(b))).mean(
        1
    )
    return tuple(float(q) for q in np.quantile(differences, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2]))


@dataclass(frozen=True)
class Headline:
    """The study's answer in one sentence, and the numbers behind it."""

    sentence: str
    damcha: pd.Series | None = None
    mha: pd.Series | None = None
    gain_points: float = float("nan")
    interval: tuple[float, float] = (float("nan"), float("nan"))


def headline(configs: pd.DataFrame) -> Headline:
    """Best DAMCHA at or below the best MHA baseline's FLOPs, against that baseline.

    The comparison is the difference of mean accuracies over seeds, with a 95%
    bootstrap interval (each configuration's seeds resampled independently); it is
    called significant when the interval excludes zero.
    """
    baselines = configs[configs["baseline"]] if not configs.empty else configs
    if baselines.empty:
        return Headline("No MHA baseline completed, so there is no comparison yet.")
    mha = baselines.sort_values("mean_accuracy").iloc[-1]
    cheaper = configs[~configs["baseline"] & (configs[FLOPS] <= mha[FLOPS])]
    if cheaper.empty:
        return Headline(
            f"No DAMCHA configuration completed at or below the best MHA's {mha[FLOPS]:.3g} FLOPs per example.", mha=mha
        )
    damcha = cheaper.sort_values("mean_accuracy").iloc[-1]
    gain = 100 * (damcha["mean_accuracy"] - mha["mean_accuracy"])
    low, high = difference_interval(np.array(damcha["accuracies"]), np.array(mha["accuracies"]))
    verb = "gains" if gain >= 0 else "trails by"
    sentence = (
        f"The best DAMCHA at ≤ MHA's FLOPs ({damcha[FLOPS] / mha[FLOPS]:.2f}× its FLOPs) {verb} {abs(gain):.1f} accuracy "
        f"points against the best MHA ({100 * damcha['mean_accuracy']:.1f}% vs {100 * mha['mean_accuracy']:.1f}%"
    )
    if np.isnan(low):
        sentence += (
            f"; {damcha['seeds']} and {mha['seeds']} seed(s), too few for a confidence interval: rerun with --repeat-seeds 3)."
        )
    else:
        significant = "significant" if low > 0 or high < 0 else "not significant"
        sentence += (
            f"; 95% CI {100 * low:+.1f} to {100 * high:+.1f} points, bootstrap over {damcha['seeds']} and "
            f"{mha['seeds']} seeds: {significant})."
        )
    return Headline(sentence, damcha, mha, gain, (100 * low, 100 * high))


def learning_curves(study: optuna.Study, numbers: list[int]) -> pd.DataFrame:
    """Intermediate values of some trials, long format: ``number``, ``step``, ``val_accuracy``, ``state``, ``baseline``."""
    wanted = set(numbers)
    rows = [
        {"number": t.number, "step": step, ACCURACY: value, "state": t.state.name, "baseline": bool(t.user_attrs.get("baseline"))}
        for t in study.get_trials(deepcopy=False)
        if t.number in wanted
        for step, value in sorted(t.intermediate_values.items())
    ]
    return pd.DataFrame(rows, columns=["number", "step", ACCURACY, "state", "baseline"])


def importances(study: optuna.Study) -> dict[str, float]:
    """Knob importances for validation accuracy (Optuna's default PED-ANOVA evaluator); empty when too few trials."""
    results = [t for t in study.get_trials(deepcopy=False) if outcome(t) == "COMPLETE"]  # infeasible ones are no result
    if len(results) < 3:
        return {}
    only_results = optuna.create_study(directions=study.directions)  # in memory: the importances' input
    only_results.add_trials(results)
    try:  # PED-ANOVA explains low target values: negate the accuracy, which the study maximises
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "few trials per regime": expected in small studies
            return optuna.importance.get_param_importances(only_results, target=lambda trial: -trial.values[0])
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
