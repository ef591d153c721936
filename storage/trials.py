"""Study store -> pandas: one row per trial, and the Pareto set against MHA baselines.

Pure data preparation, shared by the end-of-run summary, seed-repeat planning and the
reports: no plotting here (plots are thin builders over these frames).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import optuna
import pandas as pd
from optuna.trial import TrialState

ACCURACY, FLOPS = "val_accuracy", "flops_per_example"
SCORE = "score"  # frame column: the study's first objective, signed so that larger is better
INFEASIBLE_ATTRIBUTE = "infeasible"  # user attribute: why the trial's configuration cannot train
POINT_ATTRIBUTE = "point"  # user attribute: the named point a trial trains (``studies.registry.NamedPoint``)
POINT_VALUES_ATTRIBUTE = "point_values"  # user attribute: that point's knob values, which are no Optuna params
STARTED_STATES = (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
INFEASIBLE = "INFEASIBLE"  # the outcome of such a trial (Optuna: COMPLETE, its constraint violated)
ATTRIBUTE_COLUMNS = (
    "family",
    "baseline",
    "seed",
    "parameters",
    "attention_parameters",
    FLOPS,
    "examples_per_s",
    "tokens_per_s",
    "peak_memory_bytes",
    "wall_seconds",
    "device",
    "reached_step",
    "val_count",
    "val_loss",
    "val_perplexity",
    "pruned_at_step",
    "error",
    INFEASIBLE_ATTRIBUTE,
    "diverged_at_step",
    "ray_trial_id",
    "repeat_of",
    "repeat_index",
    POINT_ATTRIBUTE,
)


# A FAIL trial without an error message: Optuna's stale-trial check failed it when its driver's
# heartbeat stopped (a finished trial takes no more attributes; every other failure records one).
LOST_DRIVER_ERROR = "its driver stopped sending heartbeats (killed or lost); another driver failed it and queued a retry"
KNOBS_ATTRIBUTE = "knobs"  # ``frame.attrs`` key: the knob columns, in the study's search order
QUALITY_ATTRIBUTE = "quality"  # ``frame.attrs`` key: the ``Quality`` its values measure


@dataclass(frozen=True)
class Quality:
    """A study's first objective (what its trials are judged by) as the product shows it.

    Attributes:
        column: The reported metric, and the trial frame's column holding it.
        maximize: Whether larger is better.
        label: Axis and table label (``validation accuracy``).
        short: One-line label (``acc``).
        unit: The unit of a difference between two values (``accuracy points``).
        percent: Values show as percentages and differences in points (×100).
        decimals: Decimals of a shown value or difference.
    """

    column: str
    maximize: bool
    label: str
    short: str
    unit: str
    percent: bool = False
    decimals: int = 3

    @property
    def sign(self) -> float:
        """+1 or -1: the factor that turns a value into a score (larger is better)."""
        return 1.0 if self.maximize else -1.0

    def scaled(self, value: float) -> float:
        """A value or difference in the unit it is shown in (accuracy: percent or points)."""
        return 100 * value if self.percent else value

    def shown(self, value: float) -> str:
        """A value as reports write it: ``34.2%``, ``1.234``."""
        return f"{self.scaled(value):.{self.decimals}f}" + ("%" if self.percent else "")


QUALITIES = {
    quality.column: quality
    for quality in (
        Quality(ACCURACY, True, "validation accuracy", "acc", "accuracy points", percent=True, decimals=1),
        Quality("val_bits_per_byte", False, "validation bits per byte", "bpb", "bits per byte"),
    )
}


def quality_of(study: optuna.Study) -> Quality:
    """The ``Quality`` of a study's first objective, from the metric name it recorded.

    A metric this product does not know is shown under its own name; a study without
    metric names that maximises is taken to be one of this product's accuracy studies.
    """
    maximize = study.directions[0] == optuna.study.StudyDirection.MAXIMIZE
    if study.metric_names is None:
        return QUALITIES[ACCURACY] if maximize else Quality("value", False, "objective value", "value", "")
    return quality_named(study.metric_names[0], maximize)


def quality_named(metric: str, maximize: bool) -> Quality:
    """The ``Quality`` of a metric: this product's own, or one shown under its name."""
    known = QUALITIES.get(metric)
    return known if known is not None and known.maximize == maximize else Quality(metric, maximize, metric, metric, "")


