"""Seed repeats: each family's selected configurations queued again on fresh seeds after the search."""

from __future__ import annotations

from dataclasses import replace

import optuna
from optuna.trial import TrialState

from reports.results.frame import configuration, configuration_key, trials_frame
from reports.results.fronts import family_bests
from studies.engine.queue import PlannedTrial, enqueue


def plan_repeats(optuna_study: optuna.Study, seeds: int) -> int:
    """Queue fresh seeds 1..``seeds`` of each family's best configuration and of its best at or
    below the best baseline's FLOPs (``reports.results.fronts.family_bests``).

    Repeat ``k`` of every configuration trains on the same seed (``PlannedTrial.repeat_index``).
    Seeds a configuration already has, finished or queued (by an earlier run), are not queued again.

    Returns:
        How many repeats were queued.
    """
    frame = trials_frame(optuna_study)
    if frame.empty:
        return 0
    stored = optuna_study.get_trials(deepcopy=False)
    by_number = {t.number: t for t in stored}
    has: dict[str, set[int]] = {}  # configuration -> its repeat indices, finished, running or queued
    for trial in stored:
        if "repeat_index" in trial.user_attrs and trial.state != TrialState.FAIL:  # a failed one has its retry queued
            original = by_number[trial.user_attrs["repeat_of"]]
            has.setdefault(configuration_key(configuration(original)), set()).add(trial.user_attrs["repeat_index"])
    planned = 0
    for number in family_bests(frame)["number"]:
        original = by_number[int(number)]  # a search trial: family_bests leaves repeats out
        key = configuration_key(configuration(original))
        plan = replace(PlannedTrial.of(original), repeat_of=original.number, retry_of=None, attempt=0)
        for index in sorted(set(range(1, seeds + 1)) - has.setdefault(key, set())):
            enqueue(optuna_study, replace(plan, repeat_index=index))
            has[key].add(index)
            planned += 1
    return planned
