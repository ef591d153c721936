"""A run's options, checked before anything is written: preset, the user's --fix values, store URL, resources."""

from __future__ import annotations

import math
import os
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from common.naming import unknown_name_message
from common.outputs import (
    NAME_MAX_BYTES,
    REPORTS_DIR,
    TUNE_DIR,
    OutputPathError,
    check_path_text,
    check_writable_dir,
    check_writable_file,
)
from search_space.space import Choice, SearchSpace, SearchSpaceError, Value
from storage import (
    check_sqlite_store,
    masked_url,
    resolve_storage_url,
    sqlite_path,
    sqlite_read_only_flags,
    store_files,
)
from studies.catalogue.schema import Preset, Study
from studies.catalogue.store_names import longest_name_bytes, run_store_name
from studies.catalogue.tasks import Task
from studies.engine.errors import StudyOptionError
from studies.engine.ray_address import LOCAL_ADDRESS, check_ray_address
from studies.engine.seeds import FRESH_SEEDS_FROM, SEEDS_PER_RUN, TABLE_SEEDS_FROM
from studies.engine.study_space import preset_space, table_grid
from trainers.data.cache import default_cache_dir
from trainers.data.lra_files import DataFileError
from trainers.memory import GIB

MAX_TRIALS = 10_000  # searched trials of a study: with retries and repeats, trial numbers stay below TABLE_SEEDS_FROM
MAX_REPEAT_SEEDS = SEEDS_PER_RUN - FRESH_SEEDS_FROM - 1
MAX_SEED = 2**32 - 1  # Optuna's samplers (NumPy's legacy seeding) take seeds below 2**32
RAY_PRECISION = 1e-4  # Ray counts fractional resources to four decimals


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
    fix: dict[str, Value] = field(default_factory=dict)  # --fix KNOB=VALUE
    cache_dir: Path | None = None
    data_dir: Path | None = None  # tasks that read files; None: $LRA_DATA_DIR
    repeat_seeds: int | None = None  # None: the preset's
    precision: str | None = None
    compile: bool | None = None
    command: str | None = None  # the command that made the run where it is not the study's own (a suite's)

    def command_line(self, name: str) -> str:
        """The ``python -m studies.run NAME`` command these options are, as a user would type it
        (a storage URL's password masked; ``env:NAME`` stays as it is)."""
        storage = self.storage if self.storage is None or self.storage.startswith("env:") else masked_url(self.storage)
        valued = {
            "--preset": self.preset,
            "--trials": self.trials,
            "--storage": storage,
            "--address": self.address,
            "--cpus-per-trial": self.cpus_per_trial,
            "--gpus-per-trial": self.gpus_per_trial,
            "--trial-memory": self.trial_memory_gib,
            "--seed": self.seed or None,
            "--report": self.report,
            "--data-cache": self.cache_dir,
            "--data-dir": self.data_dir,
            "--repeat-seeds": self.repeat_seeds,
            "--precision": self.precision,
        }
        words = ["python", "-m", "studies.run", name]
        words += [str(word) for option, value in valued.items() if value is not None for word in (option, value)]
        words += [word for knob, value in self.fix.items() for word in ("--fix", f"{knob}={value}")]
        words += ["--fresh"] * self.fresh + ([] if self.compile is None else ["--compile" if self.compile else "--no-compile"])
        return shlex.join(words)


@dataclass(frozen=True)
class TrialResources:
    """What one trial gets: CPUs, GPUs (fractions share one) and a host-memory budget in bytes (or None)."""

    cpus: float
    gpus: float
    memory: int | None