def quality(frame: pd.DataFrame) -> Quality:
    """The ``Quality`` a trial frame's values measure (accuracy for a frame not from ``trials_frame``)."""
    return frame.attrs.get(QUALITY_ATTRIBUTE, QUALITIES[ACCURACY])


def outcome(trial: optuna.trial.FrozenTrial) -> str:
    """What a trial came to: its state's name, or ``INFEASIBLE`` for a configuration that cannot train.

    Optuna keeps an infeasible trial COMPLETE, with placeholder values and a violated
    constraint (``studies.sampler.tell_infeasible``): it is no result.
    """
    return INFEASIBLE if INFEASIBLE_ATTRIBUTE in trial.user_attrs else trial.state.name


def family_of(trial: optuna.trial.FrozenTrial) -> str:
    """The label of the family a trial belongs to (a store from before families: MHA baselines
    against DAMCHA; a study this product did not create: "other")."""
    attributes = trial.user_attrs
    if "family" in attributes:
        return str(attributes["family"])
    if "baseline" in attributes:
        return "MHA" if attributes["baseline"] else "DAMCHA"
    return "other"


def configuration(trial: optuna.trial.FrozenTrial | optuna.Trial) -> dict[str, Any]:
    """A trial's knob values: its Optuna params and, for a named point, the point's own values
    (a tuple value, such as per-layer widths, comes back from the store as a list: a tuple again)."""
    point = trial.user_attrs.get(POINT_VALUES_ATTRIBUTE) or {}
    return dict(trial.params) | {name: tuple(value) if isinstance(value, list) else value for name, value in point.items()}


def configuration_key(params: dict[str, Any]) -> str:
    """One string per configuration: trials with the same knobs (seed repeats) share it."""
    return json.dumps({name: value for name, value in sorted(params.items()) if value is not None}, default=str)


def knob_columns(frame: pd.DataFrame) -> list[str]:
    """The frame's knob columns (its trials' Optuna params), in the study's search order."""
    return list(frame.attrs.get(KNOBS_ATTRIBUTE, []))


def trials_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per trial that started (queued trials are not results yet).

    Columns: ``number``, ``state`` (``outcome``), ``family`` (its label), every knob (``configuration``:
    Optuna params and a named point's values; ``knob_columns`` names them), the attributes in
    ``ATTRIBUTE_COLUMNS``, the study's first objective (named by
    its metric, e.g. ``val_accuracy``: the final value of a complete trial, the last
    reported value of a pruned one; ``state`` tells which) and ``score``, that value signed
    so that larger is better. ``frame.attrs`` hold the knob columns and the ``Quality``.
    """
    measured = quality_of(study)
    # The recorded search space gives the order; knobs only some trials have (pinned ones) follow.
    rows, knobs = [], dict.fromkeys(study.user_attrs.get("search_space", {}))
    for trial in study.get_trials(deepcopy=False, states=STARTED_STATES):
        values = configuration(trial)
        knobs.update(dict.fromkeys(values))
        row = {"number": trial.number, "state": outcome(trial), **values}
        row |= {name: trial.user_attrs.get(name) for name in ATTRIBUTE_COLUMNS}
        if trial.state == TrialState.FAIL and row["error"] is None:
            row["error"] = LOST_DRIVER_ERROR
        row["family"] = family_of(trial)
        if row["state"] == "COMPLETE":
            row[measured.column] = trial.values[0]
        elif trial.intermediate_values:
            row[measured.column] = trial.intermediate_values[max(trial.intermediate_values)]
        rows.append(row)
    frame = pd.DataFrame(rows)
    for name in ("number", "state", measured.column, *ATTRIBUTE_COLUMNS):  # present even when no trial reported
        if name not in frame.columns:
            frame[name] = pd.Series(dtype=float if name == measured.column else object)
    frame[SCORE] = measured.sign * frame[measured.column].astype(float)
    frame["baseline"] = frame["baseline"].fillna(False).astype(bool)
    knobs = [name for name in knobs if any(name in row for row in rows)]
    for name in knobs:  # knob values keep their types (4, not 4.0; "full"); absent knobs are None
        frame[name] = pd.Series([row.get(name) for row in rows], index=frame.index, dtype=object)
    frame.attrs[KNOBS_ATTRIBUTE] = knobs
    frame.attrs[QUALITY_ATTRIBUTE] = measured
    return frame


def pareto_mask(frame: pd.DataFrame, x: str = FLOPS) -> pd.Series:
    """Complete trials that no other complete trial beats on score and cost ``x`` together."""
    complete = frame[(frame["state"] == "COMPLETE") & frame[SCORE].notna() & frame[x].notna()]
    cost = complete[x].astype(float)
    mask = pd.Series(False, index=frame.index)
    for index, row in complete.iterrows():
        dominated = (
            (complete[SCORE] >= row[SCORE]) & (cost <= float(row[x])) & ((complete[SCORE] > row[SCORE]) | (cost < float(row[x])))
        )
        mask[index] = not dominated.any()
    return mask


def family_order(frame: pd.DataFrame) -> list[str]:
    """The frame's family labels, the baseline's first, then in the order their trials came."""
    return frame.sort_values("baseline", ascending=False, kind="stable")["family"].unique().tolist()


def search_runs(frame: pd.DataFrame) -> pd.Series:
    """Rows of trials the search ran, not seed repeats (which come after it and select nothing)."""
    return frame["repeat_of"].isna()


def family_fronts(frame: pd.DataFrame) -> pd.Series:
    """Complete trials on their own family's Pareto front (score against FLOPs)."""
    mask = pd.Series(False, index=frame.index)
    for _, rows in frame.groupby("family", sort=False):
        mask |= pareto_mask(rows).reindex(frame.index, fill_value=False)
    return mask


