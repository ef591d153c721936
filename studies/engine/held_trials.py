"""The trials a driver holds: asked, and not yet told to Optuna.

A trial's ending is stored at once (its ``ending`` attribute) but told to Optuna only when it falls into a
view (``studies.engine.ledger`` says why), so between the ask and the telling the driver holds the trial
here: its ``optuna.Trial``, its ending once it has one, its view and the storage's id of it.
"""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from studies.engine.endings import Ending
from studies.engine.queue import trial_id


class HeldTrials:
    """A driver's open trials, and what it knows of each.

    Attributes:
        study: The Optuna study the trials belong to.
        storage: Its storage.
        open: Trial number -> a trial whose ending Optuna has not been told.
        ended: Open trials that ended, waiting to fall into a view.
        view_ends: Trial number -> its view: the trials numbered below this.
        trial_ids: Trial number -> the storage's id of it (looked up once, not per report).
        given_up: Trials another driver ended while this one ran them (``give_up``).
    """

    def __init__(self, study: optuna.Study, storage: optuna.storages.BaseStorage) -> None:
        self.study, self.storage = study, storage
        self.open: dict[int, optuna.Trial] = {}
        self.ended: dict[int, Ending] = {}
        self.view_ends: dict[int, int] = {}
        self.trial_ids: dict[int, int] = {}
        self.given_up: set[int] = set()

    def hold(self, trial: optuna.Trial, view_end: int) -> None:
        """Hold a trial just asked, whose view holds the trials numbered below ``view_end``."""
        self.open[trial.number] = trial
        self.trial_ids[trial.number] = trial_id(self.storage, self.study, trial.number)
        self.view_ends[trial.number] = view_end

    def running(self) -> int:
        """Held trials still training (the others ended and wait to be told)."""
        return len(self.open) - len(self.ended)

    def all_ended(self) -> bool:
        """Every held trial has ended."""
        return set(self.open) == set(self.ended)

    def tell(self, number: int) -> None:
        """Tell Optuna a held ending, then let the trial go (a Ctrl-C in between leaves it to
        ``recovery.interrupt``); one that another driver ended meanwhile is given up."""
        try:
            self.ended[number].tell(self.study, self.open[number])
        except optuna.exceptions.UpdateFinishedTrialError:
            self.give_up(number)
            return
        del self.ended[number], self.open[number]

    def tell_ended_before(self, limit: int) -> None:
        """Tell Optuna the held endings of trials numbered below ``limit``, in order."""
        for number in sorted(n for n in self.ended if n < limit):
            self.tell(number)

    def give_up(self, number: int) -> None:
        """Let go of a trial that another driver ended: it failed it as stale while this driver was paused (a
        stopped process, a lost network) and queued its retry. Its training is stopped (``Ledger.stops``) and
        its ending is not recorded: the store keeps the other driver's."""
        self.open.pop(number, None)
        self.ended.pop(number, None)
        self.given_up.add(number)

    def stored_state(self, number: int) -> TrialState:
        """The state the store holds for trial ``number`` (an ending may have been stored just before a Ctrl-C)."""
        return self.storage.get_trial(trial_id(self.storage, self.study, number)).state

    def record_heartbeats(self) -> None:
        """Record Optuna's heartbeat of every held trial; one another driver ended is given up."""
        for number in list(self.open):
            try:
                self.storage.record_heartbeat(self.trial_ids[number])
            except optuna.exceptions.UpdateFinishedTrialError:
                self.give_up(number)
