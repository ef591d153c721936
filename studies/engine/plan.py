"""``python -m studies.run STUDY --plan``: what a run would do and what it would cost, before it runs.

Nothing is written and Ray is not started: the options are checked as a run checks them, the
store is only read (when it exists), and each family's largest and smallest configurations
train a few steps on random tokens here to measure a step (``trainers.step_cost``).
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass

import optuna
import torch
from optuna.trial import TrialState

from storage import masked_url, open_storage, parse_storage_url, record, sqlite_path
from studies.catalogue.schema import Preset, Study
from studies.engine.errors import StudyOptionError
from studies.engine.options import CheckedRun, RunOptions, check_local_resources, check_options
from studies.engine.optuna_study import reliability_line
from studies.engine.queue import queued, trials_counted
from studies.engine.ray_address import LOCAL_ADDRESS
from studies.engine.repeats import fewest_repeats, most_repeats
from studies.engine.study_space import GridEntry, exhaustive_grid
from studies.engine.trial_config import model_config_of, unsearched_where_active
from studies.engine.wall_time import expected_run_seconds, packed_seconds, searched_share
from studies.results.matching import matched
from studies.results.quality import QUALITIES
from studies.results.statistics import LEVEL, detectable_difference
from trainers.config import ModelConfig
from trainers.costs import Flops, model_flops
from trainers.measure import PEAK_FLOPS
from trainers.step_cost import StepCost, measure_step
from trainers.train import TrainConfig

REFERENCE_GPU = "NVIDIA H200"  # device-hours of a GPU preset are counted at this GPU's dense bf16 peak
FORWARD_SHARE = 1 / 3  # an evaluation example costs about a third of a training one (no backward)


@dataclass(frozen=True)
class Candidate:
    """A configuration a trial of the run could train, built once as the ledger would build it.

    Attributes:
        entry: Its family's configuration (``study_space.exhaustive_grid``).
        model: The model the trial would train.
        train: Its training settings.
        flops: Its analytic FLOPs at the longest input.
        label: Its knobs in short (the family's own knobs, which its label names, left out).
    """

    entry: GridEntry
    model: ModelConfig
    train: TrainConfig
    flops: Flops
    label: str


@dataclass(frozen=True)
class Measured:
    """One configuration of a family, measured.

    Attributes:
        label: Its knobs in short.
        flops: Its analytic forward FLOPs per example at the longest input.
        cost: One training step's measured cost at the preset's batch.
        trial_seconds: A whole trial here (its steps and its evaluations, never stopped early).
    """

    label: str
    flops: int
    cost: StepCost
    trial_seconds: float


def _candidates(study: Study, run: CheckedRun) -> dict[str, list[Candidate]]:
    """Each family's configurations (its named points' too), built as the ledger builds a trial's, by FLOPs."""
    said = study.pinned_knobs()
    per_family: dict[str, list[Candidate]] = {family.label: [] for family in study.families}
    for entry in exhaustive_grid(study, run.space, 1):
        point_values = dict(entry.point.values) if entry.point else None
        chosen = entry.params(run.space.searched) | dict(entry.family.values)
        chosen |= unsearched_where_active(run.space, run.preset, run.fix_unsearched, chosen)
        model = ModelConfig(**model_config_of(run.preset, run.space.resolve(chosen, beyond_domains=point_values)))
        label = " ".join(f"{name}={value}" for name, value in entry.configuration.items() if name not in said)
        candidate = Candidate(
            entry, model, run.preset.training(chosen | (point_values or {})), model_flops(model, model.max_length), label
        )
        per_family[entry.family.label].append(candidate)
    return {label: sorted(found, key=lambda candidate: candidate.flops.forward) for label, found in per_family.items()}


def _in_band(candidates: list[Candidate], baselines: list[Candidate], baseline: str) -> str:
    """How many of a family's searched configurations have a ``baseline`` configuration within the verdict's cost
    band (``studies.results.matching.COST_BAND``): where none has, its comparisons can only be "not matched in cost".
    """
    costs = [candidate.flops.forward for candidate in baselines]
    searched = [candidate.flops.forward for candidate in candidates if candidate.entry.point is None]
    if not costs or not searched:
        return ""
    inside = sum(any(matched(flops / cost) for cost in costs) for flops in searched)
    if inside:
        return f", {inside} within the cost band of one of {baseline}'s"
    nearest = [min((flops / cost for cost in costs), key=lambda ratio: abs(math.log(ratio))) for flops in searched]
    return (
        f", none within the cost band of one of {baseline}'s ({min(nearest):.2f}-{max(nearest):.2f}x the nearest's FLOPs): "
        f"its comparisons can only be 'not matched in cost'"
    )


