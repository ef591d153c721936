"""The Optuna study as the record of a run: asks trials, writes every report and outcome.

Ray's own ``OptunaSearch`` drops what this product must keep (intermediate values in
multi-objective studies, the last report, pruned states, user attributes), so the
bridge is ours: a ``Ledger`` owns the Optuna study in the driver process (the only
writer), ``LedgerSearcher`` lets Ray Tune ask it for configurations and
``LedgerCallback`` hands it every result and ending.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState
from ray import cloudpickle
from ray.tune import Callback
from ray.tune.search import Searcher

from search_space.knobs import MODEL_KNOBS, TRAINING_KNOBS
from search_space.space import SearchSpace, SearchSpaceError, Value
from storage.trials import INFEASIBLE, INFEASIBLE_ATTRIBUTE
from studies.failures import failure_of
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
HEARTBEAT_S = 30  # a driver refreshes its running trials' heartbeat this often
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
        self.storage.set_trial_intermediate_value(trial_id(self.storage, self.study, number), step, accuracy)

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


class LedgerSearcher(Searcher):
    """Ray Tune asks the ledger for each trial's configuration."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__()
        self.ledger = ledger

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        config = self.ledger.ask(trial_id)
        if config is not None:
            return config
        return Searcher.FINISHED if self.ledger.done() else None  # None: ask again later (a retry may come)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        """Endings are recorded by ``LedgerCallback``, which sees the error text."""

    def save(self, checkpoint_path: str) -> None:
        """Nothing to save: the Optuna store is the state, and a re-run resumes from it."""

    def restore(self, checkpoint_path: str) -> None:
        """See ``save``."""


class LedgerCallback(Callback):
    """Hands every result and trial ending to the ledger (runs in the driver)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.last_heartbeat = time.monotonic()

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        if time.monotonic() - self.last_heartbeat > HEARTBEAT_S:
            self.ledger.heartbeat()
            self.last_heartbeat = time.monotonic()

    def on_trial_result(self, iteration: int, trials: list, trial, result: dict, **info: Any) -> None:
        self.ledger.record_report(trial.config["number"], result)

    def on_trial_complete(self, iteration: int, trials: list, trial, **info: Any) -> None:
        self.ledger.finish(trial.config["number"], trial.last_result, None)

    def on_trial_error(self, iteration: int, trials: list, trial, **info: Any) -> None:
        exception = _exception(trial)
        self.ledger.finish(trial.config["number"], trial.last_result, _error_text(trial, exception), exception)


def _exception(trial) -> BaseException | None:
    """The exception Tune kept for the trial (``RayTaskError`` around the trainable's, or ``RayActorError``).

    Read from the trial's local error file: ``Trial.get_pickled_error`` reads the
    experiment's storage copy, which Tune writes after the callbacks run.
    """
    with contextlib.suppress(Exception):  # unpickling a Ray error can fail in many ways
        with open(trial.pickled_error_file, "rb") as file:
            return cloudpickle.load(file)
    with contextlib.suppress(Exception):
        return trial.get_pickled_error()
    return None


def _error_text(trial, exception: BaseException | None) -> str:
    """The trial's exception in one line, then the end of its traceback.

    Tune writes the traceback to the trial's error file; when the worker process died the
    exception (e.g. ``ActorDiedError``) may be all there is.
    """
    text = ""
    with contextlib.suppress(OSError, TypeError):
        text = (trial.get_error() or "").strip() or Path(trial.error_file).read_text().strip()
    if not text and exception is not None:
        text = f"{type(exception).__name__}: {exception}"
    if not text:
        return "the trial ended with an error that Tune did not record"
    lines = [line for line in text.splitlines() if line.strip()]
    exception = next((line.strip() for line in reversed(lines) if ":" in line and not line.startswith(" ")), lines[-1].strip())
    return f"{exception}\n\n{text[-4000:]}"