@dataclass(frozen=True)
class CheckedRun:
    """A run resolved from a study, its preset and the user's options in one step (``check_options``): what it
    trains, where, how much, and under which name; checked, with the preset's defaults filled in.

    Attributes:
        definition: The study as this run trains it: its named points that ``--fix`` contradicts left out.
        left_out: One sentence per named point left out.
        preset: The preset, with ``--precision``, ``--compile`` and ``--data-dir`` applied.
        space: The space its trials sample (``study_space.preset_space``, narrowed by ``--fix``).
        fix_unsearched: The ``--fix`` values of knobs the space does not search.
        fix: Every ``--fix`` value, as its knob reads it (``read_fix``).
        train_overrides: ``--precision`` and ``--compile`` where they differ from the preset's.
        url: The store's URL.
        study_name: The Optuna study's name (``store_name``): re-running the same command resumes it.
        trials: Searched trials in the study, baselines and finished ones included.
        repeat_seeds: Fresh seeds of the seed repeats.
        resources: What one trial gets.
        cache_dir: The data cache, resolved.
    """

    definition: Study
    left_out: tuple[str, ...]
    preset: Preset
    space: SearchSpace
    fix_unsearched: dict[str, Value]
    fix: dict[str, Value]
    train_overrides: dict[str, Value]
    url: str
    study_name: str
    trials: int
    repeat_seeds: int
    resources: TrialResources
    cache_dir: Path

    def trials_per_family(self, families: int) -> str:
        """Each family's share of the search in whole trials: ``9 or 10`` for 28 trials over 3 families."""
        fewest, rest = divmod(self.trials, families)
        return f"{fewest}" if not rest else f"{fewest} or {fewest + 1}"


def pinned_space(study: Study, preset: Preset, fix: dict[str, Value]) -> tuple[SearchSpace, dict[str, Value]]:
    """Check the user's ``--fix`` values and apply them.

    A searched knob the user fixes narrows the preset's space to that one value (for every family);
    other knobs the user fixes override the preset's values where they apply (a DAMCHA knob in
    DAMCHA trials, not in MHA's).

    Returns:
        The space to sample, and the ``--fix`` values (``read_fix``) of knobs it does not search.

    Raises:
        SearchSpaceError: an unknown knob, a knob none of the study's families has, a knob the
            study sets itself, a value outside the preset's domain, or a forbidden combination.
    """
    space = preset_space(study, preset)
    fix = read_fix(study, preset, fix)
    for name, value in fix.items():
        knob = space.knob(name)
        if name in study.pinned_knobs():
            by_family = ", ".join(f"{f.label}: {f.values[name]!r}" for f in study.families if name in f.values)
            raise SearchSpaceError(
                f"knob {name!r} is set by study {study.name!r} itself, per family ({by_family}); it cannot be fixed"
            )
        if not knob.domain.contains(value):
            where = f"the {preset.name} preset's domain" if name in space.searched else "its domain"
            raise SearchSpaceError(f"knob {name}={value!r} is outside {where}: {knob.domain.describe()}")
    space = space.narrowed({name: Choice((value,)) for name, value in fix.items() if name in space.searched})
    others = {name: value for name, value in fix.items() if name not in space.searched}
    for family in study.families:
        values = dict(family.values)
        configuration = values | dict(preset.fixed) | others
        # A pinned DAMCHA knob applies to the DAMCHA trials; MHA's ignore it.
        active = space.defaults() | configuration
        space.resolve({name: value for name, value in configuration.items() if name in values or space.knob(name).active(active)})
    return space, others


MIN_TRIAL_MEMORY = 2**20  # bytes: below a MiB, a budget is no number Ray can divide its nodes' memory by


def _check_name_length(name: str) -> None:
    """Refuse a study name a folder cannot have, ``--fresh``'s suffix included (Ray Tune names one after it).

    Raises:
        StudyOptionError: naming the length, the limit and the fix.
    """
    longest = longest_name_bytes(name)
    if longest > NAME_MAX_BYTES:  # Ray Tune names a folder after the study
        raise StudyOptionError(
            f"the options that name the study (--fix, --precision, --compile, --seed) make its name {len(name.encode())} bytes "
            f"long ({name[:60]}...); a folder name holds {NAME_MAX_BYTES} bytes and --fresh adds "
            f"{longest - len(name.encode())}: fix fewer knobs"
        )