def family_budgets(frame: pd.DataFrame) -> pd.DataFrame:
    """Per family, the baseline first: its trials by outcome, seed repeats apart, and the hours they trained.

    Returns:
        One row per family: ``family``, ``trials`` (searched and retried, repeats aside),
        ``complete``, ``stopped early``, ``failed or infeasible``, ``seed repeats``, ``device-hours``.
    """
    rows = []
    for family in family_order(frame):
        group = frame[frame["family"] == family]
        first = group[search_runs(group)]
        rows.append(
            {
                "family": family,
                "trials": len(first),
                "complete": int((first["state"] == "COMPLETE").sum()),
                "stopped early": int((first["state"] == "PRUNED").sum()),
                "failed or infeasible": int(first["state"].isin(["FAIL", INFEASIBLE]).sum()),
                "seed repeats": len(group) - len(first),
                "device-hours": round(float(pd.to_numeric(group["wall_seconds"], errors="coerce").fillna(0).sum()) / 3600, 3),
            }
        )
    return pd.DataFrame(rows)


def best(rows: pd.DataFrame, score: str = SCORE) -> pd.Series:
    """The row of the highest ``score`` (the study's first objective, signed so that larger is
    better); a tie goes to fewer FLOPs, then to the earlier trial (``number``).

    One rule for every "best" (which configurations seed repeats measure, which ones the
    verdict compares), so that they always agree.
    """
    return rows.sort_values([score, FLOPS, "number"], ascending=[False, True, True], kind="stable").iloc[0]


def family_bests(frame: pd.DataFrame) -> pd.DataFrame:
    """Each family's best complete search trial, and its best at or below the best baseline's FLOPs.

    The configurations a verdict rests on, so the ones that seed repeats measure again.

    Returns:
        Those rows of ``frame`` (one where both are the same trial), in frame order.
    """
    complete = frame[(frame["state"] == "COMPLETE") & frame[SCORE].notna() & search_runs(frame)]
    baselines = complete[complete["baseline"]]
    limit = best(baselines)[FLOPS] if not baselines.empty else float("inf")
    chosen = set()
    for _, group in complete.groupby("family", sort=False):
        chosen.add(best(group).name)
        if not (cheaper := group[group[FLOPS] <= limit]).empty:
            chosen.add(best(cheaper).name)
    return frame.loc[sorted(chosen)]
