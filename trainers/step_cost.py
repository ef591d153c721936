"""What one training step of a model costs on this machine's CPU, measured on a few real steps.

Used to plan a run before it starts (``python -m studies.run STUDY --plan``): the inputs are
random tokens, so nothing is read or built; the peak memory is measured at the model's longest
input, the time at the length a training batch typically has.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from trainers.config import ModelConfig
from trainers.costs import model_flops
from trainers.measure import peak_memory
from trainers.models import build_model
from trainers.optimizer import adamw
from trainers.train import TrainConfig, logits_and_labels

# A step above this many training FLOPs (a second or more on one CPU thread) is measured at
# batches of 1 and 2 examples and extrapolated: its cost is linear in the batch.
MEASURED_WHOLE_FLOPS = 2e10


@dataclass(frozen=True)
class StepCost:
    """One training step's cost at a batch size.

    Attributes:
        seconds: Wall time of a step on this CPU (the process's threads).
        peak_bytes: Parameters plus the peak a step allocates (activations, gradients, optimizer state).
        extrapolated: Measured at 1 and 2 examples and extended linearly to the batch (else measured at it).
    """

    seconds: float
    peak_bytes: int
    extrapolated: bool


def random_batch(
    config: ModelConfig, batch_size: int, generator: torch.Generator, length: int | None = None
) -> dict[str, Tensor]:
    """Random tokens at ``length`` (default ``config.max_length``; no padding) and random labels, shaped as the
    trainer's batches."""
    length = length or config.max_length

    def tokens() -> Tensor:
        return torch.randint(1, config.vocab_size, (batch_size, length), generator=generator)  # (B, T), 0 is padding

    mask = torch.ones(batch_size, length, dtype=torch.bool)  # (B, T) True = a real token
    if config.architecture == "decoder":
        return {"tokens": tokens(), "padding_mask": mask, "labels": tokens()}  # labels (B, T)
    labels = torch.randint(0, config.num_classes, (batch_size,), generator=generator)  # (B,)
    if config.architecture == "pair":
        return {"tokens1": tokens(), "padding_mask1": mask, "tokens2": tokens(), "padding_mask2": mask, "labels": labels}
    return {"tokens": tokens(), "padding_mask": mask, "labels": labels}


def _measure(config: ModelConfig, train: TrainConfig, batch_size: int, steps: int, timed_length: int) -> tuple[float, int]:
    """(seconds per step at ``timed_length`` after the first (NaN for no ``steps``), parameters + the first step's peak
    bytes at the longest input) at ``batch_size``."""
    torch.manual_seed(0)
    device = torch.device("cpu")
    model = build_model(config).to(device)
    optimizer = adamw(model, train, device)
    longest = random_batch(config, batch_size, torch.Generator().manual_seed(0))
    typical = random_batch(config, batch_size, torch.Generator().manual_seed(1), timed_length)

    def step(batch: dict[str, Tensor]) -> None:
        logits, labels = logits_and_labels(model, config, batch)  # (N, C), (N,)
        loss = F.cross_entropy(logits.float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    with peak_memory(device) as peak:  # the first step allocates the gradients and the optimizer's state too
        step(longest)
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    started = time.perf_counter()
    for _ in range(steps):
        step(typical)
    seconds = (time.perf_counter() - started) / steps if steps else math.nan
    return seconds, parameters + peak["bytes"]


def measure_step(config: ModelConfig, train: TrainConfig, *, steps: int = 3, timed_length: int | None = None) -> StepCost:
    """Time ``steps`` training steps of ``config`` at ``train.batch_size`` on the CPU, after one step at the longest
    input that measures the peak memory (a step too dear for that is measured at 1 and 2 examples and extrapolated).

    Args:
        config: The model.
        train: Its training settings (the batch size and optimizer are read; fp32 on the CPU).
        steps: Timed steps (0: the peak memory alone; ``seconds`` is NaN).
        timed_length: The inputs' length in the timed steps (default: the longest, ``config.max_length``).

    Returns:
        The step's time and peak memory.
    """
    timed_length = min(timed_length or config.max_length, config.max_length)
    batch = train.batch_size
    if model_flops(config, config.max_length).training_step(batch) <= MEASURED_WHOLE_FLOPS or batch <= 2:
        seconds, peak = _measure(config, train, batch, steps, timed_length)
        return StepCost(seconds, peak, extrapolated=False)
    (one_s, one_peak), (two_s, two_peak) = (_measure(config, train, size, min(steps, 1), timed_length) for size in (1, 2))
    per_example_s, per_example_bytes = max(two_s - one_s, 0.0), max(two_peak - one_peak, 0)
    return StepCost(one_s + (batch - 1) * per_example_s, one_peak + (batch - 1) * per_example_bytes, extrapolated=True)