def read_fix(study: Study, preset: Preset, fix: dict[str, Value]) -> dict[str, Value]:
    """The user's ``--fix`` values as their knobs read them (``Choice.meant``: ``true`` is ``True``, 4.0 is 4).

    Raises:
        SearchSpaceError: an unknown knob (the knobs the study's families have are offered), or a
            knob none of the study's families has (a MoA knob in a study that trains no MoA).
    """
    space = preset_space(study, preset)
    applicable = _knobs_of_families(study, preset, space)
    for name in fix:
        if name in applicable:
            continue
        if name not in space.knobs:
            raise SearchSpaceError(unknown_name_message("knob", name, sorted(applicable)))
        where = " and ".join(
            f"{other} is one of {', '.join(map(str, allowed))}" for other, allowed in space.knob(name).when.items()
        )
        labels = ", ".join(family.label for family in study.families)
        raise SearchSpaceError(
            f"knob {name!r} applies to none of study {study.name!r}'s families ({labels}): it exists only where {where}; drop it"
        )
    return {name: space.knob(name).domain.meant(value) for name, value in fix.items()}


def _knobs_of_families(study: Study, preset: Preset, space: SearchSpace) -> set[str]:
    """The knobs that exist in at least one of the study's families (a MoA knob exists in no lra_sharing trial)."""
    return {
        name
        for name, knob in space.knobs.items()
        if any(knob.active(space.defaults() | dict(preset.fixed) | dict(family.values)) for family in study.families)
    }


def without_contradicted_points(study: Study, fix: dict[str, Value]) -> tuple[Study, list[str]]:
    """The study without the named points that the user's ``--fix`` values contradict (a point
    trained with another value of its own knob would no longer be that configuration).

    Returns:
        The study, and one sentence per point left out.
    """
    kept, dropped = [], []
    for point in study.points:
        clashes = [f"--fix {name}={fix[name]!r}" for name, value in point.values.items() if name in fix and fix[name] != value]
        if clashes:
            dropped.append(f"the {point.label} is not trained: {', '.join(clashes)} contradicts its own values")
        else:
            kept.append(point)
    return replace(study, points=tuple(kept)), dropped


def check_trials_cover_families(study: Study, trials: int) -> None:
    """Refuse a budget that leaves a family without a trial (the families take their trials in turn).

    Raises:
        StudyOptionError: ``trials`` is below the number of families.
    """
    if trials < len(study.families):
        labels = ", ".join(family.label for family in study.families)
        raise StudyOptionError(
            f"--trials {trials} leaves some of the study's {len(study.families)} families ({labels}) without a trial; "
            f"pass at least {len(study.families)}"
        )


