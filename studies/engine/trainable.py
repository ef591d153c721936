"""What a Ray Tune worker runs for one trial: load the data, train, report each evaluation."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from studies.engine.trial_config import TrialSpec, spec_of
from studies.engine.trial_errors import SharedGPUOutOfMemoryError
from trainers.compilation import use_compile_settings
from trainers.config import ModelConfig
from trainers.memory import TrainingOutOfMemoryError, memory_budget
from trainers.train import Report, TrainResult, train


@dataclass(frozen=True)
class TrialDevice:
    """Where a trial trains, from what Ray assigned it.

    Attributes:
        device: ``cuda`` (the GPU Ray assigned, which it made the only visible one) or ``cpu``.
        gpu_share: The fraction of that GPU the trial may use (1.0: all of it; 0: no GPU).
        cpus: The trial's CPUs.
    """

    device: str
    gpu_share: float
    cpus: int


def trial_device(gpu_ids: list, resources: dict[str, float]) -> TrialDevice:
    """The device of a trial that Ray assigned ``gpu_ids`` and ``resources``.

    A trial with no GPU trains on the CPU even where CUDA is visible: Ray leaves
    ``CUDA_VISIBLE_DEVICES`` alone then, and GPU 0 would be shared behind its back.
    """
    share = float(resources.get("GPU", 0.0)) if gpu_ids else 0.0
    return TrialDevice("cuda" if gpu_ids else "cpu", min(share, 1.0), max(1, int(resources.get("CPU", 1))))


def run_trial(config: dict[str, Any]) -> None:
    """Train the trial Ray Tune carries (``trial_config.tune_config``: the ledger's ``TrialSpec``) where Ray
    placed it, reporting each evaluation to Ray Tune (``train_trial`` does the work)."""
    import ray  # here: ``train_trial`` runs without Ray (benchmarks.first_trials)
    from ray import tune

    placement = trial_device(ray.get_gpu_ids(), ray.get_runtime_context().get_assigned_resources())
    train_trial(spec_of(config), placement, report=lambda step, metrics: tune.report(metrics))


def train_trial(spec: TrialSpec, placement: TrialDevice, *, report: Report | None = None) -> TrainResult:
    """Train one trial the ledger asked on the device of its placement.

    Args:
        spec: The trial (its task's ``metrics`` join each report: a language model's bits per byte).
        placement: Where it trains.
        report: Called with each evaluation's ``(step, metrics)``.

    Returns:
        The last evaluation's metrics, the task's among them.

    Raises:
        trainers.memory.TrainingOutOfMemoryError: the trial went over its budget, or out
            of a GPU of its own.
        studies.engine.trial_errors.SharedGPUOutOfMemoryError: out of its share of a GPU (a retry may fit).
        trainers.train.NonFiniteLossError: the loss diverged (the step is named).
    """
    # A float sum's order follows the thread count, and 3000 steps turn 1e-7 into a different model: a trial
    # trains on the threads it asked for, whatever the environment says (OMP_NUM_THREADS), so that a
    # configuration on a seed gives the same numbers in every run.
    torch.set_num_threads(placement.cpus)
    if spec.train.compile:
        use_compile_settings(Path(spec.compile_cache_dir), placement.cpus)
    if placement.device == "cuda":
        torch.cuda.init()  # the CUDA context is set-up, not the trial's memory: made before the budget applies
        if placement.gpu_share < 1.0:  # neighbours share the GPU: keep to this trial's part
            torch.cuda.set_per_process_memory_fraction(placement.gpu_share)
    task = spec.task
    splits = task.load(Path(spec.cache_dir))

    def report_with_task_metrics(step: int, metrics: dict[str, Any]) -> None:
        report(step, metrics | task.metrics(metrics))

    try:
        with memory_budget(spec.memory_bytes):
            result = train(
                ModelConfig(**spec.model),
                replace(spec.train, device=placement.device),
                splits,
                report=None if report is None else report_with_task_metrics,
            )
            return TrainResult(result.metrics | task.metrics(result.metrics))
    except TrainingOutOfMemoryError as error:
        if error.on_gpu and placement.gpu_share < 1.0:  # a neighbour may have held the memory: a retry may fit
            raise SharedGPUOutOfMemoryError(error.detail, True, error.budget_bytes, placement.gpu_share) from error
        raise