def _detectable_line(study: Study, preset: Preset, baseline: str, seeds: int) -> str:
    """The smallest difference each comparison with ``baseline`` detects (power 0.8) on ``seeds`` fresh seeds, at
    the paired SD the preset measured: where its Holm-adjusted p is the smallest of the comparisons' (tested at the
    level over their count) and where it is the largest (at the level)."""
    compared = [family.label for family in study.families if family.label != baseline] + [p.label for p in study.points]
    named = f"each of the {len(compared)} comparisons with {baseline} ({', '.join(compared)})"
    if preset.paired_deviation is None or seeds < 2:
        why = "one fresh seed tests nothing" if seeds < 2 else "no paired SD measured on this preset's task"
        return f"minimum detectable difference of {named}: not known ({why})"
    quality = QUALITIES.get(preset.task.objective.metric)
    shown = quality.scaled if quality else float
    unit = ("points" if quality.percent else quality.unit) if quality else ""
    alpha = 1 - LEVEL
    strictest, laxest = (
        shown(detectable_difference(preset.paired_deviation, seeds, alpha=level)) for level in (alpha / len(compared), alpha)
    )
    return (
        f"minimum detectable difference of {named}, with power 0.8 on {seeds} fresh seeds at the paired SD measured on "
        f"this task ({shown(preset.paired_deviation):.2g} {unit}): {strictest:.1f} {unit} where its Holm-adjusted p is the "
        f"smallest of the {len(compared)}, {laxest:.1f} where it is the largest"
    )


def _split_size(preset: Preset, split: str) -> int:
    """Examples in a split, as the task describes it (``val_size`` or ``val_examples``; 0 when it says nothing)."""
    described = preset.task.describe()
    return int(described.get(f"{split}_size") or described.get(f"{split}_examples") or 0)


def _trial_seconds(preset: Preset, train: TrainConfig, step_seconds: float) -> float:
    """A trial that trains every step: its steps, each validation pass and the last test pass."""
    evaluations = math.ceil(train.steps / train.eval_every)
    validation = train.eval_examples or _split_size(preset, "val")
    evaluated = evaluations * validation + _split_size(preset, "test")
    return step_seconds * (train.steps + FORWARD_SHARE * evaluated / train.batch_size)


def _measure(run: CheckedRun, candidate: Candidate, steps: int) -> Measured:
    cost = measure_step(candidate.model, candidate.train, steps=steps, timed_length=run.preset.task.typical_length())
    seconds = _trial_seconds(run.preset, candidate.train, cost.seconds)
    return Measured(candidate.label, candidate.flops.forward, cost, seconds)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 48 * 3600 else f"{seconds / 86400:.1f} days"


def _mib(count: float) -> str:
    return f"{count / 2**20:.0f} MiB" if count < 2**30 else f"{count / 2**30:.1f} GiB"


@dataclass(frozen=True)
class Stored:
    """What the store holds of the run's study.

    Attributes:
        line: The plan's line about it.
        to_run: Search trials the run would start (the queue's, then up to ``--trials``).
        trial_seconds: Each family's median wall time of its trials that trained to the end (none: no such trial).
    """

    line: str
    to_run: int
    trial_seconds: dict[str, float]


def _stored(run: CheckedRun) -> Stored:
    """Read (never write) what the store holds of this study."""
    shown = masked_url(run.url)
    if parse_storage_url(run.url).get_backend_name() == "sqlite" and not sqlite_path(run.url).exists():
        return Stored(f"store: {shown}: new (created when the run starts)", run.trials, {})
    storage = open_storage(run.url, read_only=True)
    if run.study_name not in {summary.study_name for summary in optuna.get_all_study_summaries(storage)}:
        return Stored(f"store: {shown}: has no study {run.study_name} yet", run.trials, {})
    optuna_study = optuna.load_study(study_name=run.study_name, storage=storage)
    counted, waiting = trials_counted(optuna_study), len(queued(optuna_study))
    walls: dict[str, list[float]] = {}
    for trial in optuna_study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if record.WALL_SECONDS in trial.user_attrs and record.FAMILY in trial.user_attrs:
            walls.setdefault(trial.user_attrs[record.FAMILY], []).append(float(trial.user_attrs[record.WALL_SECONDS]))
    line = f"store: {shown}: resumes {run.study_name}: {counted} of {run.trials} search trials there, {waiting} queued"
    return Stored(line, waiting + max(run.trials - counted, 0), {f: statistics.median(w) for f, w in walls.items()})


