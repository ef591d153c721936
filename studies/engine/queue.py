"""The store as the queue of planned trials, shared by every driver of a study.

A planned trial (a family's next searched trial, a retry, a seed repeat) is a WAITING trial in the Optuna
store (``Study.enqueue_trial``): its knob values (``params``) are the queued parameters and
how it was planned (``PlannedTrial``) its user attributes. Any driver's next ask takes
it, in the order it was queued; a killed driver's queue survives in the store.

A failed trial's configuration is queued again (``retry``); what a dead driver left is found and
retried by ``studies.engine.recovery``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from search_space.space import Value
from storage import record

COUNTED_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)  # trials that use budget
MAX_RETRIES = 2  # a configuration whose trials keep dying is given up after this many retries


@dataclass(frozen=True)
class PlannedTrial:
    """A trial to run, with knob values set before the sampler fills in the rest.

    Args:
        params: The knob values it sets (Optuna parameters; the sampler fills in the rest).
        family: The label of the study's family it belongs to (``studies.catalogue.schema.Family``).
        baseline: Its family is the study's baseline.
        retry_of: The number of the failed trial whose configuration it runs again.
        repeat_of: The number of the trial whose configuration it runs on a fresh seed.
        repeat_index: Which fresh seed (1, 2, ...): repeat ``k`` of every configuration
            trains on the same seed, so the families' repeats can be compared in pairs.
        attempt: How many times its configuration failed and was retried before.
        point: The label of the study's named point it trains (``studies.catalogue.schema.NamedPoint``).
        point_values: The point's knob values, outside the sampler's parameters.
        seed_index: Which of its configuration's runs an exhaustive preset's trial is
            (``studies.engine.study_space.GridEntry``): run ``i`` of every configuration trains on the same seed.
    """

    params: Mapping[str, Value]
    family: str | None = None
    baseline: bool = False
    retry_of: int | None = None
    repeat_of: int | None = None
    repeat_index: int | None = None
    attempt: int = 0
    point: str | None = None
    point_values: Mapping[str, Value] | None = None
    seed_index: int | None = None

    def attributes(self) -> dict[str, Any]:
        """The user attributes that record how the trial was planned."""
        named = {
            record.FAMILY: self.family,
            record.RETRY_OF: self.retry_of,
            record.REPEAT_OF: self.repeat_of,
            record.REPEAT_INDEX: self.repeat_index,
            record.ATTEMPT: self.attempt or None,
            record.POINT: self.point,
            record.POINT_VALUES: None if self.point_values is None else dict(self.point_values),
            record.SEED_INDEX: self.seed_index,
        }
        return {record.BASELINE: self.baseline} | {name: value for name, value in named.items() if value is not None}

    @classmethod
    def of(cls, trial: FrozenTrial | optuna.Trial) -> PlannedTrial:
        """How ``trial`` was planned, with all its parameters set (to run its configuration again)."""
        attributes = trial.user_attrs
        return cls(
            params=dict(trial.params),
            family=attributes.get(record.FAMILY),
            baseline=bool(attributes.get(record.BASELINE)),
            retry_of=attributes.get(record.RETRY_OF),
            repeat_of=attributes.get(record.REPEAT_OF),
            repeat_index=attributes.get(record.REPEAT_INDEX),
            attempt=int(attributes.get(record.ATTEMPT, 0)),
            point=attributes.get(record.POINT),
            point_values=attributes.get(record.POINT_VALUES),
            seed_index=attributes.get(record.SEED_INDEX),
        )


def enqueue(study: optuna.Study, planned: PlannedTrial) -> None:
    """Put ``planned`` at the end of the store's queue."""
    study.enqueue_trial(dict(planned.params), user_attrs=planned.attributes())


def queued(study: optuna.Study) -> list[FrozenTrial]:
    """The store's queue: WAITING trials, in the order the next asks take them."""
    return study.get_trials(deepcopy=False, states=(TrialState.WAITING,))


def trials_counted(study: optuna.Study) -> int:
    """How much of the study's ``--trials`` is used: finished, running and queued trials (all drivers').

    Seed repeats and infeasible configurations use none of it.
    """
    trials = study.get_trials(deepcopy=False, states=COUNTED_STATES)
    return sum(record.REPEAT_OF not in t.user_attrs and record.INFEASIBLE not in t.user_attrs for t in trials)


def retry(study: optuna.Study, trial: FrozenTrial | optuna.Trial) -> bool:
    """Queue a failed trial's configuration again, at most ``MAX_RETRIES`` times.

    Returns:
        True if a retry was queued.
    """
    planned = PlannedTrial.of(trial)
    if planned.attempt >= MAX_RETRIES:
        return False
    enqueue(study, replace(planned, retry_of=trial.number, attempt=planned.attempt + 1))
    return True


def trial_id(storage: optuna.storages.BaseStorage, study: optuna.Study, number: int) -> int:
    """The storage's id of ``study``'s trial ``number`` (Optuna's public storage API)."""
    return storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(study.study_name), number)
