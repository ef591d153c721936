"""What a driver does when a run stops, or another driver does: the part of ``Ledger`` that keeps the store
right when trials end elsewhere than in this run's hands.

A Ctrl-C (or SIGTERM, SIGHUP) fails this run's running trials and queues them again (``interrupt``); a
heartbeat keeps Optuna's staleness check from failing them while the run lives, and fails other drivers'
abandoned trials (``heartbeat``); a trial another driver ended meanwhile is let go (``_give_up``); nothing
that holds the store's URL is pickled into Ray Tune's files (``__getstate__``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import optuna
from optuna.trial import TrialState

from storage import record
from studies.engine.endings import Ending
from studies.engine.queue import PlannedTrial, fail_abandoned, queued, retry, trial_id


class Recovery:
    """The recovery half of ``Ledger`` (which sets every attribute below and defines ``_tell``)."""

    study: optuna.Study
    storage: optuna.storages.BaseStorage
    open: dict[int, optuna.Trial]  # trial number -> trial whose ending Optuna has not been told
    ended: dict[int, Ending]  # open trials that ended, waiting to fall into a view
    given_up: set[int]  # trials another driver ended while this one ran them
    trial_ids: dict[int, int]  # trial number -> the storage's id of it
    exclusive: bool  # the store's only driver (SQLite)
    total: int  # trials this run may ask
    ask_lock: Callable[[], contextlib.AbstractContextManager]
    _tell: Callable[[int], None]  # ``Ledger._tell``

    def _give_up(self, number: int) -> None:
        """Let go of a trial that another driver ended: it failed it as stale while this driver was paused (a
        stopped process, a lost network) and queued its retry. Its training is stopped (``stops``) and its
        ending is not recorded: the store keeps the other driver's."""
        self.open.pop(number, None)
        self.ended.pop(number, None)
        self.given_up.add(number)

    def interrupt(self, cause: str = "Ctrl-C") -> None:
        """Fail the running trials of a run stopped by Ctrl-C (or SIGTERM, SIGHUP: ``cause`` names it) and
        queue them again for the next run.

        Ctrl-C lands between any two lines, so a trial still open here may have had its ending
        stored just before (it is left as it is), or its retry queued already (not queued twice).
        """
        for number in sorted(self.ended):  # trials that did end are results: Optuna is told, once
            if self._stored_state(number).is_finished():
                del self.ended[number], self.open[number]
            else:
                self._tell(number)
        retried = {PlannedTrial.of(waiting).retry_of for waiting in queued(self.study)}
        for number in list(self.open):
            trial = self.open.pop(number)
            if self._stored_state(number).is_finished():
                continue
            trial.set_user_attr(record.ERROR, f"interrupted ({cause}) before it finished; the next run retries its configuration")
            trial.set_user_attr(record.INTERRUPTED, True)
            self.study.tell(trial, state=TrialState.FAIL)
            if number not in retried:
                retry(self.study, trial)

    def _stored_state(self, number: int) -> TrialState:
        """The state the store holds for trial ``number`` (an ending may have been stored just before a Ctrl-C)."""
        return self.storage.get_trial(trial_id(self.storage, self.study, number)).state

    def __getstate__(self) -> dict[str, Any]:
        """What Ray Tune pickles into its experiment files: nothing that holds the store's URL.

        (The studies, the storage and the ask lock carry it, password included; Tune never restores a
        ledger, whose record is the store itself.)
        """
        held = ("study", "search", "storage", "ask_lock", "open")
        return {name: value for name, value in self.__dict__.items() if name not in held}

    def heartbeat(self) -> None:
        """Record Optuna's heartbeat of this driver's running trials (other drivers fail them when it stops), and
        fail other drivers' abandoned trials (``queue.fail_abandoned``): their retries are this run's to take."""
        for number in list(self.open):
            try:
                self.storage.record_heartbeat(self.trial_ids[number])
            except optuna.exceptions.UpdateFinishedTrialError:
                self._give_up(number)
        if not self.exclusive:
            with self.ask_lock():
                self.total += fail_abandoned(self.study, self.storage)

    def _retry(self, trial: optuna.Trial) -> bool:
        """Queue a failed trial's configuration again (``studies.engine.queue.retry``); True if queued."""
        queued_again = retry(self.study, trial)
        self.total += queued_again
        return queued_again
