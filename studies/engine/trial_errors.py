"""Why a trial failed, from the exception its worker raised: its type and fields, never its text.

Ray Tune keeps the exception a trainable raised (wrapped in Ray's ``RayTaskError``, the
original as ``.cause``) or the ``RayActorError`` of a worker that died; ``failure_of``
turns either into a ``Failure`` that says what the ledger does next.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainers.memory import TrainingOutOfMemoryError
from trainers.train import NonFiniteLossError


class SharedGPUOutOfMemoryError(TrainingOutOfMemoryError):
    """Out of memory on a GPU that other trials share: a neighbour may have taken the memory.

    Attributes:
        gpu_share: The part of the GPU the trial had.
    """

    def __init__(self, detail: str, on_gpu: bool, budget_bytes: int | None, gpu_share: float) -> None:
        super().__init__(detail, on_gpu, budget_bytes)
        self.args = (detail, on_gpu, budget_bytes, gpu_share)  # what pickling keeps
        self.gpu_share = gpu_share

    def __str__(self) -> str:
        return f"{super().__str__()} (on a shared GPU, {self.gpu_share:g} of it)"


@dataclass(frozen=True)
class Failure:
    """What a failed trial's exception means for the study.

    Attributes:
        infeasible: Why the configuration itself cannot train (``diverged``, ``out of
            memory``), told to the sampler; None when the failure says nothing about it.
        retry: Run the configuration again (a dead worker; out of memory on a shared GPU,
            which is infeasible only once its retries are spent).
        fix: What the user can do, for the trial's ``error`` attribute ("" when nothing).
        diverged_at_step: The step whose loss was not finite.
    """

    infeasible: str | None = None
    retry: bool = False
    fix: str = ""
    diverged_at_step: int | None = None


def failure_of(error: BaseException | None) -> Failure:
    """Classify a trial's exception (as Ray Tune kept it) by type.

    Args:
        error: The exception, possibly Ray's wrapper of it, or None when Tune kept none.

    Returns:
        The ``Failure``; an unknown error is neither retried nor infeasible.
    """
    from ray.exceptions import OutOfMemoryError as RayOutOfMemoryError  # here: asking and recording trials needs no Ray
    from ray.exceptions import RayActorError

    cause = getattr(error, "cause", None) or error  # RayTaskError(original).cause is the original
    if isinstance(cause, NonFiniteLossError):
        return Failure(infeasible="diverged", diverged_at_step=cause.step, fix="search lower learning rates")
    if isinstance(cause, SharedGPUOutOfMemoryError):
        return Failure(infeasible="out of memory", retry=True, fix="give each trial a whole GPU (--gpus-per-trial 1)")
    if isinstance(cause, TrainingOutOfMemoryError):
        if cause.on_gpu:
            return Failure(infeasible="out of memory", fix="use a bigger GPU or search smaller models")
        if cause.budget_bytes is not None:
            return Failure(infeasible="out of memory", fix="raise --trial-memory or search smaller models")
        return Failure(infeasible="out of memory", fix="give each trial more memory or search smaller models")
    if isinstance(cause, RayOutOfMemoryError):  # Ray's memory monitor killed the worker
        return Failure(infeasible="out of memory", fix="set --trial-memory, so that trials fit side by side")
    if isinstance(cause, RayActorError):  # the worker process died (killed, crashed)
        return Failure(retry=True)
    return Failure()
