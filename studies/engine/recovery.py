"""Keeping the store right when trials end elsewhere than in a driver's hands: every rule in one place.

A driver's running trials beat through Optuna's heartbeat (``RDBStorage.record_heartbeat``, made by
``heartbeat_options``). At a run's start, ``recover_interrupted`` fails the trials a dead driver left
RUNNING (all of them when this driver is the store's only one; else those whose driver's process on this
host has exited, and those whose heartbeat is older than ``GRACE_PERIOD_S``, by
``optuna.storages.fail_stale_trials``) and queues their retries; a running driver keeps doing so
(``fail_abandoned``, at each heartbeat). A Ctrl-C (or SIGTERM, SIGHUP) fails the run's own running trials
and queues them again (``interrupt``).
"""

from __future__ import annotations

import datetime
import os
import socket
import warnings
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from storage import record
from storage.repeats_study import linked_repeats
from studies.engine.endings import Ending
from studies.engine.held_trials import HeldTrials
from studies.engine.queue import PlannedTrial, queued, retry, trial_id, trials_counted

HEARTBEAT_INTERVAL_S = 30  # a driver refreshes its running trials' heartbeat this often
GRACE_PERIOD_S = 180  # a RUNNING trial without a heartbeat for this long belongs to a dead driver


def heartbeat_options() -> dict[str, Any]:
    """``RDBStorage`` keyword arguments for a driver's storage: Optuna's heartbeat, and ``retry`` for stale trials.

    (Optuna's ``RetryHeartbeatStaleTrialCallback`` would copy the dead run's user
    attributes and keep the lineage in system attributes; ``retry`` records the store's
    own ``retry_of`` and ``attempt``, with the same limit as any other retry.)
    """
    return {"heartbeat_interval": HEARTBEAT_INTERVAL_S, "grace_period": GRACE_PERIOD_S, "heartbeat_stale_trial_callback": retry}


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
            ``studies.results.frame`` names the cause).
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


def interrupt(held: HeldTrials, cause: str = "Ctrl-C") -> None:
    """Fail the running trials of a run stopped by Ctrl-C (or SIGTERM, SIGHUP: ``cause`` names it) and
    queue them again for the next run.

    Ctrl-C lands between any two lines, so a trial still open here may have had its ending
    stored just before (it is left as it is), or its retry queued already (not queued twice).
    """
    study = held.study
    for number in sorted(held.ended):  # trials that did end are results: Optuna is told, once
        if held.stored_state(number).is_finished():
            del held.ended[number], held.open[number]
        else:
            held.tell(number)
    retried = {PlannedTrial.of(waiting).retry_of for waiting in queued(study)}
    for number in list(held.open):
        trial = held.open.pop(number)
        if held.stored_state(number).is_finished():
            continue
        trial.set_user_attr(record.ERROR, f"interrupted ({cause}) before it finished; the next run retries its configuration")
        trial.set_user_attr(record.INTERRUPTED, True)
        study.tell(trial, state=TrialState.FAIL)
        if number not in retried:
            retry(study, trial)
