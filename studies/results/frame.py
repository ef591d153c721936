"""Study store -> pandas: one row per trial (``trials_frame``), and what identifies a trial's configuration.

Pure data preparation: the fronts, the bests, the verdict and every report read this frame."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import optuna
import pandas as pd
from optuna.trial import TrialState

from storage import record
from storage.repeats_study import trials_with_repeats
from studies.results.names import (
    ATTRIBUTE_COLUMNS,
    CURVE,
    FAMILIES_ATTRIBUTE,
    FAMILY_KNOBS_ATTRIBUTE,
    KNOBS_ATTRIBUTE,
    LOST_DRIVER_ERROR,
    QUALITY_ATTRIBUTE,
    SCORE,
    STARTED_STATES,
    TASK_ATTRIBUTE,
    outcome_name,
)
from studies.results.quality import quality_of


def outcome(trial: optuna.trial.FrozenTrial) -> str:
    """What a stored trial came to (``names.outcome_name``): an infeasible one, kept COMPLETE with placeholder
    values and a violated constraint (``studies.engine.sampler.tell_infeasible``), is no result."""
    return outcome_name(trial.state.name, record.INFEASIBLE in trial.user_attrs)


def family_of(trial: optuna.trial.FrozenTrial) -> str:
    """The label of the family a trial belongs to (a store from before families: MHA baselines
    against DAMCHA; a study this product did not create: "other")."""
    attributes = trial.user_attrs
    if record.FAMILY in attributes:
        return str(attributes[record.FAMILY])
    if record.BASELINE in attributes:
        return "MHA" if attributes[record.BASELINE] else "DAMCHA"
    return "other"


def configuration(trial: optuna.trial.FrozenTrial | optuna.Trial) -> dict[str, Any]:
    """A trial's knob values: its Optuna params and, for a named point, the point's own values
    (a tuple value, such as per-layer widths, comes back from the store as a list: a tuple again)."""
    point = trial.user_attrs.get(record.POINT_VALUES) or {}
    return dict(trial.params) | {name: tuple(value) if isinstance(value, list) else value for name, value in point.items()}


def configuration_key(params: dict[str, Any]) -> str:
    """One string per configuration: trials with the same knobs (seed repeats) share it."""
    return json.dumps({name: value for name, value in sorted(params.items()) if value is not None}, default=str)


def knob_columns(frame: pd.DataFrame) -> list[str]:
    """The frame's knob columns (its trials' Optuna params), in the study's search order."""
    return list(frame.attrs.get(KNOBS_ATTRIBUTE, []))


def trials_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per trial that started (queued trials are not results yet), the seed repeats' included.

    Columns: ``number`` (a search trial's; a seed repeat's in its own study, so search rows alone are keyed
    by it: ``search_runs``), ``state`` (``outcome``), ``family`` (its label), every knob (``configuration``:
    Optuna params and a named point's values; ``knob_columns`` names them), the attributes in
    ``ATTRIBUTE_COLUMNS``, ``curve`` (the values it reported, by step), the study's first objective (named by
    its metric, e.g. ``val_accuracy``: the final value of a complete trial, the last
    reported value of a pruned one; ``state`` tells which) and ``score``, that value signed
    so that larger is better. A value or FLOPs count that is not a finite number (another
    program's store) is NaN: no result. ``frame.attrs`` hold the knob columns, the ``Quality``, the
    study's family labels (the baseline's first; those of its trials for a study that recorded none) and the
    knobs the families set (``compared_knobs`` leaves them out).
    """
    measured = quality_of(study)
    # The recorded search space gives the order; knobs only some trials have (pinned ones) follow.
    rows, knobs = [], dict.fromkeys(study.user_attrs.get(record.SEARCH_SPACE, {}))
    for trial in trials_with_repeats(study, STARTED_STATES):
        values = configuration(trial)
        knobs.update(dict.fromkeys(values))
        row = {"number": trial.number, "state": outcome(trial), **values}
        row |= {name: trial.user_attrs.get(name) for name in ATTRIBUTE_COLUMNS}
        if trial.state == TrialState.FAIL and row[record.ERROR] is None:
            row[record.ERROR] = LOST_DRIVER_ERROR
        row[record.FAMILY] = family_of(trial)
        row[CURVE] = dict(trial.intermediate_values)
        if row["state"] == "COMPLETE":
            row[measured.column] = trial.values[0]
        elif trial.intermediate_values:
            row[measured.column] = trial.intermediate_values[max(trial.intermediate_values)]
        rows.append(row)
    frame = pd.DataFrame(rows)
    for name in ("number", "state", CURVE, measured.column, *ATTRIBUTE_COLUMNS):  # present even when no trial reported
        if name not in frame.columns:
            frame[name] = pd.Series(dtype=float if name == measured.column else object)
    for name in (measured.column, record.FLOPS):  # another program's store may hold inf, NaN or no number: not a result
        values = pd.to_numeric(frame[name], errors="coerce").astype(float)
        frame[name] = values.where(np.isfinite(values))
    frame[SCORE] = measured.sign * frame[measured.column]
    frame[record.BASELINE] = frame[record.BASELINE].fillna(False).astype(bool)
    knobs = [name for name in knobs if any(name in row for row in rows)]
    for name in knobs:  # knob values keep their types (4, not 4.0; "full"); absent knobs are None
        frame[name] = pd.Series([row.get(name) for row in rows], index=frame.index, dtype=object)
    frame.attrs[KNOBS_ATTRIBUTE] = knobs
    frame.attrs[QUALITY_ATTRIBUTE] = measured
    task = study.user_attrs.get(record.TASK)
    frame.attrs[TASK_ATTRIBUTE] = task.get("task") if isinstance(task, dict) else None
    recorded = study.user_attrs.get(record.BUDGET, {}).get("families")  # the study's families, the baseline's first
    present = frame.sort_values(record.BASELINE, ascending=False, kind="stable")[record.FAMILY].unique().tolist() if rows else []
    frame.attrs[FAMILIES_ATTRIBUTE] = list(recorded) if isinstance(recorded, dict) else present
    pinned = [values for values in recorded.values() if isinstance(values, dict)] if isinstance(recorded, dict) else []
    frame.attrs[FAMILY_KNOBS_ATTRIBUTE] = [name for name in knobs if any(name in values for values in pinned)] or ["attention"]
    return frame


def compared_knobs(frame: pd.DataFrame) -> list[str]:
    """The knob columns a configuration differs by within its family: all but the knobs the families set."""
    return [name for name in knob_columns(frame) if name not in frame.attrs.get(FAMILY_KNOBS_ATTRIBUTE, ["attention"])]


def search_runs(frame: pd.DataFrame) -> pd.Series:
    """Rows of trials the search ran, not seed repeats (which come after it and select nothing)."""
    return frame[record.REPEAT_OF].isna()
