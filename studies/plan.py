"""What a run trains: planned trials, and the trials a dead or interrupted driver left behind.

A ``PlannedTrial`` fixes some knob values before the sampler fills in the rest
(baselines, retries, seed repeats). ``recover_interrupted`` fails the trials a dead
driver left RUNNING and plans their retries.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from search_space.space import Value

STALE_AFTER_S = 180  # a RUNNING trial without a heartbeat for this long belongs to a dead driver
INTERRUPTED_ATTRIBUTE = "interrupted"  # a FAIL trial that a Ctrl-C stopped: the next run retries it


@dataclass(frozen=True)
class PlannedTrial:
    """A trial to ask, with knob values fixed before the sampler fills in the rest."""

    fixed: Mapping[str, Value]
    baseline: bool = False
    retry_of: int | None = None
    repeat_of: int | None = None
    attempt: int = 0


def has_values(params: Mapping[str, Value], values: Mapping[str, Value]) -> bool:
    """Whether ``params`` holds every one of ``values``."""
    return all(params.get(name) == value for name, value in values.items())


def driver_identity() -> str:
    """``host:pid`` of this driver process, recorded on every trial it runs."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _driver_is_dead(trial: optuna.trial.FrozenTrial, now: float) -> bool:
    """A RUNNING trial's driver is gone: a dead pid on this host, or no heartbeat for ``STALE_AFTER_S``."""
    host, _, pid = str(trial.user_attrs.get("driver", "")).rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # alive, another user's
    heartbeat = trial.user_attrs.get("heartbeat")
    if heartbeat is None:  # never heartbeat: judge by its start
        heartbeat = trial.datetime_start.timestamp() if trial.datetime_start else 0.0
    return now - float(heartbeat) > STALE_AFTER_S


def trial_id(storage: optuna.storages.BaseStorage, study: optuna.Study, number: int) -> int:
    """The storage's id of ``study``'s trial ``number`` (Optuna's public storage API)."""
    return storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(study.study_name), number)


def recover_interrupted(study: optuna.Study, storage: optuna.storages.BaseStorage, *, exclusive: bool) -> list[PlannedTrial]:
    """Mark trials left RUNNING by a dead driver as failed, and plan their retries.

    Args:
        study: The study.
        exclusive: This driver is the store's only one (SQLite's writer lock is held), so
            every RUNNING trial is a dead driver's. Otherwise (PostgreSQL, several drivers)
            only trials whose driver is dead or silent (``_driver_is_dead``) are.

    Trials that a run stopped on Ctrl-C (``Ledger.interrupt``) are retried too, once.

    Returns:
        One retry per interrupted trial, with all its knob values fixed.
    """
    retries, now = [], time.time()
    trials = study.get_trials(deepcopy=False)
    retried = {t.user_attrs.get("retry_of") for t in trials}
    for trial in trials:
        if trial.state == TrialState.RUNNING:
            if not exclusive and not _driver_is_dead(trial, now):
                continue
            error = "left RUNNING by an interrupted run; its configuration is retried"
            storage.set_trial_user_attr(trial_id(storage, study, trial.number), "error", error)
            study.tell(trial.number, state=TrialState.FAIL)
        elif not (trial.state == TrialState.FAIL and trial.user_attrs.get(INTERRUPTED_ATTRIBUTE) and trial.number not in retried):
            continue
        retries.append(
            PlannedTrial(fixed=dict(trial.params), baseline=bool(trial.user_attrs.get("baseline")), retry_of=trial.number)
        )
    return retries
