"""Run a study: check everything, resume or create its Optuna study, run trials on Ray Tune, report."""

from __future__ import annotations

import datetime
import logging
import math
import os
import socket
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

import optuna
import ray
import torch
from optuna.trial import TrialState
from ray import tune
from ray.tune.schedulers import ASHAScheduler, TrialScheduler

from outputs import REPORTS_DIR, TUNE_DIR
from reports.analysis import VERDICT_ATTRIBUTE, verdict
from reports.files import check_writable_dir, check_writable_file, report_path
from reports.html import write_report
from search_space.space import Choice, SearchSpace, SearchSpaceError, Value
from storage import (
    StudyLock,
    check_sqlite_store,
    masked_url,
    open_storage,
    parse_storage_url,
    resolve_storage_url,
    single_writer,
    sqlite_path,
)
from storage.trials import configuration, configuration_key, family_bests, outcome, trials_frame
from studies.ledger import Ledger
from studies.plan import PlannedTrial, enqueue, heartbeat_options, queued, recover_interrupted, trials_counted
from studies.progress import ProgressLine
from studies.registry import Preset, Study
from studies.sampler import sampler_for
from studies.summary import summary
from studies.tasks import Task
from studies.trainable import run_trial
from studies.tune_bridge import LedgerCallback, LedgerSearcher
from studies.version import code_version
from trainers.data.cache import default_cache_dir
from trainers.data.lra_files import DataFileError
from trainers.memory import GIB


class StudyOptionError(ValueError):
    """An option that cannot be run; the message names it and the fix."""


@dataclass(frozen=True)
class RunOptions:
    """Everything a run needs besides the study definition (the CLI's options)."""

    preset: str | None = None
    trials: int | None = None
    storage: str | None = None
    address: str | None = None
    cpus_per_trial: float | None = None
    gpus_per_trial: float | None = None
    trial_memory_gib: float | None = None
    seed: int = 0
    report: Path | None = None
    fresh: bool = False
    fixed: dict[str, Value] = field(default_factory=dict)
    cache_dir: Path | None = None
    data_dir: Path | None = None  # tasks that read files; None: $LRA_DATA_DIR
    repeat_seeds: int | None = None  # None: the preset's
    precision: str | None = None
    compile: bool | None = None


@dataclass(frozen=True)
class RunOutcome:
    """Where a run left its results."""

    study_name: str
    storage: str
    report: Path
    counts: dict[str, int]


def pinned_space(study: Study, preset: Preset, fixed: dict[str, Value]) -> tuple[SearchSpace, dict[str, Value]]:
    """Check the user's fixed knob values and apply them.

    A fixed searched knob narrows the preset's space to that one value (for every family);
    other fixed knobs override the preset's values where they apply (a DAMCHA knob in
    DAMCHA trials, not in MHA's).

    Returns:
        The space to sample, and the fixed values of knobs it does not search.

    Raises:
        SearchSpaceError: an unknown knob, a knob the study sets itself, a value outside
            the preset's domain, or a forbidden combination.
    """
    space = study.space_for(preset)
    for name, value in fixed.items():
        knob = space.knob(name)
        if name in study.pinned_knobs():
            by_family = ", ".join(f"{f.label}: {f.values[name]!r}" for f in study.families if name in f.values)
            raise SearchSpaceError(
                f"knob {name!r} is set by study {study.name!r} itself, per family ({by_family}); it cannot be fixed"
            )
        if not knob.domain.contains(value):
            where = f"the {preset.name} preset's domain" if name in space.searched else "its domain"
            raise SearchSpaceError(f"knob {name}={value!r} is outside {where}: {knob.domain.describe()}")
    space = space.narrowed({name: Choice((value,)) for name, value in fixed.items() if name in space.searched})
    others = {name: value for name, value in fixed.items() if name not in space.searched}
    for family in study.families:
        values = dict(family.values)
        configuration = values | dict(preset.fixed) | others
        # A pinned DAMCHA knob applies to the DAMCHA trials; MHA's ignore it.
        active = space.defaults() | configuration
        space.resolve({name: value for name, value in configuration.items() if name in values or space.knob(name).active(active)})
    return space, others


