"""What trials report, recorded: the part of ``Ledger`` that stores each report's value, each trial's ending
at once (its ``ending`` attribute, so that a crash loses nothing), and tells Optuna an ending when it
falls into a view (``studies.engine.ledger``'s docstring says why it waits).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import optuna
from optuna.trial import TrialState

from storage import record
from studies.catalogue.schema import Study
from studies.catalogue.tasks import Objective
from studies.engine.endings import Ending, FinishedTrial, outcome_of


class Reporting:
    """The recording half of ``Ledger`` (which sets every attribute below and defines the methods it names)."""

    study: optuna.Study
    storage: optuna.storages.BaseStorage
    definition: Study
    objective: Objective  # the study's first objective: the value reported at each evaluation
    open: dict[int, optuna.Trial]  # trial number -> trial whose ending Optuna has not been told
    ended: dict[int, Ending]  # open trials that ended, waiting to fall into a view
    trial_ids: dict[int, int]  # trial number -> the storage's id of it
    finished: dict[str, int]  # endings by outcome, for the progress line
    endings: list[FinishedTrial]  # each trial this run saw end, in order
    best_value: float | None  # of the objective, over this run's complete trials
    grid: list  # an exhaustive preset's table, or empty
    asked: int
    total: int
    _tell: Callable[[int], None]  # ``Ledger._tell``
    _give_up: Callable[[int], None]  # ``Recovery._give_up``
    _retry: Callable[[optuna.Trial], bool]  # ``Recovery._retry``
    _stored_state: Callable[[int], TrialState]  # ``Recovery._stored_state``

    def record_report(self, number: int, result: Mapping[str, Any]) -> None:
        """Store one report's value of the study's first objective (validation accuracy, bits per
        byte ...) as the intermediate value at its step."""
        trial = self.open.get(number)
        if trial is None or self.objective.metric not in result:
            return
        # Optuna's Trial.report refuses multi-objective studies; its storage keeps the curve for any study.
        step, value = int(result["step"]), float(result[self.objective.metric])
        try:
            self.storage.set_trial_intermediate_value(self.trial_ids[number], step, value)
        except optuna.exceptions.UpdateFinishedTrialError:
            self._give_up(number)
            self._tell_all_if_finished()

    def finish(
        self, number: int, last: Mapping[str, Any] | None, error: str | None, exception: BaseException | None = None
    ) -> None:
        """Record a trial's ending (``endings.outcome_of``: COMPLETE after its last step, PRUNED when stopped early,
        FAIL on error; a configuration that cannot train told infeasible, a dead worker's trial queued again).

        Args:
            number: The trial's number.
            last: Its last report (None: it reported nothing).
            error: What its exception says (traceback included), or None when it ended without one.
            exception: The exception, as Ray Tune kept it.
        """
        trial = self.open.get(number)  # left open until Optuna has its ending: a Ctrl-C before it is stored fails it
        if trial is None or number in self.ended:
            return
        if self._stored_state(number).is_finished():  # another driver ended it meanwhile
            self._give_up(number)
            self._tell_all_if_finished()
            return
        last = last or {}
        outcome = outcome_of(last, error, exception, self.definition.objectives)
        for name, value in outcome.attributes.items():
            trial.set_user_attr(name, value)
        ending = outcome.ending
        if outcome.retry and self._retry(trial):
            ending = Ending(TrialState.FAIL)  # queued again, so not told infeasible
        if ending.state == TrialState.COMPLETE:
            self.best_value = self.objective.best(v for v in (self.best_value, ending.values[0]) if v is not None)
        self._ended(number, ending, last)

    def _ended(self, number: int, ending: Ending, last: Mapping[str, Any]) -> None:
        """Store a trial's ending, count it for the progress line, and tell Optuna what is due.

        A repeat decides nothing, so its ending is told at once; a searched trial's waits for
        the views that include it, or for the run's end (nothing more to ask, nothing running).
        """
        self.open[number].set_user_attr(record.ENDING, ending.attribute())
        self.ended[number] = ending
        self.finished[ending.outcome] += 1
        trial = self.open[number]
        attributes = trial.user_attrs  # one read of the store
        self.endings.append(FinishedTrial.of(number, attributes, trial.params, ending, last, self.objective.metric))
        if self.grid or record.REPEAT_OF in attributes:  # decides nothing: told at once
            self._tell(number)
        self._tell_all_if_finished()

    def _tell_all_if_finished(self) -> None:
        """At the run's end (nothing more to ask, nothing running), tell Optuna every ending still held:
        held longer, they would hold every driver's next views back. The end comes when this run's last
        trial ends (``_ended``) or when other drivers take the rest of the budget (``ask``)."""
        if self.asked >= self.total and set(self.open) == set(self.ended):
            for pending in sorted(self.ended):
                self._tell(pending)