def check_options(study: Study, options: RunOptions, *, local_resources: bool = True) -> CheckedRun:
    """Check everything the user chose, before the store is touched or Ray starts.

    Args:
        study: The study.
        options: The user's options.
        local_resources: Refuse a local run's trial that this machine cannot hold (``check_local_resources``;
            a plan reports it instead).

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
    fix = read_fix(study, preset, options.fix)
    space, fix_unsearched = pinned_space(study, preset, fix)
    url = resolve_storage_url(options.storage)
    if options.trials is not None:
        trials = options.trials
    elif preset.exhaustive_seeds:  # the whole table, as --fix narrowed it
        trials = len(table_grid(study, space, preset, fix_unsearched))
    else:
        trials = preset.trials
    check_trials_cover_families(study, trials)
    cpus = options.cpus_per_trial if options.cpus_per_trial is not None else preset.cpus_per_trial
    gpus = options.gpus_per_trial if options.gpus_per_trial is not None else preset.gpus_per_trial
    repeat_seeds = options.repeat_seeds if options.repeat_seeds is not None else preset.repeat_seeds
    if trials > MAX_TRIALS:  # the seed layout: trial n trains on seed * SEEDS_PER_RUN + n, below the table's and repeats' seeds
        raise StudyOptionError(
            f"--trials must be at most {MAX_TRIALS}, got {trials}: trial n trains on seed x {SEEDS_PER_RUN} + n, and the "
            f"seeds from {TABLE_SEEDS_FROM} on are the truth tables' and the seed repeats'"
        )
    if not 0 <= repeat_seeds <= MAX_REPEAT_SEEDS:
        raise StudyOptionError(
            f"--repeat-seeds must be in 0..{MAX_REPEAT_SEEDS}, got {repeat_seeds}: repeat k trains on seed x {SEEDS_PER_RUN} + "
            f"{FRESH_SEEDS_FROM} + k, which more would share with the next --seed's trials"
        )
    if not 0 <= options.seed <= MAX_SEED:
        raise StudyOptionError(f"--seed must be in 0..{MAX_SEED} (what Optuna's samplers take), got {options.seed}")
    if not (math.isfinite(cpus) and cpus >= RAY_PRECISION) or not (gpus == 0 or (math.isfinite(gpus) and gpus >= RAY_PRECISION)):
        raise StudyOptionError(
            f"--cpus-per-trial must be a number >= {RAY_PRECISION:g} and --gpus-per-trial 0 or a number >= {RAY_PRECISION:g} "
            f"(Ray counts resources to {RAY_PRECISION:g}: less would be nothing, and trials would not be limited), "
            f"got {cpus} and {gpus}"
        )
    if options.trial_memory_gib is not None and not (
        math.isfinite(options.trial_memory_gib) and options.trial_memory_gib * GIB >= MIN_TRIAL_MEMORY
    ):
        raise StudyOptionError(
            f"--trial-memory must be a number of GiB of at least {MIN_TRIAL_MEMORY / GIB:.3g} (1 MiB), "
            f"got {options.trial_memory_gib}"
        )
    memory = None if options.trial_memory_gib is None else int(options.trial_memory_gib * GIB)
    if (address := options.address or os.environ.get("RAY_ADDRESS")) and address != LOCAL_ADDRESS:
        check_ray_address(address)
    elif local_resources:  # a local Ray gets this machine: refuse what it cannot give (a cluster is checked once joined)
        check_local_resources(cpus, gpus, options.trial_memory_gib)
    if (database := sqlite_path(url)) is not None:
        if flags := sqlite_read_only_flags(url):
            raise StudyOptionError(
                f"storage URL {masked_url(url)!r} opens the store read-only ({', '.join(flags)}): a study writes its "
                "trials there; drop it (python -m reports reads through it)"
            )
        check_sqlite_store(database, writing=True)
    if options.report is not None:
        check_writable_file(options.report, "--report", keep=store_files(url))
    else:
        check_writable_dir(REPORTS_DIR, "the report folder")
    check_writable_dir(options.cache_dir or default_cache_dir(), "--data-cache")
    check_writable_dir(TUNE_DIR, "Ray Tune's folder")
    name = run_store_name(study.store_name(preset.name), fix | overrides, options.seed)
    _check_name_length(name)
    definition, left_out = without_contradicted_points(study, fix)
    return CheckedRun(
        definition=definition,
        left_out=tuple(left_out),
        preset=preset,
        space=space,
        fix_unsearched=fix_unsearched,
        fix=fix,
        train_overrides=overrides,
        url=url,
        study_name=name,
        trials=trials,
        repeat_seeds=repeat_seeds,
        resources=TrialResources(cpus, gpus, memory),
        cache_dir=(options.cache_dir or default_cache_dir()).resolve(),
    )


def _task_with_files(task: Task, data_dir: Path | None) -> Task:
    """The task reading ``data_dir`` (else ``$LRA_DATA_DIR``) when it reads files.

    Raises:
        StudyOptionError: ``--data-dir`` for a task that reads no files, or a file task
            with neither (the message says where its files come from).
    """
    if data_dir is not None:
        try:
            check_path_text(data_dir, "--data-dir")
        except OutputPathError as error:
            raise StudyOptionError(str(error)) from None
    if not task.reads_files:
        if data_dir is not None:
            raise StudyOptionError(f"--data-dir: task {task.name!r} reads no files (it is generated); drop --data-dir")
        return task
    try:
        return task.with_data_dir(data_dir)
    except DataFileError as error:
        raise StudyOptionError(f"{error} (or pass --data-dir)") from None


def check_local_resources(cpus: float, gpus: float, memory_gib: float | None) -> None:
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