def without_contradicted_points(study: Study, fixed: dict[str, Value]) -> tuple[Study, list[str]]:
    """The study without the named points that the user's fixed values contradict (a point
    trained with another value of its own knob would no longer be that configuration).

    Returns:
        The study, and one sentence per point left out.
    """
    kept, dropped = [], []
    for point in study.points:
        clashes = [
            f"--fix {name}={fixed[name]!r}" for name, value in point.values.items() if name in fixed and fixed[name] != value
        ]
        if clashes:
            dropped.append(f"the {point.label} is not trained: {', '.join(clashes)} contradicts its own values")
        else:
            kept.append(point)
    return replace(study, points=tuple(kept)), dropped


def _store_name(study: Study, preset: Preset, fixed: dict[str, Value]) -> str:
    """Stable name; fixed knobs make a different study (its trials answer another question)."""
    suffix = "".join(f"-{name}={value}" for name, value in sorted(fixed.items()))
    return study.store_name(preset.name) + suffix


def _existing(storage: optuna.storages.BaseStorage, name: str) -> optuna.Study | None:
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        return None


def plan_trials(store: optuna.Study, storage: optuna.storages.BaseStorage, trials: int, *, exclusive: bool) -> int:
    """Recover what a dead driver left (``studies.plan.recover_interrupted``) and count what is left to run.

    Args:
        store: The study's store.
        storage: Its storage.
        trials: The study's budget (``--trials``), seed repeats aside.
        exclusive: This driver is the store's only one.

    Returns:
        How many trials are left: the store's queue, then searched trials up to ``trials``.
    """
    recover_interrupted(store, storage, exclusive=exclusive)
    return len(queued(store)) + max(trials - trials_counted(store), 0)


def check_ray_address(address: str) -> None:
    """Fail fast, naming the address, when a ``host:port`` Ray address does not answer.

    Raises:
        StudyOptionError: nothing listens there (checked within 5 seconds).
    """
    host, separator, port = address.rpartition(":")
    if address == "auto" or "://" in address or not separator or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as error:
        raise StudyOptionError(
            f"cannot reach the Ray cluster at --address {address} ({error.strerror or error}); start its head with "
            "`ray start --head`, or check --address / RAY_ADDRESS"
        ) from None


def start_ray(address: str | None) -> bool:
    """Join ``address`` (or ``RAY_ADDRESS``) or start a quiet local Ray; True when this call started it."""
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    common = {"logging_level": logging.ERROR, "log_to_driver": False, "configure_logging": True}
    if address:
        ray.init(address=address, **common)  # host:port needs RAY_AUTH_MODE=token: see studies.run.prepare_ray_environment
    else:
        ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, **common)  # never a stale cluster
    return True


@dataclass(frozen=True)
class TrialResources:
    """What one trial gets: CPUs, GPUs (fractions share one) and a host-memory budget in bytes (or None)."""

    cpus: float
    gpus: float
    memory: int | None


@dataclass(frozen=True)
class CheckedRun:
    """A run's options, checked and with the preset's defaults filled in."""

    preset: Preset
    space: SearchSpace
    fixed_others: dict[str, Value]
    url: str
    trials: int
    repeat_seeds: int
    resources: TrialResources
    train_overrides: dict[str, Value] = field(default_factory=dict)  # --precision, --compile where they differ


