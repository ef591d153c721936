"""Early stopping's rule within a family (``Ledger.stops`` applies it on a view of the store): the rungs
a trial is judged at, and whether the trials of its family there make it stop."""

from __future__ import annotations

import numpy as np
from optuna.trial import FrozenTrial

from studies.catalogue.schema import Preset

REDUCTION_FACTOR = 2  # early stopping keeps the better half of a family at each rung (ASHA's rule)


def stopping_rungs(preset: Preset) -> list[int]:
    """The steps at which early stopping judges a trial: the grace period, then twice as long, ... below the
    last step; none when the search has no stopping rule."""
    if not preset.search.stops_early(preset.grace_steps, preset.train.steps):
        return []
    rungs, rung = [], preset.grace_steps
    while rung < preset.train.steps:
        rungs.append(rung)
        rung *= REDUCTION_FACTOR
    return rungs


def stops_among(rule: str, mine: tuple[float, float | None], others: list[tuple[float, float | None]]) -> bool:
    """Whether a trial at ``mine`` (score, higher better; FLOPs) stops among its family's ``others`` at a rung:
    by ``median``, a score below their median; by ``dominated``, at least half of them dominate it. None
    others: it goes on."""
    if not others:
        return False
    if rule == "dominated":
        dominating = sum(_dominates(other, mine) for other in others)
        return dominating * REDUCTION_FACTOR >= len(others)
    return mine[0] < float(np.percentile([found for found, _ in others], (1 - 1 / REDUCTION_FACTOR) * 100))


def _dominates(one: tuple[float, float | None], other: tuple[float, float | None]) -> bool:
    """Whether ``one`` dominates ``other``, each ``(value, FLOPs)`` with higher values better: as good in
    both, better in one. Unknown FLOPs compare as equal."""
    value, flops = one
    other_value, other_flops = other
    if flops is None or other_flops is None:
        flops = other_flops = 0.0
    return value >= other_value and flops <= other_flops and (value > other_value or flops < other_flops)


def value_at(trial: FrozenTrial, rung: int) -> float | None:
    """A trial's value at a rung: its first report at or after that step (ASHA's), or None if it stopped before."""
    steps = [step for step in trial.intermediate_values if step >= rung]
    return trial.intermediate_values[min(steps)] if steps else None
