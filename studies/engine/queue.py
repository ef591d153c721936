"""The store as the queue of planned trials, shared by every driver of a study.

A planned trial (a family's next searched trial, a retry, a seed repeat) is a WAITING trial in the Optuna
store (``Study.enqueue_trial``): its knob values (``params``) are the queued parameters and
how it was planned (``PlannedTrial``) its user attributes. Any driver's next ask takes
it, in the order it was queued; a killed driver's queue survives in the store.

A driver's running trials beat through Optuna's heartbeat (``RDBStorage.record_heartbeat``).
``recover_interrupted`` fails the trials a dead driver left RUNNING (all of them when
this driver is the store's only one; else those whose driver's process on this host has
exited, and those whose heartbeat is older than ``GRACE_PERIOD_S``, by
``optuna.storages.fail_stale_trials``) and queues their retries; a running driver keeps
doing so (``fail_abandoned``, at each heartbeat).
"""

from __future__ import annotations

import datetime
import os
import socket
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from search_space.space import Value
from storage import record
from storage.repeats_study import linked_repeats
from studies.engine.endings import Ending

HEARTBEAT_INTERVAL_S = 30  # a driver refreshes its running trials' heartbeat this often
GRACE_PERIOD_S = 180  # a RUNNING trial without a heartbeat for this long belongs to a dead driver
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
            (``studies.catalogue.schema.GridEntry``): run ``i`` of every configuration trains on the same seed.
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


def heartbeat_options() -> dict[str, Any]:
    """``RDBStorage`` keyword arguments for a driver's storage: Optuna's heartbeat, and ``retry`` for stale trials.

    (Optuna's ``RetryHeartbeatStaleTrialCallback`` would copy the dead run's user
    attributes and keep the lineage in system attributes; ``retry`` records the store's
    own ``retry_of`` and ``attempt``, with the same limit as any other retry.)
    """
    return {"heartbeat_interval": HEARTBEAT_INTERVAL_S, "grace_period": GRACE_PERIOD_S, "heartbeat_stale_trial_callback": retry}


def trial_id(storage: optuna.storages.BaseStorage, study: optuna.Study, number: int) -> int:
    """The storage's id of ``study``'s trial ``number`` (Optuna's public storage API)."""
    return storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(study.study_name), number)


def driver_identity() -> str:
    """``host:pid`` of this driver process, recorded on every trial it runs."""
    return f"{socket.gethostname()}:{os.getpid()}"


def driver_gone(identity: str | None) -> bool:
    """Whether a trial's driver (``host:pid``) provably stopped: it ran on this host and its process has exited.

    A driver on another host, or a process id now taken by another process, is not proof: those
    trials wait for Optuna's heartbeat grace period (``GRACE_PERIOD_S``).
    """
    host, _, pid = (identity or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        return False
    return False


def fail_abandoned(study: optuna.Study, storage: optuna.storages.BaseStorage) -> int:
    """Fail the RUNNING trials whose driver is gone (``driver_gone``: at once), silent (Optuna's heartbeat
    grace), or never recorded (a driver killed between the ask and its first write: after the same grace,
    counted from the trial's start), and queue their retries. A trial that had ended (its ``ending``
    attribute) is told that ending.

    Returns:
        How many retries were queued.
    """
    before = len(queued(study))
    now = datetime.datetime.now()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if driver_gone(trial.user_attrs.get(record.DRIVER)):
            _end_left_running(
                study, storage, trial, "its driver's process has exited (killed or crashed); its configuration is retried"
            )
        elif record.DRIVER not in trial.user_attrs and _seconds_since(trial.datetime_start, now) > GRACE_PERIOD_S:
            # Asked, then its driver died before writing anything (its first write follows the ask): no heartbeat
            # ever makes it stale, so its age does, after the heartbeat's own grace period.
            why = f"its driver stopped right after asking it (no driver recorded in {GRACE_PERIOD_S} s); it is retried"
            _end_left_running(study, storage, trial, why)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    return len(queued(study)) - before


def _seconds_since(start: datetime.datetime | None, now: datetime.datetime) -> float:
    """Seconds from a trial's start (Optuna's local time) to ``now``; 0 for a trial without one."""
    return 0.0 if start is None else (now - start).total_seconds()


def _end_left_running(study: optuna.Study, storage: optuna.storages.BaseStorage, trial: FrozenTrial, error: str) -> None:
    """A trial whose driver is gone: told the ending it stored, else failed and retried."""
    if record.ENDING in trial.user_attrs:  # it ended; its driver stopped before telling Optuna
        Ending.of(trial.user_attrs[record.ENDING]).tell(study, optuna.Trial(study, trial_id(storage, study, trial.number)))
        return
    storage.set_trial_user_attr(trial_id(storage, study, trial.number), record.ERROR, error)
    study.tell(trial.number, state=TrialState.FAIL)
    retry(study, trial)


def recover_interrupted(study: optuna.Study, storage: optuna.storages.BaseStorage, *, exclusive: bool) -> None:
    """Fail the trials a dead driver left RUNNING and queue their retries.

    Args:
        study: The study, opened on ``storage``.
        storage: A storage made with ``heartbeat_options``.
        exclusive: This driver is the store's only one (SQLite's writer lock is held), so
            every RUNNING trial is a dead driver's: one that had ended (its ``ending`` attribute)
            is told that ending, the others are failed and retried. Otherwise (PostgreSQL, several drivers)
            only the trials whose driver is provably gone, or whose heartbeat is older than
            ``GRACE_PERIOD_S``, are (``fail_abandoned``; for the silent ones Optuna fails them and
            calls ``retry``, and a finished trial takes no error message, so
            ``reports.results.frame`` names the cause).
    """
    if not exclusive:
        fail_abandoned(study, storage)
        return
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        _end_left_running(study, storage, trial, "left RUNNING by an interrupted run; its configuration is retried")


def trials_to_run(optuna_study: optuna.Study, storage: optuna.storages.BaseStorage, trials: int, *, exclusive: bool) -> int:
    """Recover what a dead driver left (``recover_interrupted``), in the search's study and its study of seed
    repeats (``storage.repeats_study``), and count what is left to run.

    Args:
        optuna_study: The run's Optuna study.
        storage: Its storage.
        trials: The study's budget (``--trials``), seed repeats aside.
        exclusive: This driver is the store's only one.

    Returns:
        How many trials are left: the store's queue, then searched trials up to ``trials``.
    """
    recover_interrupted(optuna_study, storage, exclusive=exclusive)
    if (repeats := linked_repeats(optuna_study)) is not None:
        recover_interrupted(repeats, storage, exclusive=exclusive)
    return len(queued(optuna_study)) + max(trials - trials_counted(optuna_study), 0)