def check_options(study: Study, options: RunOptions) -> CheckedRun:
    """Check everything the user chose, before the store is touched or Ray starts.

    Raises:
        StudyOptionError, SearchSpaceError, StorageURLError, UnknownNameError: the
            message names the option and the fix.
    """
    preset = study.preset(options.preset)
    chosen = {"precision": options.precision, "compile": options.compile}
    overrides = {name: value for name, value in chosen.items() if value is not None and value != getattr(preset.train, name)}
    try:  # TrainConfig checks its own fields
        preset = replace(preset, train=replace(preset.train, **overrides))  # trials record them in train_config
    except ValueError as error:
        raise StudyOptionError(str(error)) from None
    preset = replace(preset, task=_task_with_files(preset.task, options.data_dir))
    space, fixed_others = pinned_space(study, preset, options.fixed)
    url = resolve_storage_url(options.storage)
    trials = options.trials if options.trials is not None else preset.trials
    if trials < len(study.families):
        labels = ", ".join(family.label for family in study.families)
        raise StudyOptionError(
            f"--trials {trials} leaves some of the study's {len(study.families)} families ({labels}) without a trial; "
            f"pass at least {len(study.families)}"
        )
    cpus = options.cpus_per_trial if options.cpus_per_trial is not None else preset.cpus_per_trial
    gpus = options.gpus_per_trial if options.gpus_per_trial is not None else preset.gpus_per_trial
    repeat_seeds = options.repeat_seeds if options.repeat_seeds is not None else preset.repeat_seeds
    if repeat_seeds < 0:
        raise StudyOptionError(f"--repeat-seeds must be >= 0, got {repeat_seeds}")
    if options.seed < 0:
        raise StudyOptionError(f"--seed must be >= 0 (samplers take no negative seed), got {options.seed}")
    if not (math.isfinite(cpus) and cpus > 0) or not (math.isfinite(gpus) and gpus >= 0):
        raise StudyOptionError(f"--cpus-per-trial must be a number > 0 and --gpus-per-trial a number >= 0, got {cpus} and {gpus}")
    if options.trial_memory_gib is not None and not (math.isfinite(options.trial_memory_gib) and options.trial_memory_gib > 0):
        raise StudyOptionError(f"--trial-memory must be a number of GiB > 0, got {options.trial_memory_gib}")
    memory = None if options.trial_memory_gib is None else int(options.trial_memory_gib * GIB)
    if address := options.address or os.environ.get("RAY_ADDRESS"):
        check_ray_address(address)
    else:  # a local Ray gets this machine: refuse what it cannot give (a cluster is checked once joined)
        _check_local_resources(cpus, gpus, options.trial_memory_gib)
    if (database := sqlite_path(url)) is not None:
        check_sqlite_store(database, writing=True)
    if options.report is not None:
        check_writable_file(options.report, "--report")
    else:
        check_writable_dir(REPORTS_DIR, "the report folder")
    check_writable_dir(options.cache_dir or default_cache_dir(), "--data-cache")
    check_writable_dir(TUNE_DIR, "Ray Tune's folder")
    return CheckedRun(preset, space, fixed_others, url, trials, repeat_seeds, TrialResources(cpus, gpus, memory), overrides)


def _task_with_files(task: Task, data_dir: Path | None) -> Task:
    """The task reading ``data_dir`` (else ``$LRA_DATA_DIR``) when it reads files.

    Raises:
        StudyOptionError: ``--data-dir`` for a task that reads no files, or a file task
            with neither (the message says where its files come from).
    """
    if not task.reads_files:
        if data_dir is not None:
            raise StudyOptionError(f"--data-dir: task {task.name!r} reads no files (it is generated); drop --data-dir")
        return task
    try:
        return task.with_data_dir(data_dir)
    except DataFileError as error:
        raise StudyOptionError(f"{error} (or pass --data-dir)") from None


