"""The Optuna study as the record of a run: asks trials, writes every report and outcome.

A ``Ledger`` owns the Optuna study in the driver process: it asks the store's queued
trials (``studies.engine.queue``), then searched ones within the budget, and records what the
trials report (``studies.engine.tune_bridge`` connects it to Ray Tune).

**The same decisions whatever order trials finish in.** Two things decide what a run does:
the sampler (which configuration trial ``n`` trains) and early stopping (whether it goes
on). Both read a view of the store that depends on trial numbers alone: when trial ``n``
is asked, Optuna has been told the endings of exactly the trials numbered below
``n - lag`` (``Preset.decision_lag``), and early stopping judges ``n`` against those
same trials of its family. An ending is stored at once as the trial's ``ending``
attribute (so a crash loses nothing) and told to Optuna when it falls into a view; a
trial waits to be asked until every trial below ``n - lag`` has ended. Seed repeats
decide nothing and never wait.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import optuna
from optuna.trial import TrialState

from reports.results.names import INFEASIBLE
from search_space.space import SearchSpace, SearchSpaceError, Value
from storage import record
from studies.catalogue.schema import Preset, Study
from studies.engine.endings import Ending, FinishedTrial
from studies.engine.next_trial import FORBIDDEN, next_planned, next_table_entry
from studies.engine.queue import driver_identity, enqueue, queued, trial_id, trials_counted
from studies.engine.recovery import Recovery
from studies.engine.reporting import Reporting
from studies.engine.sampler import tell_infeasible
from studies.engine.seeds import SEEDS_PER_RUN, seed_offset
from studies.engine.stopping import StoppingJudge
from studies.engine.trial_config import forward_flops, unsearched_where_active, worker_config
from trainers.compilation import compile_cache_dir
from trainers.train import TrainConfig

MAX_RESAMPLES = 50


class Ledger(Reporting, Recovery):
    """Asks configurations of an Optuna study and records what the trials report.

    Cut by job: asking (here), recording reports and endings (``reporting.Reporting``), a stopped
    run's and other drivers' trials (``recovery.Recovery``), early stopping (``stopping.StoppingJudge``).

    Args:
        study: The Optuna study whose trials it asks (created or resumed by the caller): the search's, or its
            study of seed repeats (``storage.repeats_study``).
        search: The search's study, whose trials the seed repeats repeat (None: ``study``).
        definition: The study definition.
        preset: Its budget.
        space: The preset's search space.
        fix: The user's ``--fix`` values of knobs the study does not search.
        seed: The run's seed; trial ``n`` trains with seed ``seed * 100_000 + n``, a
            configuration's ``k``-th seed repeat with ``seed * 100_000 + FRESH_SEEDS_FROM + k``.
        run_attributes: User attributes every trial gets (preset, code version, task).
        cache_dir: The data cache the workers read.
        budget: The study's ``--trials``: searched trials are asked until the store holds
            that many finished, running or queued trials (seed repeats and infeasible ones
            aside), other drivers' too; 0 runs the queue alone.
        ask_lock: Held while counting and asking, shared with other drivers of the study
            (``storage.StudyLock``), so that together they respect the budget.
        memory_bytes: Each trial's memory budget (``trainers.memory.memory_budget``), or None.
        exclusive: This driver is the store's only one (SQLite); else other drivers' abandoned trials are
            looked for at each heartbeat (``heartbeat``).
        then: Trials the run expects after this phase (its seed repeats, at most), for the overall ETA.
        repeat_seeds: The seeds of each seed repeat after this phase (0: none), from which the ETA counts the
            repeats the verdict's configurations would take if this phase ended now.
    """

    def __init__(
        self,
        study: optuna.Study,
        *,
        search: optuna.Study | None = None,
        storage: optuna.storages.BaseStorage,
        definition: Study,
        preset: Preset,
        space: SearchSpace,
        fix: Mapping[str, Value],
        seed: int,
        run_attributes: Mapping[str, Any],
        cache_dir: str,
        budget: int,
        ask_lock: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
        memory_bytes: int | None = None,
        exclusive: bool = True,
        then: int = 0,
        repeat_seeds: int = 0,
    ) -> None:
        self.study, self.storage, self.definition, self.preset, self.space = study, storage, definition, preset, space
        self.search = search or study
        self.memory_bytes, self.exclusive = memory_bytes, exclusive
        self.fix, self.seed = dict(fix), seed
        self.run_attributes, self.cache_dir, self.budget, self.ask_lock = dict(run_attributes), cache_dir, budget, ask_lock
        self.compile_cache_dir = str(compile_cache_dir())  # resolved here, in the driver: one cache for every trial and run
        # This run asks at most what was left at its start, and the retries it queues: a
        # failed trial is replaced by the next run, not at once (a configuration error would loop).
        self.total, self.asked = self.remaining(), 0
        self.open: dict[int, optuna.Trial] = {}  # trial number -> trial whose ending Optuna has not been told
        self.ended: dict[int, Ending] = {}  # open trials that ended, waiting to fall into a view
        self.view_ends: dict[int, int] = {}  # trial number -> its view: the trials numbered below this
        self.stopping = StoppingJudge(preset, maximize=definition.objectives[0].direction == "maximize")
        self.lag = preset.decision_lag
        self.waited_seconds, self._waiting_since = 0.0, None  # asks held back for earlier trials to end
        self.trial_ids: dict[int, int] = {}  # trial number -> the storage's id of it
        self.given_up: set[int] = set()  # trials another driver ended while this one ran them (``_give_up``)
        self.finished: dict[str, int] = {"COMPLETE": 0, "PRUNED": 0, "FAIL": 0, INFEASIBLE: 0}
        self.endings: list[FinishedTrial] = []  # each trial this run saw end, in order
        self.then, self.repeat_seeds = then, repeat_seeds
        self.objective = definition.objectives[0]  # the value that judges a trial, reported at each evaluation
        self.best_value: float | None = None  # of the objective, over this run's complete trials
        self.grid = definition.table_grid(space, preset) if preset.exhaustive_seeds else []

    def remaining(self) -> int:
        """Trials left to ask: the store's queue, then searched trials up to the budget."""
        return len(queued(self.study)) + max(self.budget - trials_counted(self.study), 0)

    def ask(self, ray_trial_id: str) -> dict[str, Any] | None:
        """The next trial's configuration for the trainable, or None when nothing is left to ask.

        Raises:
            SearchSpaceError: the sampler kept proposing forbidden combinations.
        """
        if self.asked >= self.total:
            return None
        with self.ask_lock():  # count and ask as one step among all drivers of the study
            waiting = queued(self.study)
            if not waiting and (
                trials_counted(self.study) >= self.budget
                or (self.grid and next_table_entry(self.study, self.grid, self.space.searched) is None)
            ):
                self.total = self.asked  # other drivers took the rest: this run's held endings are due now
                self._tell_all_if_finished()
                return None
            number = waiting[0].number if waiting else len(self.study.get_trials(deepcopy=False))
            decides = not self.grid and not (waiting and record.REPEAT_OF in waiting[0].user_attrs)  # the sampler's trials
            if decides and not self._settled_before(number - self.lag):
                self._waiting_since = self._waiting_since or time.monotonic()
                return None  # Ray Tune asks again; a trial of the view is still running
            if self._waiting_since is not None:
                self.waited_seconds += time.monotonic() - self._waiting_since
                self._waiting_since = None
            self.asked += 1
            for _ in range(MAX_RESAMPLES):
                trial, sampled = self._sample()
                try:
                    point_values = trial.user_attrs.get(record.POINT_VALUES)
                    # what this trial sets; the space fills in the rest
                    chosen = sampled | unsearched_where_active(self.space, self.preset, self.fix, trial.params)
                    knobs = self.space.resolve(chosen, beyond_domains=point_values)
                except SearchSpaceError as error:  # a forbidden combination: not a training trial; the sampler learns
                    del self.open[trial.number]
                    trial.set_user_attr(record.ERROR, f"rejected before training: {error}")
                    tell_infeasible(self.study, trial, FORBIDDEN)
                    continue
                return self._start(trial, knobs, self.preset.training(chosen | (point_values or {})), ray_trial_id)
        raise SearchSpaceError(f"{MAX_RESAMPLES} sampled configurations in a row broke the study's rules; check its domains")

    def _sample(self) -> tuple[optuna.Trial, dict[str, Value]]:
        """Ask the next trial and sample it define-by-run.

        The store's queue comes first: ``ask`` takes its oldest trial, with the values it
        fixes. Otherwise a searched trial of the next family (``next_trial.next_family``) is queued
        with the family's values (the family's named point, the first time) and taken at
        once: the ask lock is held, so no other driver takes it in between. The sampler
        proposes the rest (none of a named point's own knobs).
        """
        if not queued(self.study):
            enqueue(self.study, next_planned(self.study, self.definition, self.grid, self.space.searched))
        with warnings.catch_warnings():  # heartbeats are recorded by this ledger, not Study.optimize's thread
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
            trial = self.study.ask()
        self.open[trial.number] = trial  # at once: a Ctrl-C from here on fails it (``interrupt``), never leaves it RUNNING
        # What recovery judges a trial by, from its first write after the ask: its driver, and that driver's
        # heartbeat (a driver killed from here on leaves a trial other drivers fail: ``queue.fail_abandoned``).
        trial.set_user_attr(record.DRIVER, driver_identity())
        self.trial_ids[trial.number] = trial_id(self.storage, self.study, trial.number)  # looked up once, not per report
        self.storage.record_heartbeat(self.trial_ids[trial.number])
        self.view_ends[trial.number] = trial.number - self.lag
        return trial, self.space.suggest(trial, given=trial.user_attrs.get(record.POINT_VALUES))

    def _settled_before(self, limit: int) -> bool:
        """Tell Optuna the endings of this driver's trials numbered below ``limit``, in order; True when
        no trial below ``limit`` is still running (any driver's), so that a view ending there is complete."""
        for number in sorted(n for n in self.ended if n < limit):
            self._tell(number)
        running = self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        return not any(trial.number < limit for trial in running)

    def _tell(self, number: int) -> None:
        """Tell Optuna a buffered ending, then close the trial (a Ctrl-C in between leaves it to ``interrupt``);
        one that another driver ended meanwhile is given up (``_give_up``)."""
        try:
            self.ended[number].tell(self.study, self.open[number])
        except optuna.exceptions.UpdateFinishedTrialError:
            self._give_up(number)
            return
        del self.ended[number], self.open[number]

    def stops(self, number: int, step: int, value: float) -> bool:
        """Whether searched trial ``number`` stops at ``step`` with ``value`` of the first objective: judged by
        ``stopping.StoppingJudge`` among its family's trials of its view (``view_ends``) at each rung it reaches.
        Seed repeats and named points never stop; a trial another driver ended always does."""
        if number in self.given_up:  # another driver ended it: its training is of no use
            return True
        trial = self.open.get(number)
        if trial is None or self.grid or record.REPEAT_OF in trial.user_attrs or record.POINT in trial.user_attrs:
            return False
        return self.stopping.stops(self.study, number, trial.user_attrs.get(record.FAMILY), self.view_ends[number], step, value)

    def _start(self, trial: optuna.Trial, knobs: dict[str, Value], training: TrainConfig, ray_trial_id: str) -> dict[str, Any]:
        """Record the trial's configuration and return what its worker needs.

        Args:
            trial: The asked trial.
            knobs: Its resolved knob values (the model's come from here).
            training: Its training settings (``Preset.training``: the preset's, with the training knobs it sets).
            ray_trial_id: Ray Tune's id of the trial.
        """
        handed = worker_config(
            self.preset,
            knobs,
            self.seed * SEEDS_PER_RUN + seed_offset(trial),
            cache_dir=self.cache_dir,
            compile_cache_dir=self.compile_cache_dir,
            memory_bytes=self.memory_bytes,
            training=training,
        )
        if (flops := forward_flops(self.preset, knobs)) is not None:  # ``stops``, by dominance
            self.stopping.flops[trial.number] = flops
        attributes = self.run_attributes | {
            record.SEED: handed["train"]["seed"],
            record.RAY_TRIAL_ID: ray_trial_id,
            record.MODEL_CONFIG: handed["model"],
            record.TRAIN_CONFIG: handed["train"],
        }
        for name, value in attributes.items():
            trial.set_user_attr(name, value)
        # "repeat": it trains to its last step (``Ledger.stops``)
        return {"number": trial.number, "repeat": record.REPEAT_OF in trial.user_attrs} | handed

    def done(self) -> bool:
        """This run asked all it may and every trial it started has ended and been told (a failure may still queue a retry)."""
        return not self.open and self.asked >= self.total

    def finished_count(self) -> int:
        return sum(self.finished.values())
