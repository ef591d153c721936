"""Seed repeats: the configurations the verdict compares, queued again on fresh seeds after the search.

A preset with ``interim_seeds`` repeats in two looks (a group-sequential design): every compared configuration
first gets ``interim_seeds`` fresh seeds; a comparison the verdict then finds better, worse or the same at
``INTERIM_ALPHA`` (Holm-adjusted, as the verdict adjusts) is settled, and only the configurations of the
comparisons left open get the remaining seeds. ``INTERIM_ALPHA`` is O'Brien and Fleming's boundary at the first
of two equally spaced looks for an overall two-sided 0.05 (z = 2.80, p = 0.0052); the final verdict tests at
0.05 where their boundary is 0.048, so each comparison's error rate is at most 0.005 + 0.05 under the null,
about 0.05 because the two looks share their first seeds. With few seeds the t-test's tails are heavier than
the normal's the boundary assumes: the first look is, if anything, harder to pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import optuna
import pandas as pd
from optuna.trial import TrialState

from storage import record
from storage.repeats_study import open_linked_repeats, repeats_trials
from studies.catalogue.schema import Study
from studies.engine.queue import PlannedTrial, enqueue
from studies.results.frame import configuration, configuration_key, trials_frame
from studies.results.matching import best_baseline, pairings
from studies.results.names import FAMILIES_ATTRIBUTE
from studies.results.verdict import verdict


def most_repeats(study: Study, seeds: int) -> int:
    """The most seed repeats a run of ``study`` queues: each comparison's two configurations (each
    family's selected one and the baseline it faces; each named point and its baseline), ``seeds`` each."""
    return 2 * (len(study.families) - 1 + len(study.points)) * seeds


def fewest_repeats(study: Study, seeds: int) -> int:
    """The fewest seed repeats a run of ``study`` queues: one baseline configuration faces every family and named
    point (the best baseline is at each one's cost), so each of them and it take ``seeds`` each."""
    return (len(study.families) + len(study.points)) * seeds


INTERIM_ALPHA = 0.005  # the first look's level (the module's docstring says why)


def open_comparisons(frame: pd.DataFrame) -> list[int]:
    """The trial numbers of the configurations whose comparisons the verdict leaves undetermined at
    ``INTERIM_ALPHA`` (no test yet, neither different nor the same), in the verdict's order."""
    numbers: list[int] = []
    for comparison in verdict(frame).comparisons:
        settled = comparison.adjusted_p < INTERIM_ALPHA or comparison.equivalence_p < INTERIM_ALPHA  # NaN: not settled
        if comparison.test is None or not settled:
            numbers += comparison.pairing.numbers
    return numbers


def repeats_due(optuna_study: optuna.Study, seeds: int, *, open_only: bool = False) -> list[PlannedTrial]:
    """The seed repeats the verdict's configurations lack now: fresh seeds 1..``seeds`` of the best baseline, each
    family's selected configuration and the baseline's at its cost, each named point and the baseline's at its cost
    (``studies.results.matching.pairings``, the rule the verdict applies), none a configuration already has.

    Repeat ``k`` of every configuration trains on the same seed (``PlannedTrial.repeat_index``). Seeds a
    configuration already has, finished, running or queued (by an earlier run), are not due again.

    Args:
        optuna_study: The search's study (its seed repeats are read from its linked study).
        seeds: The fresh seeds each configuration is to have.
        open_only: Only the configurations of the comparisons still open (``open_comparisons``): a second look.
    """
    frame = trials_frame(optuna_study)
    if frame.empty:
        return []
    by_number = {t.number: t for t in optuna_study.get_trials(deepcopy=False)}  # the search's trials
    has: dict[str, set[int]] = {}  # configuration -> its repeat indices, finished, running or queued
    for trial in [*by_number.values(), *repeats_trials(optuna_study)]:  # an older store's are among the search's
        if record.REPEAT_INDEX in trial.user_attrs and trial.state != TrialState.FAIL:  # a failed one has its retry queued
            original = by_number[trial.user_attrs[record.REPEAT_OF]]
            has.setdefault(configuration_key(configuration(original)), set()).add(trial.user_attrs[record.REPEAT_INDEX])
    due = []
    if open_only:
        compared = open_comparisons(frame)
    else:
        reference = best_baseline(frame)
        chosen = [number for pairing in pairings(frame, frame.attrs[FAMILIES_ATTRIBUTE]) for number in pairing.numbers]
        compared = [*([] if reference is None else [reference]), *chosen]
    for number in dict.fromkeys(compared):
        original = by_number[number]  # a search trial: pairings read search runs only
        key = configuration_key(configuration(original))
        plan = replace(PlannedTrial.of(original), repeat_of=original.number, retry_of=None, attempt=0)
        for index in sorted(set(range(1, seeds + 1)) - has.setdefault(key, set())):
            due.append(replace(plan, repeat_index=index))
            has[key].add(index)
    return due


def later_looks_repeats(optuna_study: optuna.Study, looks: tuple[int, ...], look: int) -> int:
    """The most seed repeats the looks after ``look`` can queue, every comparison left open by it: what the ETA of
    ``look``'s phase counts after it (none after the last look).

    Args:
        optuna_study: The search's study, ``look``'s repeats queued.
        looks: The seeds each configuration has after each look (``Preset.repeat_looks``).
        look: The look whose repeats are queued.
    """
    return len(repeats_due(optuna_study, looks[-1])) if look + 1 < len(looks) else 0


QUEUED_SAID_EVERY = 500  # repeats queued between two progress calls (a store writes each one on its own)


def plan_repeats(
    optuna_study: optuna.Study, seeds: int, *, open_only: bool = False, progress: Callable[[int, int], None] | None = None
) -> int:
    """Queue the seed repeats due (``repeats_due``; ``open_only``: a second look's) in the search's linked study of
    repeats (``storage.repeats_study``: Optuna's own tools then find the search's front without them).

    Args:
        progress: Called with ``(queued, due)`` every ``QUEUED_SAID_EVERY`` repeats queued, where more are due.

    Returns:
        How many repeats were queued.
    """
    due = repeats_due(optuna_study, seeds, open_only=open_only)
    if due:
        repeats = open_linked_repeats(optuna_study)
        for count, planned in enumerate(due, start=1):
            enqueue(repeats, planned)
            if progress is not None and count % QUEUED_SAID_EVERY == 0 and count < len(due):
                progress(count, len(due))
    return len(due)