@dataclass(frozen=True)
class Plan:
    """A run's plan.

    Attributes:
        text: What ``--plan`` prints.
        wall_seconds: The run's expected wall time here (None for a preset that trains on GPUs).
    """

    text: str
    wall_seconds: float | None


def plan(study: Study, options: RunOptions) -> Plan:
    """What ``python -m studies.run`` with these options would do and cost.

    Args:
        study: The study.
        options: The run's options (checked as the run checks them).

    Returns:
        The plan: the store, the data, each family's configurations and trials, the seed repeats, how sure
        its answer will be, each family's measured largest and smallest configuration, the estimated wall time here
        and, for a preset that trains on GPUs, device-hours and each family's peak memory.

    Raises:
        StudyOptionError, SearchSpaceError, StorageURLError, UnknownNameError: as the run would.
    """
    run = check_options(study, options, local_resources=False)
    preset = run.preset
    lines = [f"plan of {run.study_name} ({preset.name}: {preset.description}); nothing is written, Ray is not started"]
    address = options.address or os.environ.get("RAY_ADDRESS")
    if not address or address == LOCAL_ADDRESS:
        try:
            check_local_resources(run.resources.cpus, run.resources.gpus, options.trial_memory_gib)
        except StudyOptionError as error:  # a plan for a cluster, made here: said, not refused
            lines.append(f"this machine cannot run it: {error}; on a cluster, pass --address")
    stored = _stored(run)
    to_run = stored.to_run
    lines.append(stored.line)
    described = ", ".join(f"{key}={value}" for key, value in preset.task.describe().items())
    where = "read from the release files, then " if preset.task.reads_files else "built on first use, then "
    lines.append(f"data: {described}; {where}cached in {run.cache_dir}")

    per_family = _candidates(study, run)
    share = run.trials_per_family(len(study.families))
    if preset.exhaustive_seeds:
        lines.append(f"search: every configuration {preset.exhaustive_seeds} times, {run.trials} trials, none stopped early")
    else:
        lines.append(
            f"search: {run.trials} trials ({to_run} to run), the families in turn ({share} each); "
            + preset.search.describe(preset.grace_steps, preset.train.steps)
        )
    baseline = next((family.label for family in study.families if family.baseline), None)
    for label, candidates in per_family.items():
        points = sum(candidate.entry.point is not None for candidate in candidates)
        extra = f" (and {points} of a named point)" if points else ""
        if baseline is not None and label != baseline:
            extra += _in_band(candidates, per_family[baseline], baseline)
        lines.append(f"  {label}: {len(candidates) - points} configurations{extra}")
    repeats = most_repeats(study, run.repeat_seeds)
    if looks := preset.repeat_looks(run.repeat_seeds):
        seeds = (
            f"{run.repeat_seeds} fresh seeds each"
            if len(looks) == 1
            else (f"{looks[0]} fresh seeds each, then up to {looks[-1]} for the comparisons that look leaves open")
        )
        lines.append(
            f"seed repeats: then up to {repeats} trials: the configurations the verdict compares "
            f"(at most {most_repeats(study, 1)}), {seeds}"
        )
    else:
        lines.append("seed repeats: none (--repeat-seeds 0): the verdict compares search runs, uncorrected for selection")
    if baseline is not None and run.repeat_seeds and not preset.exhaustive_seeds:
        lines.append(_detectable_line(study, preset, baseline, run.repeat_seeds))
    if not preset.exhaustive_seeds:
        lines.append(reliability_line(run))  # how sure its answer will be, before the run is paid for

    torch.set_num_threads(max(1, min(int(run.resources.cpus), os.cpu_count() or 1)))  # a trial's threads, no more than here
    if run.resources.gpus:  # trained on GPUs: this CPU's times say nothing; the memory a step needs does
        return Plan("\n".join(lines + _gpu_lines(run, per_family, to_run + repeats)), None)
    cpu_lines, seconds = _cpu_lines(study, run, per_family, stored, repeats)
    return Plan("\n".join(lines + cpu_lines), seconds)


