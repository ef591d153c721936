"""The Optuna study as the record of a run: asks trials, writes every report and outcome.

A ``Ledger`` owns the Optuna study in the driver process (the only writer): it asks
configurations within the budget and records what the trials report
(``studies.tune_bridge`` connects it to Ray Tune; ``studies.plan`` says what to run).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

import optuna
from optuna.trial import TrialState

from search_space.knobs import MODEL_KNOBS, TRAINING_KNOBS
from search_space.space import SearchSpace, SearchSpaceError, Value
from storage.trials import INFEASIBLE, INFEASIBLE_ATTRIBUTE
from studies.failures import failure_of
from studies.plan import INTERRUPTED_ATTRIBUTE, PlannedTrial, driver_identity, has_values, trial_id
from studies.registry import Preset, Study
from studies.sampler import tell_infeasible
from trainers.config import ModelConfig
from trainers.train import compile_cache_dir

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
)
MAX_RESAMPLES = 50
MAX_RETRIES = 2  # a configuration whose worker keeps dying is given up after this many retries


class Ledger:
    """Asks configurations of an Optuna study and records what the trials report.

    Args:
        study: The Optuna study (created or resumed by the caller).
        definition: The study definition.
        preset: Its budget.
        space: The preset's search space.
        queue: Trials to ask first (retries, then baselines), in order.
        searched: Trials asked after the queue.
        fixed: Values of non-searched knobs chosen by the user.
        seed: The run's seed; trial ``n`` trains with seed ``seed * 100_000 + n``.
        run_attributes: User attributes every trial gets (preset, code version, task).
        cache_dir: The data cache the workers read.
        budget: The study's ``--trials``: asking stops once the store holds that many
            finished or running trials (seed repeats aside), counting other drivers' too.
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
        queue: list[PlannedTrial],
        searched: int,
        fixed: Mapping[str, Value],
        seed: int,
        run_attributes: Mapping[str, Any],
        cache_dir: str,
        budget: int | None = None,
        ask_lock: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
        memory_bytes: int | None = None,
    ) -> None:
        self.study, self.storage, self.definition, self.preset, self.space = study, storage, definition, preset, space
        self.memory_bytes = memory_bytes
        self.queue, self.searched, self.fixed, self.seed = list(queue), searched, dict(fixed), seed
        self.run_attributes, self.cache_dir, self.budget, self.ask_lock = dict(run_attributes), cache_dir, budget, ask_lock
        self.compile_cache_dir = str(compile_cache_dir())  # resolved here, in the driver: one cache for every trial and run
        self.total = len(queue) + searched
        self.asked = 0
        self.open: dict[int, optuna.Trial] = {}  # trial number -> trial still running
        self.trial_ids: dict[int, int] = {}  # trial number -> the storage's id of it
        self.plans: dict[int, PlannedTrial] = {}  # trial number -> how it was planned
        self.finished: dict[str, int] = {"COMPLETE": 0, "PRUNED": 0, "FAIL": 0, INFEASIBLE: 0}
        self.durations: list[float] = []
        self.best_accuracy = -math.inf

    def ask(self, ray_trial_id: str) -> dict[str, Any] | None:
        """The next trial's configuration for the trainable, or None when the budget is spent.

        Raises:
            SearchSpaceError: the sampler kept proposing forbidden combinations.
        """
        if self.asked >= self.total:
            return None
        with self.ask_lock():  # count and ask as one step among all drivers of the study
            counted = self._counted_trials()
            while self.queue and self._baseline_taken(self.queue[0], counted):  # another driver ran it
                self.queue.pop(0)
                self.total -= 1
            if self.asked >= self.total or (self.budget is not None and len(counted) >= self.budget):
                self.total = self.asked  # other drivers may have taken the rest
                return None
            return self._ask_planned(ray_trial_id)

    def _ask_planned(self, ray_trial_id: str) -> dict[str, Any]:
        planned = self.queue.pop(0) if self.queue else PlannedTrial(fixed=self.definition.searched_values)
        self.asked += 1
        for _ in range(MAX_RESAMPLES):
            trial, sampled = self._sample(planned.fixed)
            try:
                knobs = self.space.resolve(sampled | self._fixed_where_active(trial))
            except SearchSpaceError as error:  # a forbidden combination: not a training trial; the sampler learns the rules
                trial.set_user_attr("error", f"rejected before training: {error}")
                tell_infeasible(self.study, trial, "forbidden combination")
                continue
            return self._start(trial, knobs, planned, ray_trial_id)
        raise SearchSpaceError(f"{MAX_RESAMPLES} sampled configurations in a row broke the study's rules; check its domains")

    def _sample(self, fixed: Mapping[str, Value]) -> tuple[optuna.Trial, dict[str, Value]]:
        """Ask a trial and sample it define-by-run, with the searched knobs in ``fixed`` pinned.

        Pinned values go through Optuna's queue (``enqueue_trial``): the next ``ask`` takes
        them as fixed parameters and the sampler proposes the rest. The ask lock is held,
        so no other driver takes the queued trial in between.
        """
        pinned = {name: value for name, value in fixed.items() if name in self.space.searched}
        if pinned:
            self.study.enqueue_trial(pinned)
        trial = self.study.ask()
        return trial, self.space.suggest(trial)

    def _fixed_where_active(self, trial: optuna.Trial) -> dict[str, Value]:
        """The preset's and the user's non-searched values, for knobs that exist in this trial."""
        values = dict(self.preset.fixed) | self.fixed
        active = self.space.defaults() | trial.params | values
        return {name: value for name, value in values.items() if self.space.knobs[name].active(active)}

    def _start(self, trial: optuna.Trial, knobs: dict[str, Value], planned: PlannedTrial, ray_trial_id: str) -> dict[str, Any]:
        train = asdict(self.preset.train) | {k: v for k, v in knobs.items() if k in TRAINING_KNOBS}
        train["seed"] = self.seed * 100_000 + trial.number
        model = ModelConfig.completed(self.preset.task.model_fields() | {k: v for k, v in knobs.items() if k in MODEL_KNOBS})
        attributes = self.run_attributes | {
            "baseline": planned.baseline,
            "seed": train["seed"],
            "ray_trial_id": ray_trial_id,
            "driver": driver_identity(),
            "heartbeat": time.time(),
            "model_config": model,
            "train_config": train,
        }
        attributes |= {name: getattr(planned, name) for name in ("retry_of", "repeat_of") if getattr(planned, name) is not None}
        for name, value in attributes.items():
            trial.set_user_attr(name, value)
        self.open[trial.number] = trial
        self.trial_ids[trial.number] = trial_id(self.storage, self.study, trial.number)  # looked up once, not per report
        self.plans[trial.number] = planned
        return {
            "number": trial.number,
            "model": model,
            "train": train,
            "task": self.preset.task,
            "cache_dir": self.cache_dir,
            "compile_cache_dir": self.compile_cache_dir,
            "memory_bytes": self.memory_bytes,
        }

    def record_report(self, number: int, result: Mapping[str, Any]) -> None:
        """Store one report's validation accuracy as the intermediate value at its step."""
        trial = self.open.get(number)
        if trial is None or "val_accuracy" not in result:
            return
        # Optuna's Trial.report refuses multi-objective studies; its storage keeps the curve for any study.
        step, accuracy = int(result["step"]), float(result["val_accuracy"])
        self.storage.set_trial_intermediate_value(self.trial_ids[number], step, accuracy)

    def finish(
        self, number: int, last: Mapping[str, Any] | None, error: str | None, exception: BaseException | None = None
    ) -> None:
        """Record a trial's ending: COMPLETE after its last step, PRUNED when stopped early, FAIL on error.

        Args:
            number: The trial's number.
            last: Its last report (None: it reported nothing).
            error: What its exception says (traceback included), or None when it ended without one.
            exception: The exception, as Ray Tune kept it (``studies.failures.failure_of`` reads it).

        A failure that says the configuration cannot train is told to the sampler as
        infeasible (``studies.sampler.tell_infeasible``); a dead worker's, or a shared
        GPU's out of memory, is retried first (at most ``MAX_RETRIES`` times).
        """
        trial = self.open.pop(number, None)
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
            if not (failure.retry and self._retry(number, trial)) and failure.infeasible:
                tell_infeasible(self.study, trial, failure.infeasible)
                self._ended(INFEASIBLE, last)
                return
        elif last.get("final"):
            state, values = TrialState.COMPLETE, [float(last[o.metric]) for o in self.definition.objectives]
            self.best_accuracy = max(self.best_accuracy, float(last["val_accuracy"]))
        elif "step" in last:
            trial.set_user_attr("pruned_at_step", int(last["step"]))
            state, values = TrialState.PRUNED, None
        else:
            trial.set_user_attr("error", "stopped before its first report")
            state, values = TrialState.FAIL, None
        self.study.tell(trial, values, state=state)
        self._ended(state.name, last)

    def _ended(self, outcome: str, last: Mapping[str, Any]) -> None:
        """Count a trial's ending for the progress line."""
        self.finished[outcome] += 1
        if "wall_seconds" in last:
            self.durations.append(float(last["wall_seconds"]))

    def interrupt(self) -> None:
        """Fail the running trials of a run stopped by Ctrl-C; the next run retries them."""
        for number in list(self.open):
            trial = self.open.pop(number)
            trial.set_user_attr("error", "interrupted (Ctrl-C) before it finished; the next run retries its configuration")
            trial.set_user_attr(INTERRUPTED_ATTRIBUTE, True)
            self.study.tell(trial, state=TrialState.FAIL)

    def __getstate__(self) -> dict[str, Any]:
        """What Ray Tune pickles into its experiment files: nothing that holds the store's URL.

        (The study, the storage and the ask lock carry it, password included; Tune never restores a
        ledger, whose record is the store itself.)
        """
        return {name: value for name, value in self.__dict__.items() if name not in ("study", "storage", "ask_lock", "open")}

    def _counted_trials(self) -> list[optuna.trial.FrozenTrial]:
        """Trials that use up the budget: finished or running, seed repeats and infeasible ones aside (all drivers')."""
        states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
        trials = self.study.get_trials(deepcopy=False, states=states)
        return [t for t in trials if "repeat_of" not in t.user_attrs and INFEASIBLE_ATTRIBUTE not in t.user_attrs]

    @staticmethod
    def _baseline_taken(planned: PlannedTrial, counted: list[optuna.trial.FrozenTrial]) -> bool:
        """A first-run baseline that some driver already runs or ran (a shared store)."""
        if not planned.baseline or planned.retry_of is not None or planned.repeat_of is not None:
            return False
        return any(t.user_attrs.get("baseline") and has_values(t.params, planned.fixed) for t in counted)

    def heartbeat(self) -> None:
        """Tell other drivers that this one's running trials are alive."""
        now = time.time()
        for trial in self.open.values():
            trial.set_user_attr("heartbeat", now)

    def _retry(self, number: int, trial: optuna.Trial) -> bool:
        """Queue a failed trial's configuration again, at most ``MAX_RETRIES`` times; True if queued."""
        planned = self.plans[number]
        if planned.attempt >= MAX_RETRIES:
            return False
        self.queue.append(
            PlannedTrial(
                fixed=dict(trial.params),
                baseline=planned.baseline,
                retry_of=number,
                repeat_of=planned.repeat_of,
                attempt=planned.attempt + 1,
            )
        )
        self.total += 1
        return True

    def done(self) -> bool:
        """Every planned trial was asked and has ended (a failure may still add a retry until then)."""
        return self.asked >= self.total and not self.open

    def finished_count(self) -> int:
        return sum(self.finished.values())
