"""The replays of each strategy summarized: one row per strategy (``summary``), or each against one, study seed by
study seed (``paired``)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
from scipy.stats import binomtest, wilcoxon

from benchmarks.resolution import wilson_interval
from benchmarks.truth.scoring import area_under, hours_to
from benchmarks.truth.skill import REFERENCES, skill, skill_interval
from studies.results.statistics import holm

HYPERVOLUME_SHARE = 0.95


def summary(frame: pd.DataFrame, horizon: float) -> pd.DataFrame:
    """One row per strategy: the figures ``benchmarks.truth.compare``'s docstring names.

    Args:
        frame: Replays, rows of ``run_replays``, the reference protocols' (``skill.REFERENCES``) among them.
        horizon: The device-hours the hypervolume share is averaged over.
    """
    references = {
        name: group.set_index("seed")["right"].astype(bool) for name, group in frame.groupby("strategy") if name in REFERENCES
    }
    rows = []
    for name, group in frame.groupby("strategy", sort=False):
        right = group.set_index("seed")["right"].astype(bool)
        share = float(right.mean())
        low, high = wilson_interval(share, len(right))
        row = {
            "strategy": name,
            "trials": int(group["trials"].iloc[0]),
            "repeat seeds": int(group["repeat_seeds"].iloc[0]),
            "replays": len(group),
            "right": f"{share:.1%} [{low:.1%}, {high:.1%}]",
        }
        for reference, theirs in references.items():
            seeds = right.index.intersection(theirs.index)
            mine, there = right.loc[seeds].to_numpy(), theirs.loc[seeds].to_numpy()
            value, (a, b) = skill(float(mine.mean()), float(there.mean())), skill_interval(mine, there)
            row[f"skill over {reference.split(':')[0]}"] = (
                f"{value:+.2f} [{a:+.2f}, {b:+.2f}]" if not math.isnan(value) else "n/a"
            )
        for column in group.columns:
            if column.startswith(("alike: ", "covers: ", "wrong: ", "decides: ")):
                row[column] = f"{group[column].astype(bool).mean():.0%}"
        for column in (c for c in group.columns if c.startswith("regret: ") and group[c].notna().any()):
            row[f"mean {column}"] = round(float(group[column].mean()), 2)
            row[f"{column} >= 1 point"] = f"{(group[column] >= 1).mean():.0%}"
        if name in REFERENCES:
            rows.append(row)
            continue
        curves = _curves(group)
        to_share = [hours_to(curve, HYPERVOLUME_SHARE) for curve in curves]
        row |= {
            "search device-hours": round(float(group["search_hours"].median()), 2),
            # the whole study: its search, its sampler's proposals and its repeats (the budget the answer costs)
            "device-hours": round(float((group["search_hours"] + group["sampler_hours"] + group["repeat_hours"]).median()), 2),
            "repeats on searched seeds": f"{(group['leaked_repeats'] > 0).mean():.0%}",
            "search seeds read twice": f"{(group['reused_search_seeds'] > 0).mean():.0%}",
            f"hours to {HYPERVOLUME_SHARE:.0%} hypervolume": _median_hours(to_share),
            f"hypervolume share over {horizon:g} h": round(float(np.mean([area_under(c, horizon) for c in curves])), 3),
            "seconds per replay": round(float(group["replay_seconds"].median()), 2),
        }
        rows.append(row)
    return pd.DataFrame(rows)


def _compared(frame: pd.DataFrame, families: list[str]) -> list[str]:
    """The families ``frame``'s replays compare with the baseline (which is not compared with itself)."""
    return [label for label in families if f"concludes: {label}" in frame.columns]


def _curves(group: pd.DataFrame) -> list[list[tuple[float, float]]]:
    """Each replay's hypervolume curve, read from its row."""
    return [[(hours, share) for hours, share in json.loads(curve)] for curve in group["hypervolume"]]


def paired(frame: pd.DataFrame, against: str, horizon: float, families: list[str]) -> pd.DataFrame:
    """Each strategy against ``against``, replay by replay of the same study seed (which draws the same
    table seeds): what one strategy's replays show and the other's do not, and whether it is chance.

    Args:
        frame: Replays of one budget, rows of ``run_replays``, ``against``'s among them.
        against: The strategy compared with.
        horizon: The device-hours the hypervolume share is averaged over.
        families: The study's family labels (``summary``'s).

    Returns:
        One row per other strategy (the reference protocols among them): the seeds both replayed; in how many
        the replay is right (``skill.Referee.score``) under it alone and under ``against`` alone, with McNemar's
        exact p; each family's mean difference in regret, with Wilcoxon's signed-rank p, where both searched;
        every p also Holm-adjusted across the table's tests; and the mean difference in hypervolume share over
        ``horizon`` (reported, never the criterion), with its standard error.
    """
    compared = _compared(frame, families)
    by_seed = {name: group.set_index("seed") for name, group in frame.groupby("strategy", sort=False)}
    if against not in by_seed:
        raise ValueError(f"no replays of {against!r} at this budget: replay it first")
    rows, p_values = [], []
    for name, group in by_seed.items():
        if name == against:
            continue
        seeds = group.index.intersection(by_seed[against].index)
        mine, theirs = group.loc[seeds], by_seed[against].loc[seeds]
        row: dict[str, object] = {"strategy": name, "seeds": len(seeds)}
        right, right_there = mine["right"].astype(bool), theirs["right"].astype(bool)
        only, only_there = int((right & ~right_there).sum()), int((right_there & ~right).sum())
        row["right: only here / only there"] = f"{only} / {only_there}"
        row["right: McNemar p"] = float(binomtest(only, only + only_there).pvalue) if only + only_there else 1.0
        p_values.append((len(rows), "right: McNemar p"))
        if name in REFERENCES:  # nothing searched: no regret, no hypervolume
            rows.append(row)
            continue
        for label in compared:
            difference = mine[f"regret: {label}"] - theirs[f"regret: {label}"]
            test = wilcoxon(difference).pvalue if difference.any() else 1.0
            row[f"regret: {label}, mean difference"] = round(float(difference.mean()), 2)
            row[f"regret: {label}, Wilcoxon p"] = float(test)
            p_values.append((len(rows), f"regret: {label}, Wilcoxon p"))
        share = np.array([area_under(c, horizon) for c in _curves(mine)]) - np.array(
            [area_under(c, horizon) for c in _curves(theirs)]
        )
        row[f"hypervolume share over {horizon:g} h, difference"] = (
            f"{share.mean():+.3f} ± {share.std(ddof=1) / math.sqrt(len(share)):.3f}"
        )
        rows.append(row)
    # Holm's correction across every test of the table: strategies times the answer's measures.
    adjusted = holm([float(rows[index][column]) for index, column in p_values])  # type: ignore[arg-type]
    for (index, column), value in zip(p_values, adjusted, strict=True):
        rows[index][column] = round(float(rows[index][column]), 3)  # type: ignore[arg-type]
        rows[index][column.replace(" p", " p (Holm)")] = round(value, 3)
    return pd.DataFrame(rows)


def _median_hours(hours: list[float]) -> str:
    """The median, or how many replays never reached the share."""
    never = sum(math.isinf(h) for h in hours)
    if never * 2 >= len(hours):
        return f"not reached in {never} of {len(hours)}"
    return f"{float(np.median(hours)):.2f}" + (f" ({never} never)" if never else "")