def _cpu_lines(study: Study, run: CheckedRun, per_family: dict[str, list[Candidate]], stored: Stored, repeats: int) -> list[str]:
    """Each family's largest and smallest configuration timed here, and the run's wall time: from the
    study's own trials when each family has one that trained to its end, else from those timings."""
    threads = torch.get_num_threads()
    lines = [
        f"measured here ({threads} thread{'s' * (threads > 1)}, fp32, random tokens: the time at a typical batch's length, "
        f"{run.preset.task.typical_length()}, the peak memory at the longest, {run.preset.task.model_fields()['max_length']}):"
    ]
    means, largests = [], []
    for label, candidates in per_family.items():
        smallest, largest = (_measure(run, candidate, steps=10) for candidate in (candidates[0], candidates[-1]))
        means.append((smallest.trial_seconds + largest.trial_seconds) / 2)
        largests.append(largest.trial_seconds)
        for name, measured in (("largest", largest), ("smallest", smallest)):
            lines.append(
                f"  {label} {name} ({measured.label}): {measured.flops:.3g} FLOPs/example, {measured.cost.seconds:.3g} s a step "
                f"at batch {run.preset.train.batch_size}, peak {_mib(measured.cost.peak_bytes)}; "
                f"a whole trial {_duration(measured.trial_seconds)}"
            )
    slots = max(1, int((os.cpu_count() or 1) // run.resources.cpus))
    if set(stored.trial_seconds) >= set(per_family):  # the study's own trials, as they ran here
        trial = repeat = sum(stored.trial_seconds[label] for label in per_family) / len(per_family)
        source = "each family's median whole trial in the store"
    else:  # the verdict compares each family's best, which at matched cost sits near the top of the band
        trial, repeat = (sum(found) / len(found) for found in (means, largests))
        source = "the timings above: a searched trial at its family's smallest and largest's mean, a seed repeat at the largest's"
    preset = run.preset
    searched = [trial * searched_share(preset.search, preset.grace_steps, preset.train.steps)] * stored.to_run
    fewest, most = (fewest_repeats(study, run.repeat_seeds), repeats) if run.repeat_seeds else (0, 0)
    expected = expected_run_seconds(searched, [repeat] * fewest, slots)
    phases = f"search {_duration(packed_seconds(sum(searched), len(searched), slots))}"
    if fewest:
        phases += f", {fewest} seed repeats {_duration(packed_seconds(repeat * fewest, fewest, slots))}"
    if most > fewest:
        phases += f"; {_duration(expected_run_seconds(searched, [repeat] * most, slots))} if the verdict compares {most} repeats"
    lines.append(
        f"estimated wall time here: about {_duration(expected)} in all ({phases}), {slots} trial{'s' * (slots > 1)} at once on "
        f"{os.cpu_count()} CPUs, this machine as loaded as now (from {source}; calibrated on measured runs: docs/plan.md)"
    )
    return lines, expected


def _gpu_lines(run: CheckedRun, per_family: dict[str, list[Candidate]], trials: int) -> list[str]:
    """Device-hours at the reference GPU's peak, and each family's largest configuration's peak memory."""
    preset = run.preset
    peak = PEAK_FLOPS[REFERENCE_GPU][0]  # bf16
    trial_flops = [c.flops.training_step(c.train.batch_size) * c.train.steps for found in per_family.values() for c in found]
    hours = trials * sum(trial_flops) / len(trial_flops) / peak / 3600
    lines = [
        f"device-hours: at least {hours:.1f} on {REFERENCE_GPU}s at their dense bf16 peak ({peak / 1e12:.0f} TFLOP/s, "
        f"{trials} trials at the longest input, a configuration's mean): real runs reach a fraction of the peak",
        f"peak memory of each family's largest configuration at batch {preset.train.batch_size}, length "
        f"{preset.task.model_fields()['max_length']} (one step measured on this CPU in fp32; a GPU's fused attention "
        "and bf16 need less):",
    ]
    for label, candidates in per_family.items():
        largest = _measure(run, candidates[-1], steps=0)
        how = ", extrapolated from 1 and 2 examples" if largest.cost.extrapolated else ""
        lines.append(f"  {label} ({largest.label}): {_mib(largest.cost.peak_bytes)}{how}, {largest.flops:.3g} FLOPs/example")
    return lines
