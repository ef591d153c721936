"""Early stopping's rule within a family (``Ledger.stops`` applies it on a view of the store): the rungs
a trial is judged at, and whether the trials of its family there make it stop."""

from __future__ import annotations

import numpy as np
import optuna
from optuna.trial import FrozenTrial

from storage import record
from studies.catalogue.schema import Preset
from studies.engine.views import family_view

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


class StoppingJudge:
    """A run's early stopping of its searched trials: each judged once at each rung it reaches, among its
    family's trials of its view that reached the rung, by the preset's rule (``Search.stopping_rule``).

    It holds no study (Ray Tune pickles the ledger that holds it, and a study carries its store's URL).

    Args:
        preset: The run's budget (the rule, its rungs).
        maximize: Whether higher values of the first objective are better.
    """

    def __init__(self, preset: Preset, *, maximize: bool) -> None:
        self.preset = preset
        self.sign = 1.0 if maximize else -1.0
        self.rungs = stopping_rungs(preset)
        self.judged: dict[int, set[int]] = {}  # trial number -> the rungs it was judged at
        self.flops: dict[int, float] = {}  # trial number -> its forward FLOPs per example (the dominated rule's)

    def stops(self, study: optuna.Study, number: int, family: str | None, view_end: int, step: int, value: float) -> bool:
        """Whether searched trial ``number`` of ``study``'s ``family``, whose view holds the trials numbered below
        ``view_end``, stops at ``step`` with ``value`` of the first objective (judged at the first rung
        it reached and was not judged at; False between rungs)."""
        judged = self.judged.setdefault(number, set())
        rungs = [rung for rung in self.rungs if rung <= step and rung not in judged]
        if not rungs:
            return False
        rung = rungs[0]
        judged.add(rung)
        others = [
            (self.sign * found, other.user_attrs.get(record.FLOPS))
            for other in family_view(study, family, view_end)
            if (found := value_at(other, rung)) is not None
        ]
        return stops_among(self.preset.search.stopping_rule, (self.sign * value, self.flops.get(number)), others)
