"""The Optuna study as the record of a run: asks trials, writes every report and ending.

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
from dataclasses import asdict, dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState

from search_space.space import SearchSpace, SearchSpaceError, Value
from storage import record
from studies.catalogue.schema import Preset, Study
from studies.engine import recovery
from studies.engine.endings import Ending, FinishedTrial, trial_end
from studies.engine.held_trials import HeldTrials
from studies.engine.next_trial import FORBIDDEN, next_planned, next_table_entry
from studies.engine.queue import enqueue, queued, retry, trials_counted
from studies.engine.sampler import tell_infeasible
from studies.engine.seeds import SEEDS_PER_RUN, seed_offset
from studies.engine.stopping import StoppingJudge
from studies.engine.study_space import table_grid
from studies.engine.trial_config import TrialSpec, forward_flops, trial_spec, unsearched_where_active
from studies.results.names import INFEASIBLE
from trainers.compilation import compile_cache_dir
from trainers.train import TrainConfig

MAX_RESAMPLES = 50


@dataclass(frozen=True)
class LedgerStore:
    """Where a ledger asks and records.

    Attributes:
        study: The Optuna study whose trials it asks (created or resumed by the caller): the search's, or its
            study of seed repeats (``storage.repeats_study``).
        storage: Its storage (``recovery.heartbeat_options``).
        search: The search's study, whose trials the seed repeats repeat (None: ``study``).
        ask_lock: Held while counting and asking, shared with other drivers of the study
            (``storage.StudyLock``), so that together they respect the budget.
        exclusive: This driver is the store's only one (SQLite); else other drivers' abandoned trials are
            looked for at each heartbeat (``Ledger.heartbeat``).
    """

    study: optuna.Study
    storage: optuna.storages.BaseStorage
    search: optuna.Study | None = None
    ask_lock: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    exclusive: bool = True


@dataclass(frozen=True)
class Asking:
    """What a ledger asks.

    Attributes:
        definition: The study definition.
        preset: Its budget.
        space: The preset's search space.
        budget: The study's ``--trials``: searched trials are asked until the store holds that many finished,
            running or queued trials (seed repeats and infeasible ones aside), other drivers' too; 0 runs the
            queue alone.
        fix: The user's ``--fix`` values of knobs the study does not search.
        seed: The run's seed; trial ``n`` trains with seed ``seed * 100_000 + n``, a configuration's ``k``-th
            seed repeat with ``seed * 100_000 + FRESH_SEEDS_FROM + k``.
    """

    definition: Study
    preset: Preset
    space: SearchSpace
    budget: int
    fix: Mapping[str, Value] = field(default_factory=dict)
    seed: int = 0


@dataclass(frozen=True)
class TrialSetup:
    """What every trial of a run gets besides its configuration.

    Attributes:
        cache_dir: The data cache the workers read.
        run_attributes: User attributes every trial gets (preset, code version, task).
        memory_bytes: Each trial's memory budget (``trainers.memory.memory_budget``), or None.
    """

    cache_dir: str
    run_attributes: Mapping[str, Any] = field(default_factory=dict)
    memory_bytes: int | None = None


@dataclass(frozen=True)
class Outlook:
    """What a run expects after this phase, for the overall ETA (``studies.engine.progress``).

    Attributes:
        then: Trials the run expects after this phase (its seed repeats, at most).
        repeat_seeds: The seeds of each seed repeat after this phase (0: none), from which the ETA counts the
            repeats the verdict's configurations would take if this phase ended now.
    """

    then: int = 0
    repeat_seeds: int = 0


class Ledger:
    """Asks configurations of an Optuna study and records what the trials report.

    Its collaborators: the trials it holds (``held_trials.HeldTrials``), early stopping
    (``stopping.StoppingJudge``), and the rules that keep the store right when trials end elsewhere
    (``recovery``). Progress lines read it through ``progress.LedgerView``.

    Args:
        store: Where it asks and records.
        asking: What it asks.
        setup: What every trial gets besides its configuration.
        outlook: What the run expects after this phase.
    """

    def __init__(self, store: LedgerStore, asking: Asking, setup: TrialSetup, outlook: Outlook = Outlook()) -> None:
        self.store, self.asking, self.setup = store, asking, setup
        self.then, self.repeat_seeds = outlook.then, outlook.repeat_seeds
        self.objective = asking.definition.objectives[0]  # the value that judges a trial, reported at each evaluation
        self.compile_cache_dir = str(compile_cache_dir())  # resolved here, in the driver: one cache for every trial and run
        self.held = HeldTrials(store.study, store.storage)
        self.stopping = StoppingJudge(asking.preset, maximize=self.objective.direction == "maximize")
        self.grid = (
            table_grid(asking.definition, asking.space, asking.preset, asking.fix) if asking.preset.exhaustive_seeds else []
        )
        # This run asks at most what was left at its start, and the retries it queues: a
        # failed trial is replaced by the next run, not at once (a configuration error would loop).
        self.total, self.asked = self.remaining(), 0
        self.waited_seconds, self._waiting_since = 0.0, None  # asks held back for earlier trials to end
        self.finished: dict[str, int] = {"COMPLETE": 0, "PRUNED": 0, "FAIL": 0, INFEASIBLE: 0}
        self.endings: list[FinishedTrial] = []  # each trial this run saw end, in order
        self.best_value: float | None = None  # of the objective, over this run's complete trials

    # The names every reader uses, read from the parts (one copy of each: the parts).
    study = property(lambda self: self.store.study, doc="The Optuna study it asks.")
    storage = property(lambda self: self.store.storage, doc="Its storage.")
    search = property(lambda self: self.store.search or self.store.study, doc="The search's study.")
    definition = property(lambda self: self.asking.definition, doc="The study definition.")
    preset = property(lambda self: self.asking.preset, doc="Its budget.")
    space = property(lambda self: self.asking.space, doc="The preset's search space.")

    def remaining(self) -> int:
        """Trials left to ask: the store's queue, then searched trials up to the budget."""
        return len(queued(self.study)) + max(self.asking.budget - trials_counted(self.study), 0)

    def ask(self, ray_trial_id: str) -> TrialSpec | None:
        """The next trial, as its worker trains it, or None when nothing is left to ask.

        Raises:
            SearchSpaceError: the sampler kept proposing forbidden combinations.
        """
        if self.asked >= self.total:
            return None
        with self.store.ask_lock():  # count and ask as one step among all drivers of the study
            waiting = queued(self.study)
            if not waiting and (
                trials_counted(self.study) >= self.asking.budget
                or (self.grid and next_table_entry(self.study, self.grid, self.space.searched) is None)
            ):
                self.total = self.asked  # other drivers took the rest: this run's held endings are due now
                self._tell_all_if_finished()
                return None
            number = waiting[0].number if waiting else len(self.study.get_trials(deepcopy=False))
            decides = not self.grid and not (waiting and record.REPEAT_OF in waiting[0].user_attrs)  # the sampler's trials
            if decides and not self._settled_before(number - self.preset.decision_lag):
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
                    chosen = sampled | unsearched_where_active(self.space, self.preset, dict(self.asking.fix), trial.params)
                    knobs = self.space.resolve(chosen, beyond_domains=point_values)
                except SearchSpaceError as error:  # a forbidden combination: not a training trial; the sampler learns
                    del self.held.open[trial.number]
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
        # at once: a Ctrl-C from here on fails it (``interrupt``), never leaves it RUNNING
        self.held.hold(trial, view_end=trial.number - self.preset.decision_lag)
        # What recovery judges a trial by, from its first write after the ask: its driver, and that driver's
        # heartbeat (a driver killed from here on leaves a trial other drivers fail: ``recovery.fail_abandoned``).
        trial.set_user_attr(record.DRIVER, recovery.driver_identity())
        self.storage.record_heartbeat(self.held.trial_ids[trial.number])
        return trial, self.space.suggest(trial, given=trial.user_attrs.get(record.POINT_VALUES))

    def _settled_before(self, limit: int) -> bool:
        """Tell Optuna the endings of this driver's trials numbered below ``limit``, in order; True when
        no trial below ``limit`` is still running (any driver's), so that a view ending there is complete."""
        self.held.tell_ended_before(limit)
        running = self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        return not any(trial.number < limit for trial in running)

    def stops(self, number: int, step: int, value: float) -> bool:
        """Whether searched trial ``number`` stops at ``step`` with ``value`` of the first objective: judged by
        ``stopping.StoppingJudge`` among its family's trials of its view (``view_ends``) at each rung it reaches.
        Seed repeats and named points never stop; a trial another driver ended always does."""
        if number in self.held.given_up:  # another driver ended it: its training is of no use
            return True
        trial = self.held.open.get(number)
        if trial is None or self.grid or record.REPEAT_OF in trial.user_attrs or record.POINT in trial.user_attrs:
            return False
        family = trial.user_attrs.get(record.FAMILY)
        return self.stopping.stops(self.study, number, family, self.held.view_ends[number], step, value)

    def _start(self, trial: optuna.Trial, knobs: dict[str, Value], training: TrainConfig, ray_trial_id: str) -> TrialSpec:
        """Record the trial's configuration and return what its worker trains.

        Args:
            trial: The asked trial.
            knobs: Its resolved knob values (the model's come from here).
            training: Its training settings (``Preset.training``: the preset's, with the training knobs it sets).
            ray_trial_id: Ray Tune's id of the trial.
        """
        spec = trial_spec(
            self.preset,
            knobs,
            self.asking.seed * SEEDS_PER_RUN + seed_offset(trial),
            number=trial.number,
            cache_dir=self.setup.cache_dir,
            compile_cache_dir=self.compile_cache_dir,
            memory_bytes=self.setup.memory_bytes,
            training=training,
        )
        if (flops := forward_flops(self.preset, knobs)) is not None:  # ``stops``, by dominance
            self.stopping.flops[trial.number] = flops
        attributes = dict(self.setup.run_attributes) | {
            record.SEED: spec.train.seed,
            record.RAY_TRIAL_ID: ray_trial_id,
            record.MODEL_CONFIG: dict(spec.model),
            record.TRAIN_CONFIG: asdict(spec.train),
        }
        for name, value in attributes.items():
            trial.set_user_attr(name, value)
        return spec

    def record_report(self, number: int, result: Mapping[str, Any]) -> None:
        """Store one report's value of the study's first objective (validation accuracy, bits per
        byte ...) as the intermediate value at its step."""
        trial = self.held.open.get(number)
        if trial is None or self.objective.metric not in result:
            return
        # Optuna's Trial.report refuses multi-objective studies; its storage keeps the curve for any study.
        step, value = int(result["step"]), float(result[self.objective.metric])
        try:
            self.storage.set_trial_intermediate_value(self.held.trial_ids[number], step, value)
        except optuna.exceptions.UpdateFinishedTrialError:
            self.held.give_up(number)
            self._tell_all_if_finished()

    def finish(
        self, number: int, last: Mapping[str, Any] | None, error: str | None, exception: BaseException | None = None
    ) -> None:
        """Record a trial's ending (``endings.trial_end``: COMPLETE after its last step, PRUNED when stopped early,
        FAIL on error; a configuration that cannot train told infeasible, a dead worker's trial queued again).

        Args:
            number: The trial's number.
            last: Its last report (None: it reported nothing).
            error: What its exception says (traceback included), or None when it ended without one.
            exception: The exception, as Ray Tune kept it.
        """
        trial = self.held.open.get(number)  # left open until Optuna has its ending: a Ctrl-C before it is stored fails it
        if trial is None or number in self.held.ended:
            return
        if self.held.stored_state(number).is_finished():  # another driver ended it meanwhile
            self.held.give_up(number)
            self._tell_all_if_finished()
            return
        last = last or {}
        end = trial_end(last, error, exception, self.definition.objectives)
        for name, value in end.attributes.items():
            trial.set_user_attr(name, value)
        ending = end.ending
        if end.retry and self._retry(trial):
            ending = Ending(TrialState.FAIL)  # queued again, so not told infeasible
        if ending.state == TrialState.COMPLETE:
            self.best_value = self.objective.best(v for v in (self.best_value, ending.values[0]) if v is not None)
        self._ended(number, ending, last)

    def _ended(self, number: int, ending: Ending, last: Mapping[str, Any]) -> None:
        """Store a trial's ending, count it for the progress line, and tell Optuna what is due.

        A repeat decides nothing, so its ending is told at once; a searched trial's waits for
        the views that include it, or for the run's end (nothing more to ask, nothing running).
        """
        self.held.open[number].set_user_attr(record.ENDING, ending.attribute())
        self.held.ended[number] = ending
        self.finished[ending.outcome] += 1
        trial = self.held.open[number]
        attributes = trial.user_attrs  # one read of the store
        self.endings.append(FinishedTrial.of(number, attributes, trial.params, ending, last, self.objective.metric))
        if self.grid or record.REPEAT_OF in attributes:  # decides nothing: told at once
            self.held.tell(number)
        self._tell_all_if_finished()

    def _tell_all_if_finished(self) -> None:
        """At the run's end (nothing more to ask, nothing running), tell Optuna every ending still held:
        held longer, they would hold every driver's next views back. The end comes when this run's last
        trial ends (``_ended``) or when other drivers take the rest of the budget (``ask``)."""
        if self.asked >= self.total and self.held.all_ended():
            for pending in sorted(self.held.ended):
                self.held.tell(pending)

    def done(self) -> bool:
        """This run asked all it may and every trial it started has ended and been told (a failure may still queue a retry)."""
        return not self.held.open and self.asked >= self.total

    def finished_count(self) -> int:
        return sum(self.finished.values())

    def running(self) -> int:
        """This run's trials still training."""
        return self.held.running()

    def interrupt(self, cause: str = "Ctrl-C") -> None:
        """Fail this run's running trials and queue them again (``recovery.interrupt``)."""
        recovery.interrupt(self.held, cause)

    def heartbeat(self) -> None:
        """Record Optuna's heartbeat of this driver's running trials (other drivers fail them when it stops), and
        fail other drivers' abandoned trials (``recovery.fail_abandoned``): their retries are this run's to take."""
        self.held.record_heartbeats()
        if not self.store.exclusive:
            with self.store.ask_lock():
                self.total += recovery.fail_abandoned(self.study, self.storage)

    def _retry(self, trial: optuna.Trial) -> bool:
        """Queue a failed trial's configuration again (``queue.retry``); True if queued."""
        queued_again = retry(self.study, trial)
        self.total += queued_again
        return queued_again

    def __getstate__(self) -> dict[str, Any]:
        """What Ray Tune pickles into its experiment files: nothing that holds the store's URL.

        (The studies, the storage, the ask lock and the held trials carry it, password included; Tune never
        restores a ledger, whose record is the store itself.)
        """
        held = ("store", "held")
        return {name: value for name, value in self.__dict__.items() if name not in held}
