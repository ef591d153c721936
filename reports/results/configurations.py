"""Complete trials grouped by configuration: the mean over seeds with its interval, and the search run that chose it."""

from __future__ import annotations

import pandas as pd

from reports.results.frame import configuration_key, search_runs
from reports.results.fronts import best
from reports.results.names import FLOPS, SCORE
from reports.results.quality import quality
from reports.results.statistics import mean_interval


def configurations(frame: pd.DataFrame, knobs: list[str]) -> pd.DataFrame:
    """Complete trials grouped by configuration: the mean of the study's first objective (its
    ``Quality``: accuracy, bits per byte ...) over seeds, with a 95% interval.

    Args:
        frame: ``reports.results.frame.trials_frame``.
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
