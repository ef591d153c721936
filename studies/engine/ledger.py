"""The Optuna study as the record of a run: asks trials, writes every report and outcome.

A ``Ledger`` owns the Optuna study in the driver process: it asks the store's queued
trials (``studies.engine.queue``), then searched ones within the budget, and records what the
trials report (``studies.engine.tune_bridge`` connects it to Ray Tune).
"""

from __future__ import annotations

import contextlib
import os
import socket
import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from typing import Any

import optuna
from optuna.trial import TrialState

from reports.results.names import INFEASIBLE, INFEASIBLE_ATTRIBUTE, POINT_ATTRIBUTE, POINT_VALUES_ATTRIBUTE
from search_space.knobs import MODEL_KNOBS
from search_space.space import SearchSpace, SearchSpaceError, Value
from studies.catalogue.schema import Family, Preset, Study
from studies.engine.failures import failure_of
from studies.engine.queue import COUNTED_STATES, PlannedTrial, enqueue, queued, retry, trial_id, trials_counted
from studies.engine.sampler import tell_infeasible
from trainers.config import ModelConfig
from trainers.train import TrainConfig, compile_cache_dir

COST_ATTRIBUTES = (
    "parameters",
    "attention_parameters",
    "flops_per_example",
    "examples_per_s",
    "tokens_per_s",
    "flops_per_s",
    "model_flops_utilisation",
    "compile_seconds",
    "peak_memory_bytes",
    "wall_seconds",
    "device",
    "train_loss",
    "val_count",
    "val_loss",
    "val_perplexity",
)
MAX_RESAMPLES = 50
FRESH_SEEDS_FROM = 90_000  # repeat k trains on seed * 100_000 + FRESH_SEEDS_FROM + k (trial numbers stay below)
INTERRUPTED_ATTRIBUTE = "interrupted"  # a FAIL trial that a Ctrl-C stopped; its retry is queued
FORBIDDEN = "forbidden combination"  # why a sampled configuration that the study's rules refuse is infeasible