def _check_local_resources(cpus: float, gpus: float, memory_gib: float | None) -> None:
    """Refuse a trial that this machine cannot hold: it would wait forever for resources.

    Raises:
        StudyOptionError: naming the option, what it asks and what the machine has.
    """
    machine_cpus = os.cpu_count() or 1
    if cpus > machine_cpus:
        raise StudyOptionError(f"--cpus-per-trial {cpus:g} is more than this machine's {machine_cpus} CPUs; no trial could start")
    machine_gpus = torch.cuda.device_count()
    if gpus > machine_gpus:
        raise StudyOptionError(f"--gpus-per-trial {gpus:g} is more than this machine's {machine_gpus} GPUs; no trial could start")
    if memory_gib is not None and memory_gib * GIB > (machine := os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")):
        raise StudyOptionError(f"--trial-memory {memory_gib} GiB is more than this machine has ({machine / GIB:.3g} GiB)")


def run_study(study: Study, options: RunOptions, out: TextIO | None = None) -> RunOutcome:
    """Run (or resume) a study and write its report.

    Args:
        study: The study definition.
        options: The run's options.
        out: Where the summary and messages go (default: ``sys.stdout`` at call time).

    Returns:
        The study's name, store, report path and trial counts.

    Raises:
        StudyOptionError, SearchSpaceError, StorageURLError, UnknownNameError: bad input,
            before anything is written (``check_options``).
        DataFileError: a missing or malformed release file, before the store is touched.
        StoreBusyError: another driver is writing to the same SQLite store.
    """
    out = out or sys.stdout
    run = check_options(study, options)
    preset = run.preset
    cache_dir = (options.cache_dir or default_cache_dir()).resolve()
    if preset.task.reads_files:  # read before the store is touched: a bad file leaves it as it was
        preset.task.load(cache_dir)
    with single_writer(run.url):
        store, storage = _open_study(study, run, options, out)
        exclusive = parse_storage_url(run.url).get_backend_name() == "sqlite"  # one driver: single_writer's lock
        lock = StudyLock(run.url, store.study_name)
        with lock.held():  # one driver at a time recovers and counts
            to_run = plan_trials(store, storage, run.trials, exclusive=exclusive)
        report = options.report or report_path(store.study_name)
        print(f"study {store.study_name}: {to_run} trials to run (--trials {run.trials}, seed repeats aside)", file=out)
        definition, left_out = without_contradicted_points(study, options.fixed)
        for sentence in left_out:
            print(f"note: {sentence}", file=out)

        if not preset.task.reads_files:  # built once here, after a bad storage URL has failed fast; workers memory-map it
            preset.task.load(cache_dir)
        attributes = {"preset": preset.name, "code_version": code_version(), "task": preset.task.describe()}
        if run.resources.memory is not None:
            attributes["memory_budget_bytes"] = run.resources.memory

        def tune_trials(budget: int, *, early_stopping: bool) -> None:
            """Run the store's queue, then searched trials up to ``budget``, on Ray Tune."""
            ledger = Ledger(
                store,
                storage=storage,
                definition=definition,
                preset=preset,
                space=run.space,
                fixed=run.fixed_others,
                seed=options.seed,
                run_attributes=attributes,
                cache_dir=str(cache_dir),
                budget=budget,
                ask_lock=lock.held,
                memory_bytes=run.resources.memory,
            )
            _tune(ledger, preset, store.study_name, run.resources, early_stopping=early_stopping)

        started = start_ray(options.address) if to_run or run.repeat_seeds else False
        try:
            if to_run:
                tune_trials(run.trials, early_stopping=True)
            with lock.held():  # drivers sharing the store queue each repeat once
                repeats = plan_repeats(store, run.repeat_seeds) if run.repeat_seeds else 0
            if repeats:
                print(
                    f"repeating {repeats} trials: each family's best, and its best at or below the best baseline's FLOPs, "
                    f"{run.repeat_seeds} fresh seeds each",
                    file=out,
                )
                tune_trials(0, early_stopping=False)
        finally:  # an interrupted run ends here too: its report (a finished study's, maybe) is left as it was
            if started:
                ray.shutdown()

        store.set_user_attr(VERDICT_ATTRIBUTE, verdict(trials_frame(store)).sentence)  # the report's and summary's sentence
        write_report(store, report, run.url)
        counts = Counter(outcome(trial) for trial in store.get_trials(deepcopy=False))
        print(summary(store, masked_url(run.url), report), file=out)
        return RunOutcome(study_name=store.study_name, storage=run.url, report=report, counts=counts)


def _open_study(
    study: Study, run: CheckedRun, options: RunOptions, out: TextIO
) -> tuple[optuna.Study, optuna.storages.BaseStorage]:
    """Create or resume the Optuna study (a new one under ``--fresh``) and record its settings.

    Returns:
        The study, and the storage that holds it.
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the progress line and summary say what matters
    storage = open_storage(run.url, **heartbeat_options())
    name = _store_name(study, run.preset, options.fixed | run.train_overrides)  # other training: another study
    if options.fresh and (old := _existing(storage, name)) is not None:
        new = f"{name}-fresh-{datetime.datetime.now():%Y%m%d-%H%M%S}"
        print(
            f"--fresh: study {name!r} ({len(old.trials)} trials) stays as it is in {masked_url(run.url)}; starting {new!r}",
            file=out,
        )
        name = new
    store = optuna.create_study(
        study_name=name,
        storage=storage,
        directions=[objective.direction for objective in study.objectives],
        sampler=sampler_for(len(study.objectives), run.trials, options.seed),
        load_if_exists=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        store.set_metric_names([objective.metric for objective in study.objectives])
    _record_settings(store, study, run)
    return store, storage


def _record_settings(store: optuna.Study, study: Study, run: CheckedRun) -> None:
    """The study's question and settings, for reports and optuna-dashboard."""
    preset = run.preset
    store.set_user_attr("question", study.doc.strip())
    store.set_user_attr("preset", f"{preset.name}: {preset.description}")
    store.set_user_attr("task", preset.task.describe())
    families = {family.label: dict(family.values) for family in study.families}
    store.set_user_attr(
        "budget",
        {
            "trials": run.trials,
            "families": families,
            "trials_per_family": run.trials / len(families),
            "fresh_seeds_per_repeated_configuration": run.repeat_seeds,
            "steps_per_trial": preset.train.steps,
            "early_stopping_grace_steps": preset.grace_steps,
        },
    )
    store.set_user_attr("search_space", {name: run.space.knobs[name].domain.describe() for name in run.space.searched})
    store.set_user_attr("objectives", {objective.metric: objective.direction for objective in study.objectives})


def plan_repeats(store: optuna.Study, seeds: int) -> int:
    """Queue fresh seeds 1..``seeds`` of each family's best configuration and of its best at or
    below the best baseline's FLOPs (``storage.trials.family_bests``).

    Repeat ``k`` of every configuration trains on the same seed (``PlannedTrial.repeat_index``).
    Seeds a configuration already has, finished or queued (by an earlier run), are not queued again.

    Returns:
        How many repeats were queued.
    """
    frame = trials_frame(store)
    if frame.empty:
        return 0
    stored = store.get_trials(deepcopy=False)
    by_number = {t.number: t for t in stored}
    has: dict[str, set[int]] = {}  # configuration -> its repeat indices, finished, running or queued
    for trial in stored:
        if "repeat_index" in trial.user_attrs and trial.state != TrialState.FAIL:  # a failed one has its retry queued
            original = by_number[trial.user_attrs["repeat_of"]]
            has.setdefault(configuration_key(configuration(original)), set()).add(trial.user_attrs["repeat_index"])
    planned = 0
    for number in family_bests(frame)["number"]:
        original = by_number[int(number)]  # a search trial: family_bests leaves repeats out
        key = configuration_key(configuration(original))
        plan = replace(PlannedTrial.of(original), repeat_of=original.number, retry_of=None, attempt=0)
        for index in sorted(set(range(1, seeds + 1)) - has.setdefault(key, set())):
            enqueue(store, replace(plan, repeat_index=index))
            has[key].add(index)
            planned += 1
    return planned


def _trial_request(resources: TrialResources) -> tuple[dict[str, float], int]:
    """One trial's Ray resources, and how many trials the cluster fits at once.

    Raises:
        StudyOptionError: no node of the cluster has the memory one trial asks.
    """
    total = ray.cluster_resources()
    request = {"cpu": resources.cpus, "gpu": resources.gpus}
    for name, asked in (("CPU", resources.cpus), ("GPU", resources.gpus)):
        largest = max((node["Resources"].get(name, 0) for node in ray.nodes() if node["Alive"]), default=0)
        if asked > largest:
            raise StudyOptionError(
                f"--{name.lower()}s-per-trial {asked:g} is more than any Ray node offers ({largest:g}); "
                "no trial could start: ask less or add a bigger node"
            )
    fits = [int(total.get("CPU", 1) // resources.cpus)]
    if resources.gpus:
        fits.append(int(total.get("GPU", 0) // resources.gpus))
    if resources.memory is not None:  # Ray then starts only as many trials at once as their budgets fit
        largest = max((node["Resources"].get("memory", 0) for node in ray.nodes() if node["Alive"]), default=0)
        if resources.memory > largest:
            raise StudyOptionError(
                f"--trial-memory {resources.memory / GIB:.3g} GiB is more than any Ray node offers "
                f"({largest / GIB:.3g} GiB); lower it or add a bigger node"
            )
        request["memory"] = resources.memory
        fits.append(int(total.get("memory", 0) // resources.memory))
    return request, max(1, min(fits))


class ASHAExceptRepeats(ASHAScheduler):
    """ASHA for every family's searched trials alike; a seed repeat trains to its last step.

    A repeat measures its configuration again on a fresh seed, so stopping it early would
    leave no result. Repeats run after the search, unless an earlier run left some queued.
    """

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        if trial.config.get("repeat"):
            return TrialScheduler.CONTINUE
        return super().on_trial_result(tune_controller, trial, result)


def _tune(ledger: Ledger, preset: Preset, name: str, resources: TrialResources, *, early_stopping: bool) -> None:
    """Run the ledger's trials on Ray Tune (ASHA on the study's first objective when ``early_stopping``).

    Raises:
        KeyboardInterrupt: Ctrl-C; the running trials were failed first (``Ledger.interrupt``).
    """
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # with verbose=0: no tables, our progress line instead
    # Tune would swallow Ctrl-C and return as if done (exit 0, a partial report): let it raise.
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    request, concurrency = _trial_request(resources)
    scheduler = ASHAExceptRepeats(
        time_attr="step",
        metric=ledger.objective.metric,
        mode=ledger.objective.direction[:3],  # "max" or "min"
        max_t=preset.train.steps,
        grace_period=preset.grace_steps,
        reduction_factor=2,
    )
    tuner = tune.Tuner(
        tune.with_resources(run_trial, request),
        tune_config=tune.TuneConfig(
            search_alg=LedgerSearcher(ledger),
            scheduler=scheduler if early_stopping else None,
            num_samples=-1,  # the searcher says when it is finished: retries may add trials
            max_concurrent_trials=concurrency,  # ask Optuna only when a slot is free: later asks learn more
            reuse_actors=True,  # a trial's worker runs the next one: no new process and imports per trial
            trial_dirname_creator=lambda trial: f"trial_{trial.config['number']}",
        ),
        run_config=tune.RunConfig(
            name=name,
            storage_path=str(TUNE_DIR.resolve()),
            callbacks=[LedgerCallback(ledger), ProgressLine(ledger, concurrency)],
            verbose=0,
        ),
    )
    try:
        tuner.fit()
    except KeyboardInterrupt:
        ledger.interrupt()
        raise
