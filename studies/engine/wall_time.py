"""A run's wall time, as the plan predicts it before the run and the live ETA re-predicts it during the run.

One model for both: the fixed costs around the trials (the process's start, each phase's workers, the
closing summary and report), and the trials themselves packed on the run's slots. Its constants were
measured on this project's reference machine (2 idle cores) and are named with the runs they come from;
docs/plan.md shows how well the model predicted runs it was not fitted on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from studies.catalogue.search_strategy import Search


@dataclass(frozen=True)
class Overheads:
    """Wall seconds a run spends outside its trials.

    Attributes:
        start: From the process's start to its first trials running: imports, Ray's start, the store.
        phase: Each phase's workers starting (Ray's actors, torch's import, the data mapped) before a first step.
        closing: After the last trial: the summary, the report and Ray's shutdown.
    """

    start: float
    phase: float
    closing: float

    def around(self, phases: int) -> float:
        """The fixed cost of a whole run with ``phases`` phases of trials (the search, the seed repeats)."""
        return self.start + phases * self.phase + self.closing


# A smoke run of lra_sharing on 2 idle cores, 2026-12-04 (6 search trials and 6 repeats, each under a second):
# the first trials ran 13.8 s after the start, each phase's first trial ended 6 s after the phase began,
# the process exited 6.7 s after the last trial ended.
MEASURED_OVERHEADS = Overheads(start=14.0, phase=6.0, closing=7.0)

# The share of searched trials each early-stopping rule stopped at the grace step in lra_sharing's quick runs on
# 2 cores: ASHA's median rule 16 of 28 (2026-12-04), the dominance rule 4 of 24 (2026-12-03).
STOPPED_SHARE = {"median": 16 / 28, "dominated": 4 / 24}


def searched_share(search: Search, grace_steps: int, steps: int) -> float:
    """The expected share of a whole trial a searched trial trains: all of it, unless early stopping may end it
    at ``grace_steps`` (the rule's ``STOPPED_SHARE`` of the trials)."""
    if not search.stops_early(grace_steps, steps):
        return 1.0
    return 1.0 - STOPPED_SHARE[search.stopping_rule] * (1.0 - grace_steps / steps)


def packed_seconds(total_seconds: float, trials: int, slots: int) -> float:
    """Trials of ``total_seconds`` in all, run ``slots`` at a time: rounds of their mean length (the last round
    as long as a whole one: what ends a phase is its last trial)."""
    if trials <= 0:
        return 0.0
    return total_seconds / trials * math.ceil(trials / max(slots, 1))


def expected_run_seconds(
    search: Sequence[float], repeats: Sequence[float], slots: int, overheads: Overheads = MEASURED_OVERHEADS
) -> float:
    """A whole run's expected wall time.

    Args:
        search: Each search trial's expected wall seconds (early stopping's share counted).
        repeats: Each seed repeat's expected wall seconds (a repeat trains to the end).
        slots: Trials run at once.
        overheads: The fixed costs around the trials.

    Returns:
        Seconds from the process's start to its exit.
    """
    phases = (len(search) > 0) + (len(repeats) > 0)
    trials = packed_seconds(sum(search), len(search), slots) + packed_seconds(sum(repeats), len(repeats), slots)
    return overheads.around(phases) + trials
