"""Which configurations the verdict compares, at matched cost: one rule for the repeats and the verdict.

**The cost band.** Two configurations are matched in cost when their forward FLOPs per
example are within ``COST_BAND`` of each other (a ratio between 1/1.15 and 1.15). Why 15%:
the searched widths double a model's FLOPs (D=32 costs about 0.43× D=64 in lra_sharing's quick
space), so any band that holds one width keeps the next one out, while the designs of one
width differ by less: cross-head metrics of rank 4 to 16 cost 1.01–1.14× MHA's FLOPs at
D=64 and the authors' rowsum layer 0.82–0.92×; a narrower band would leave most DAMCHA
configurations with no MHA to be compared with, a wider one would compare across the
quality that more compute buys.

**The rule** (search runs only, by validation score, ``fronts.best``). For each family other
than the baseline: its best configuration within the band of the best baseline's cost; else its
best at any cost, against the best baseline run within the band of *its* cost (which the seed
repeats then train to full length, stopped early in the search or not: runs there are compared
at the last step all of them reached, so a run the family's median stopped is not passed over
for a worse one that finished); else against the baseline's run nearest in cost, flagged as not
matched. Each named point likewise, at its own cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from storage import record
from studies.results.frame import search_runs
from studies.results.fronts import best
from studies.results.names import CURVE, SCORE
from studies.results.quality import quality

COST_BAND = 1.15


def matched(ratio: float) -> bool:
    """Whether a FLOPs ratio lies within the cost band."""
    return 1 / COST_BAND <= ratio <= COST_BAND


@dataclass(frozen=True)
class Pairing:
    """A configuration the verdict judges, against the baseline configuration it is judged with.

    Attributes:
        label: The family's label, or the named point's.
        candidate: The trial number of its selected search run (None: nothing to compare).
        baseline: The trial number of the baseline's run it is compared with (None: none).
        at_best_baseline: The baseline is the best baseline configuration (else the one at the candidate's cost).
        matched: The two costs lie within ``COST_BAND``.
        why_none: Why there is no comparison (when ``candidate`` or ``baseline`` is None).
        point: ``label`` names a named point (``NamedPoint``), not a family.
    """

    label: str
    candidate: int | None
    baseline: int | None
    at_best_baseline: bool = False
    matched: bool = False
    why_none: str = ""
    point: bool = False

    @property
    def numbers(self) -> list[int]:
        """The trials whose configurations need fresh seeds."""
        return [number for number in (self.candidate, self.baseline) if number is not None]


def _scored(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows[SCORE].notna() & rows[record.FLOPS].notna()]


def _baseline_at(baselines: pd.DataFrame, flops: float, sign: float) -> tuple[pd.Series, bool]:
    """The baseline's run to compare with a configuration of ``flops``: its best within the band, judged at the
    last step every run there reached (``_at_common_step``: a run stopped early and a complete one alike), else
    the nearest in cost, not matched.

    Args:
        sign: The quality's sign (``Quality.sign``): a learning curve's values times it are scores.
    """
    ratios = flops / baselines[record.FLOPS].astype(float)
    near = baselines[ratios.map(matched)]
    if not near.empty:
        return best(_at_common_step(near, sign)), True
    distance = np.abs(np.log(ratios.astype(float)))
    nearest = baselines[distance == distance.min()]
    return best(nearest), False


def _at_common_step(rows: pd.DataFrame, sign: float) -> pd.DataFrame:
    """``rows`` scored by their value at the last step all of them reported, where one stopped early.

    A run the early-stopping rule stopped (a median over the whole family, which holds other widths) may
    be the best of its cost band; its last value comes from an earlier step than a complete run's final
    one, so the two are compared where both have a value. Complete runs alone, or runs without learning
    curves, keep their scores.
    """
    curves = list(rows[CURVE]) if CURVE in rows else []
    if (rows["state"] == "COMPLETE").all() or len(curves) != len(rows) or not all(isinstance(c, dict) and c for c in curves):
        return rows
    step = min(max(curve) for curve in curves)
    reached = [[s for s in curve if s <= step] for curve in curves]
    if not all(reached):  # curves on different schedules: no step to compare them at
        return rows
    return rows.assign(**{SCORE: [sign * float(curve[max(s)]) for curve, s in zip(curves, reached, strict=True)]})


def _why_none(rows: pd.DataFrame, label: str) -> str:
    """Why a family or point has nothing to compare: its search trials by outcome."""
    if rows.empty:
        return f"{label} has no search trial"
    states = rows["state"].value_counts()
    unscored = int(((rows["state"] == "COMPLETE") & ~rows.index.isin(_scored(rows).index)).sum())
    if unscored:  # another program's store: complete, but with no finite value or no FLOPs count to compare
        trials = "trial has" if unscored == 1 else "trials have"
        return f"its {unscored} complete search {trials} no finite value or no FLOPs count"
    outcomes = (("PRUNED", "stopped early"), ("FAIL", "failed"), ("INFEASIBLE", "could not train"), ("RUNNING", "running"))
    parts = [f"{count} {name}" for state, name in outcomes if (count := int(states.get(state, 0)))]
    return f"none of its {len(rows)} search trials completed" + (f" ({', '.join(parts)})" if parts else "")


def best_baseline(frame: pd.DataFrame) -> int | None:
    """The trial number of the best complete baseline search run (the reference every family is first compared at)."""
    search = frame[search_runs(frame)] if not frame.empty else frame
    complete = _scored(search[search[record.BASELINE] & (search["state"] == "COMPLETE")]) if not search.empty else search
    return None if complete.empty else int(best(complete)["number"])


def pairings(frame: pd.DataFrame, families: list[str]) -> list[Pairing]:
    """What the verdict compares, family by family, then each named point (see the module's docstring).

    Args:
        frame: ``trials_frame``.
        families: The study's family labels, the baseline's first (a family without trials is answered too).

    Returns:
        One ``Pairing`` per family other than the baseline, then one per named point, in that order.
    """
    search = frame[search_runs(frame)] if not frame.empty else frame
    baselines = _scored(search[search[record.BASELINE]]) if not search.empty else search
    complete_baselines = baselines[baselines["state"] == "COMPLETE"] if not baselines.empty else baselines
    baseline_labels = set(frame.loc[frame[record.BASELINE], record.FAMILY]) if not frame.empty else set(families[:1])
    others = [family for family in families if family not in baseline_labels]
    if complete_baselines.empty:
        rows = search[search[record.BASELINE]] if not search.empty else search
        label = next(iter(baseline_labels), "the baseline")
        why = (
            f"the baseline, {label}, has no result: {_why_none(rows, label)}"
            if not rows.empty
            else "no baseline configuration completed"
        )
        return [Pairing(family, None, None, why_none=why) for family in others]
    reference = best(complete_baselines)
    sign = quality(frame).sign
    result = []
    for family in others:
        rows = search[search[record.FAMILY] == family]
        complete = _scored(rows[rows["state"] == "COMPLETE"])
        if complete.empty:
            result.append(Pairing(family, None, None, why_none=_why_none(rows, family)))
            continue
        at_reference = complete[(complete[record.FLOPS].astype(float) / float(reference[record.FLOPS])).map(matched)]
        if not at_reference.empty:
            result.append(Pairing(family, int(best(at_reference)["number"]), int(reference["number"]), True, True))
            continue
        chosen = best(complete)
        baseline, is_matched = _baseline_at(baselines, float(chosen[record.FLOPS]), sign)
        result.append(Pairing(family, int(chosen["number"]), int(baseline["number"]), False, is_matched))
    points = search[search[record.POINT].notna()] if record.POINT in search else search.iloc[0:0]
    for label, rows in points.groupby(record.POINT, sort=False):
        complete = _scored(rows[rows["state"] == "COMPLETE"])
        if complete.empty:
            result.append(Pairing(str(label), None, None, why_none=_why_none(rows, str(label)), point=True))
            continue
        chosen = best(complete)
        baseline, is_matched = _baseline_at(baselines, float(chosen[record.FLOPS]), sign)
        same = int(baseline["number"]) == int(reference["number"])
        result.append(Pairing(str(label), int(chosen["number"]), int(baseline["number"]), same, is_matched, point=True))
    return result


def front_relation(frame: pd.DataFrame, family: str, baseline: str) -> str:
    """How a family's Pareto front (validation score against FLOPs, complete search runs) relates to
    the baseline's over the FLOPs range both searches cover: one lies above, or they cross, and where.

    Returns:
        A clause such as ``DAMCHA (cross)'s front lies below MHA's over 1.2e+06–2.5e+06 FLOPs``.
    """
    search = frame[search_runs(frame) & (frame["state"] == "COMPLETE")] if not frame.empty else frame
    ours, theirs = (_scored(search[search[record.FAMILY] == name]) for name in (family, baseline))
    if ours.empty or theirs.empty:
        return ""
    low = max(float(ours[record.FLOPS].min()), float(theirs[record.FLOPS].min()))
    high = min(float(ours[record.FLOPS].max()), float(theirs[record.FLOPS].max()))
    if low > high:
        return f"their searches cover no common FLOPs range ({family} {_span(ours)}, {baseline} {_span(theirs)})"
    points = sorted(
        {x for x in pd.concat([ours[record.FLOPS], theirs[record.FLOPS]]).astype(float) if low <= x <= high} | {low, high}
    )
    gaps = [_front_at(ours, x) - _front_at(theirs, x) for x in points]
    # A range of one point is said as the point (both searches' configurations there cost the same).
    where = (
        f"at {low:.3g} FLOPs, the one cost both searches cover"
        if f"{low:.3g}" == f"{high:.3g}"
        else f"over {low:.3g}–{high:.3g} FLOPs, the range both searches cover"
    )
    if all(gap >= 0 for gap in gaps):
        how = "matches" if all(gap == 0 for gap in gaps) else "lies on or above"
        return f"{family}'s front {how} {baseline}'s {where}"
    if all(gap <= 0 for gap in gaps):
        return f"{family}'s front lies on or below {baseline}'s {where}"
    signs = [math.copysign(1, gap) for gap in gaps]
    crossing = next(x for x, before, after in zip(points[1:], signs, signs[1:], strict=False) if before != after)
    return f"{family}'s and {baseline}'s fronts cross near {crossing:.3g} FLOPs ({where})"


def _front_at(rows: pd.DataFrame, flops: float) -> float:
    """The best score of runs costing at most ``flops`` (a Pareto front as a step function)."""
    within = rows[rows[record.FLOPS].astype(float) <= flops]
    return float(within[SCORE].max()) if not within.empty else -math.inf


def _span(rows: pd.DataFrame) -> str:
    low, high = f"{float(rows[record.FLOPS].min()):.3g}", f"{float(rows[record.FLOPS].max()):.3g}"
    return low if low == high else f"{low}–{high}"
