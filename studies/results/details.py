"""What a report shows beside the trial frame, read from the Optuna study: learning curves, knob importances, provenance."""

from __future__ import annotations

import warnings
from typing import Any

import optuna
import pandas as pd
from optuna.trial import TrialState

from storage import masked_url, record
from storage.repeats_study import trials_with_repeats
from studies.results.frame import family_of, outcome
from studies.results.quality import quality_of


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
            record.FAMILY: family_of(t),
            record.BASELINE: bool(t.user_attrs.get(record.BASELINE)),
        }
        for t in study.get_trials(deepcopy=False)
        if t.number in wanted
        for step, value in sorted(t.intermediate_values.items())
    ]
    return pd.DataFrame(rows, columns=["number", "step", "value", "state", record.FAMILY, record.BASELINE])


def importances(study: optuna.Study) -> dict[str, dict[str, float]]:
    """Each family's knob importances for the study's first objective (Optuna's default PED-ANOVA evaluator),
    from its complete search runs (seed repeats are no new configurations); a family with fewer than 3,
    or whose knobs never vary, has none. Per family: pooled, the family itself would explain most."""
    by_family: dict[str, list[optuna.trial.FrozenTrial]] = {}
    for trial in study.get_trials(deepcopy=False):
        if outcome(trial) == "COMPLETE" and record.REPEAT_OF not in trial.user_attrs:  # infeasible ones are no result
            by_family.setdefault(family_of(trial), []).append(trial)
    sign = quality_of(study).sign
    found = {}
    for family, results in by_family.items():
        if len(results) < 3:
            continue
        names = {name for trial in results for name in trial.params}
        varying = sorted(name for name in names if len({str(trial.params.get(name)) for trial in results}) > 1)
        if not varying:  # the family's knobs are its own (attention, metric_mode) or never varied
            continue
        only_results = optuna.create_study(directions=study.directions)  # in memory: the importances' input
        only_results.add_trials(results)
        try:  # PED-ANOVA explains low target values: negate a value the study maximises
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "few trials per regime": expected in small studies
                values = optuna.importance.get_param_importances(
                    only_results, params=varying, target=lambda trial: -sign * trial.values[0]
                )
        except (ValueError, RuntimeError, ZeroDivisionError):
            continue
        if values:
            found[family] = values
    return found


def provenance(study: optuna.Study, frame: pd.DataFrame, storage_url: str) -> dict[str, Any]:
    """Versions, devices, dates, device-hours, trial counts, store (password masked); the seed repeats' included."""
    trials = trials_with_repeats(study)
    starts = [t.datetime_start for t in trials if t.datetime_start]
    ends = [t.datetime_complete for t in trials if t.datetime_complete]
    wall = pd.to_numeric(frame.get(record.WALL_SECONDS), errors="coerce").fillna(0).sum() if not frame.empty else 0.0
    return {
        "study": study.study_name,
        "store": masked_url(storage_url),
        "code versions": sorted({str(t.user_attrs[record.CODE_VERSION]) for t in trials if record.CODE_VERSION in t.user_attrs}),
        "devices": sorted({str(d) for d in frame.get(record.DEVICE, pd.Series(dtype=object)).dropna()}),
        "first trial started": min(starts).isoformat(timespec="seconds") if starts else "-",
        "last trial ended": max(ends).isoformat(timespec="seconds") if ends else "-",
        "device-hours (sum of trial wall time)": round(float(wall) / 3600, 3),
        "trials by state": frame["state"].value_counts().to_dict() if not frame.empty else {},
        "failed: could not train": frame[record.INFEASIBLE].value_counts().to_dict() if not frame.empty else {},
        "queued, not yet run": sum(t.state == TrialState.WAITING for t in trials),
        "optuna": optuna.__version__,
    }