def driver_identity() -> str:
    """``host:pid`` of this driver process, recorded on every trial it runs."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Ledger:
    """Asks configurations of an Optuna study and records what the trials report.

    Args:
        study: The Optuna study (created or resumed by the caller).
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
    """

    def __init__(
        self,
        study: optuna.Study,
        *,
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
    ) -> None:
        self.study, self.storage, self.definition, self.preset, self.space = study, storage, definition, preset, space
        self.memory_bytes = memory_bytes
        self.fix, self.seed = dict(fix), seed
        self.run_attributes, self.cache_dir, self.budget, self.ask_lock = dict(run_attributes), cache_dir, budget, ask_lock
        self.compile_cache_dir = str(compile_cache_dir())  # resolved here, in the driver: one cache for every trial and run
        # This run asks at most what was left at its start, and the retries it queues: a
        # failed trial is replaced by the next run, not at once (a configuration error would loop).
        self.total, self.asked = self.remaining(), 0
        self.open: dict[int, optuna.Trial] = {}  # trial number -> trial still running
        self.trial_ids: dict[int, int] = {}  # trial number -> the storage's id of it
        self.finished: dict[str, int] = {"COMPLETE": 0, "PRUNED": 0, "FAIL": 0, INFEASIBLE: 0}
        self.durations: list[float] = []
        self.objective = definition.objectives[0]  # the value that judges a trial, reported at each evaluation
        self.best_value: float | None = None  # of the objective, over this run's complete trials

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
            if not queued(self.study) and trials_counted(self.study) >= self.budget:
                self.total = self.asked  # other drivers took the rest
                return None
            self.asked += 1
            for _ in range(MAX_RESAMPLES):
                trial, sampled = self._sample()
                try:
                    point_values = trial.user_attrs.get(POINT_VALUES_ATTRIBUTE)
                    chosen = sampled | self._unsearched_where_active(trial)  # what this trial sets; the space fills in the rest
                    knobs = self.space.resolve(chosen, beyond_domains=point_values)
                except SearchSpaceError as error:  # a forbidden combination: not a training trial; the sampler learns
                    del self.open[trial.number]
                    trial.set_user_attr("error", f"rejected before training: {error}")
                    tell_infeasible(self.study, trial, FORBIDDEN)
                    continue
                return self._start(trial, knobs, self.preset.training(chosen | (point_values or {})), ray_trial_id)
        raise SearchSpaceError(f"{MAX_RESAMPLES} sampled configurations in a row broke the study's rules; check its domains")

    def _sample(self) -> tuple[optuna.Trial, dict[str, Value]]:
        """Ask the next trial and sample it define-by-run.

        The store's queue comes first: ``ask`` takes its oldest trial, with the values it
        fixes. Otherwise a searched trial of the next family (``_next_family``) is queued
        with the family's values (the family's named point, the first time) and taken at
        once: the ask lock is held, so no other driver takes it in between. The sampler
        proposes the rest (none of a named point's own knobs).
        """
        if not queued(self.study):
            family = self._next_family()
            planned = PlannedTrial(params=family.values, family=family.label, baseline=family.baseline)
            enqueue(self.study, self._with_point_due(planned))
        with warnings.catch_warnings():  # heartbeats are recorded by this ledger, not Study.optimize's thread
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
            trial = self.study.ask()
        self.open[trial.number] = trial  # at once: a Ctrl-C from here on fails it (``interrupt``), never leaves it RUNNING
        return trial, self.space.suggest(trial, given=trial.user_attrs.get(POINT_VALUES_ATTRIBUTE))

    def _with_point_due(self, planned: PlannedTrial) -> PlannedTrial:
        """``planned`` as its family's named point when no trial of the store has trained that point
        yet (a failed one's retry is queued with it); else as it is."""
        asked = {trial.user_attrs.get(POINT_ATTRIBUTE) for trial in self.study.get_trials(deepcopy=False)}
        for point in self.definition.points:
            if point.family == planned.family and point.label not in asked:
                return replace(planned, point=point.label, point_values=point.values)
        return planned

    def _next_family(self) -> Family:
        """The family with the fewest trials so far (all drivers'; the first on ties): the budget splits evenly.

        Finished, running and queued trials count, a diverged or out-of-memory one too;
        seed repeats, failed trials (a retry is queued) and combinations rejected before
        training don't.
        """
        trials = self.study.get_trials(deepcopy=False, states=COUNTED_STATES)
        asked = Counter(
            t.user_attrs.get("family")
            for t in trials
            if "repeat_of" not in t.user_attrs and t.user_attrs.get(INFEASIBLE_ATTRIBUTE) != FORBIDDEN
        )
        return min(self.definition.families, key=lambda family: asked[family.label])

    def _unsearched_where_active(self, trial: optuna.Trial) -> dict[str, Value]:
        """The preset's and the user's non-searched values, for knobs that exist in this trial."""
        values = dict(self.preset.fixed) | self.fix
        active = self.space.defaults() | trial.params | values
        return {name: value for name, value in values.items() if self.space.knobs[name].active(active)}

    def _start(self, trial: optuna.Trial, knobs: dict[str, Value], training: TrainConfig, ray_trial_id: str) -> dict[str, Any]:
        """Record the trial's configuration and return what its worker needs.

        Args:
            trial: The asked trial.
            knobs: Its resolved knob values (the model's come from here).
            training: Its training settings (``Preset.training``: the preset's, with the training knobs it sets).
            ray_trial_id: Ray Tune's id of the trial.
        """
        index = trial.user_attrs.get("repeat_index")  # a fresh seed shared by every configuration's k-th repeat
        train = asdict(training) | {"seed": self.seed * 100_000 + (trial.number if index is None else FRESH_SEEDS_FROM + index)}
        model = ModelConfig.completed(self.preset.task.model_fields() | {k: v for k, v in knobs.items() if k in MODEL_KNOBS})
        attributes = self.run_attributes | {
            "seed": train["seed"],
            "ray_trial_id": ray_trial_id,
            "driver": driver_identity(),
            "model_config": model,
            "train_config": train,
        }
        for name, value in attributes.items():
            trial.set_user_attr(name, value)
        self.trial_ids[trial.number] = trial_id(self.storage, self.study, trial.number)  # looked up once, not per report
        self.storage.record_heartbeat(self.trial_ids[trial.number])  # alive from its start (stale only after a heartbeat)
        return {
            "number": trial.number,
            "repeat": "repeat_of" in trial.user_attrs,  # trains to its last step (``studies.engine.runner.ASHAExceptRepeats``)
            "model": model,
            "train": train,
            "task": self.preset.task,
            "cache_dir": self.cache_dir,
            "compile_cache_dir": self.compile_cache_dir,
            "memory_bytes": self.memory_bytes,
        }

    def record_report(self, number: int, result: Mapping[str, Any]) -> None:
        """Store one report's value of the study's first objective (validation accuracy, bits per
        byte ...) as the intermediate value at its step."""
        trial = self.open.get(number)
        if trial is None or self.objective.metric not in result:
            return
        # Optuna's Trial.report refuses multi-objective studies; its storage keeps the curve for any study.
        step, value = int(result["step"]), float(result[self.objective.metric])
        self.storage.set_trial_intermediate_value(self.trial_ids[number], step, value)

    def finish(
        self, number: int, last: Mapping[str, Any] | None, error: str | None, exception: BaseException | None = None
    ) -> None:
        """Record a trial's ending: COMPLETE after its last step, PRUNED when stopped early, FAIL on error.

        Args:
            number: The trial's number.
            last: Its last report (None: it reported nothing).
            error: What its exception says (traceback included), or None when it ended without one.
            exception: The exception, as Ray Tune kept it (``studies.engine.failures.failure_of`` reads it).

        A failure that says the configuration cannot train is told to the sampler as
        infeasible (``studies.engine.sampler.tell_infeasible``); a dead worker's, or a shared
        GPU's out of memory, is queued again first (``studies.engine.queue.retry``).
        """
        trial = self.open.get(number)  # left open until the store has its ending: a Ctrl-C before that fails it
        if trial is None:
            return
        last = last or {}
        for name in COST_ATTRIBUTES:
            if name in last:
                trial.set_user_attr(name, last[name])
        if "step" in last:
            trial.set_user_attr("reached_step", int(last["step"]))
        if error is not None:
            failure = failure_of(exception)
            first, newline, rest = error.partition("\n")
            trial.set_user_attr("error", f"{first}; {failure.fix}{newline}{rest}" if failure.fix else error)
            if failure.diverged_at_step is not None:
                trial.set_user_attr("diverged_at_step", failure.diverged_at_step)
            state, values = TrialState.FAIL, None
            if not (failure.retry and self._retry(trial)) and failure.infeasible:
                tell_infeasible(self.study, trial, failure.infeasible)
                self._ended(number, INFEASIBLE, last)
                return
        elif last.get("final"):
            state, values = TrialState.COMPLETE, [float(last[o.metric]) for o in self.definition.objectives]
            self.best_value = self.objective.best(v for v in (self.best_value, values[0]) if v is not None)
        elif "step" in last:
            trial.set_user_attr("pruned_at_step", int(last["step"]))
            state, values = TrialState.PRUNED, None
        else:
            trial.set_user_attr("error", "stopped before its first report")
            state, values = TrialState.FAIL, None
        self.study.tell(trial, values, state=state)
        self._ended(number, state.name, last)

    def _ended(self, number: int, outcome: str, last: Mapping[str, Any]) -> None:
        """Close a trial whose ending the store has, and count it for the progress line."""
        del self.open[number]
        self.finished[outcome] += 1
        if "wall_seconds" in last:
            self.durations.append(float(last["wall_seconds"]))

    def interrupt(self) -> None:
        """Fail the running trials of a run stopped by Ctrl-C and queue them again for the next run.

        Ctrl-C lands between any two lines, so a trial still open here may have had its ending
        stored just before (it is left as it is), or its retry queued already (not queued twice).
        """
        retried = {PlannedTrial.of(waiting).retry_of for waiting in queued(self.study)}
        for number in list(self.open):
            trial = self.open.pop(number)
            if self.storage.get_trial(trial_id(self.storage, self.study, number)).state.is_finished():
                continue
            trial.set_user_attr("error", "interrupted (Ctrl-C) before it finished; the next run retries its configuration")
            trial.set_user_attr(INTERRUPTED_ATTRIBUTE, True)
            self.study.tell(trial, state=TrialState.FAIL)
            if number not in retried:
                retry(self.study, trial)

    def __getstate__(self) -> dict[str, Any]:
        """What Ray Tune pickles into its experiment files: nothing that holds the store's URL.

        (The study, the storage and the ask lock carry it, password included; Tune never restores a
        ledger, whose record is the store itself.)
        """
        return {name: value for name, value in self.__dict__.items() if name not in ("study", "storage", "ask_lock", "open")}

    def heartbeat(self) -> None:
        """Record Optuna's heartbeat of this driver's running trials (other drivers fail them when it stops)."""
        for number in self.open:
            self.storage.record_heartbeat(self.trial_ids[number])

    def _retry(self, trial: optuna.Trial) -> bool:
        """Queue a failed trial's configuration again (``studies.engine.queue.retry``); True if queued."""
        queued_again = retry(self.study, trial)
        self.total += queued_again
        return queued_again

    def done(self) -> bool:
        """This run asked all it may and every trial it started has ended (a failure may still queue a retry)."""
        return not self.open and self.asked >= self.total

    def finished_count(self) -> int:
        return sum(self.finished.values())
