"""Complete trials grouped by configuration: the search run that chose it, and its one headline figure.

A configuration's headline figure is the mean of its fresh-seed repeats on the held-out test
split, with a 95% interval: the summary, the verdict, the report's tables and its "best"
lines all show it. The search's own runs, judged on validation data, are shown as search runs.
"""

from __future__ import annotations

import math

import pandas as pd

from storage import record
from studies.results.frame import configuration_key, search_runs
from studies.results.fronts import best
from studies.results.names import SCORE
from studies.results.quality import Quality, quality
from studies.results.statistics import mean_interval

COLUMNS = (
    "config",
    record.FAMILY,
    record.BASELINE,
    record.POINT,
    "number",
    "numbers",
    "search_value",
    "search_score",
    "search_values",
    "fresh",
    "judged_on",
    "seeds",
    "mean",
    "ci_low",
    "ci_high",
    record.FLOPS,
    record.PARAMETERS,
    record.EXAMPLES_PER_S,
)


def configuration_keys(frame: pd.DataFrame, knobs: list[str]) -> pd.Series:
    """Each row's configuration key (``frame.configuration_key`` of its ``knobs``): seed repeats share their original's."""
    return pd.Series([configuration_key({k: row.get(k) for k in knobs}) for _, row in frame.iterrows()], index=frame.index)


def judged_column(frame: pd.DataFrame) -> tuple[str, str]:
    """The column that judges a configuration, and which split it is: the test metric where trials
    recorded one (``Quality.test_column``), else the validation metric (a store from before test splits)."""
    measured = quality(frame)
    test = measured.test_column
    if test is not None and test in frame.columns and frame.loc[frame["state"] == "COMPLETE", test].notna().any():
        return test, "test"
    return measured.column, "validation"


def _search_trial(row: pd.Series) -> int:
    """The search trial a row is (a search run) or repeats (a seed repeat)."""
    return int(row["number"] if pd.isna(row.get(record.REPEAT_OF)) else row[record.REPEAT_OF])


def configurations(frame: pd.DataFrame, knobs: list[str]) -> pd.DataFrame:
    """Complete trials grouped by configuration.

    Args:
        frame: ``studies.results.frame.trials_frame``.
        knobs: The knob columns that identify a configuration.

    Returns:
        One row per configuration: ``config``, ``family``, ``baseline``, ``point`` (the named
        point it is, or None), the knobs; ``number`` (the search run that selected it: its best
        by validation; the one its best repeat repeats when it has only repeats), ``numbers`` (its
        search trials: the complete ones and those its seed repeats repeat), ``search_value``/``search_score``
        (that run's validation value and score), ``search_values`` (every search run's validation value);
        ``fresh`` (each fresh-seed repeat's value on the judging split, by ``repeat_index``), ``judged_on`` (``test``, or
        ``validation`` for a store without test values), ``seeds`` (how many), ``mean``,
        ``ci_low``, ``ci_high`` (the headline figure and its 95% t-interval, cut to the metric's range
        where it has one: ``Quality.bounded``; NaN without
        fresh seeds, or, for the interval, with fewer than two); costs. ``attrs`` hold the ``Quality``.
    """
    measured = quality(frame)
    complete = frame[frame["state"] == "COMPLETE"].copy()
    if complete.empty:
        empty = pd.DataFrame(columns=[*COLUMNS[:4], *knobs, *COLUMNS[4:]])
        empty.attrs["quality"] = measured
        return empty
    judged, split = judged_column(frame)
    complete["config"] = configuration_keys(complete, knobs)
    rows = []
    for key, group in complete.groupby("config", sort=False):
        searched = group[search_runs(group)]
        chosen = best(searched) if not searched.empty else best(group)  # the run the search judged it by
        repeats = group[group[record.REPEAT_INDEX].notna()]
        fresh = {int(index): float(value) for index, value in zip(repeats[record.REPEAT_INDEX], repeats[judged], strict=True)}
        values = pd.Series(list(fresh.values()), dtype=float).to_numpy()
        low, high = measured.bounded(*mean_interval(values))  # an accuracy's interval stays within [0, 100]%
        first = group.iloc[0]
        rows.append(
            {
                "config": key,
                record.FAMILY: first[record.FAMILY],
                record.BASELINE: bool(first[record.BASELINE]),
                record.POINT: first.get(record.POINT),
                **{k: first.get(k) for k in knobs},
                "number": _search_trial(chosen),
                "numbers": sorted({*searched["number"].astype(int), *repeats[record.REPEAT_OF].dropna().astype(int)}),
                "search_value": float(chosen[measured.column]),
                "search_score": float(chosen[SCORE]),
                "search_values": searched[measured.column].astype(float).tolist(),
                "fresh": fresh,
                "judged_on": split,
                "seeds": len(fresh),
                "mean": float(values.mean()) if len(values) else float("nan"),
                "ci_low": low,
                "ci_high": high,
                record.FLOPS: float(pd.to_numeric(first[record.FLOPS], errors="coerce")),  # NaN: a store that recorded none
                record.PARAMETERS: first.get(record.PARAMETERS),
                record.EXAMPLES_PER_S: float(group[record.EXAMPLES_PER_S].astype(float).mean()),
            }
        )
    configs = pd.DataFrame(rows)
    configs.attrs["quality"] = measured
    return configs


def headline_figure(row: pd.Series, measured: Quality) -> str:
    """A configuration's headline figure: its fresh-seed mean on the judging split, with its 95% interval."""
    if not row["seeds"]:
        return "no fresh seeds"
    split = measured.test_label if row["judged_on"] == "test" else measured.label
    return f"{headline_value(row, measured)} {split} over {row['seeds']} fresh seeds"


def headline_value(row: pd.Series, measured: Quality) -> str:
    """The headline figure's numbers alone (a table's cell): the fresh-seed mean and its 95% interval; - without seeds."""
    if not row["seeds"]:
        return "-"
    interval = "" if pd.isna(row["ci_low"]) else f" [{measured.shown(row['ci_low'])}, {measured.shown(row['ci_high'])}]"
    return f"{measured.shown(row['mean'])}{interval}"


def knobs_text(row: pd.Series, knobs: list[str]) -> str:
    """A configuration's knobs in one line, ``d_model=64 num_heads=4 ...`` (the family's ``attention`` and the
    knobs it lacks left out)."""
    return " ".join(f"{name}={knob_text(row[name])}" for name in knobs if name != "attention" and knob_text(row.get(name)))


def knob_text(value: object) -> str:
    """A value for a table: blank where there is none (a knob the family lacks), 4 not 4.0 (pandas widens ints)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
