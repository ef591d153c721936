"""Pareto fronts, each family's best and its budget, from the trial frame."""

from __future__ import annotations

import pandas as pd

from storage import record
from studies.results.frame import search_runs
from studies.results.names import INFEASIBLE, SCORE


def pareto_mask(frame: pd.DataFrame, x: str = record.FLOPS) -> pd.Series:
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
    return frame.sort_values(record.BASELINE, ascending=False, kind="stable")[record.FAMILY].unique().tolist()


def family_fronts(frame: pd.DataFrame) -> pd.Series:
    """Complete trials on their own family's Pareto front (score against FLOPs)."""
    mask = pd.Series(False, index=frame.index)
    for _, rows in frame.groupby(record.FAMILY, sort=False):
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
        group = frame[frame[record.FAMILY] == family]
        first = group[search_runs(group)]
        rows.append(
            {
                record.FAMILY: family,
                "trials": len(first),
                "complete": int((first["state"] == "COMPLETE").sum()),
                "stopped early": int((first["state"] == "PRUNED").sum()),
                "failed or infeasible": int(first["state"].isin(["FAIL", INFEASIBLE]).sum()),
                "seed repeats": len(group) - len(first),
                "device-hours": round(
                    float(pd.to_numeric(group[record.WALL_SECONDS], errors="coerce").fillna(0).sum()) / 3600, 3
                ),
            }
        )
    return pd.DataFrame(rows)


def best(rows: pd.DataFrame, score: str = SCORE) -> pd.Series:
    """The row of the highest ``score`` (the study's first objective, signed so that larger is
    better); a tie goes to fewer FLOPs, then to the earlier trial (``number``).

    One rule for every "best" (which configurations seed repeats measure, which ones the
    verdict compares: ``matching.pairings``), so that they always agree.
    """
    return rows.sort_values([score, record.FLOPS, "number"], ascending=[False, True, True], kind="stable").iloc[0]
