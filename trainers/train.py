"""One training run: a plain loop whose only hook is ``report(step, metrics)``.

The loop knows no database and no scheduler. A caller that wants to stop a run early
stops calling it (Ray Tune does) or raises from ``report``.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.costs import Flops, count_parameters, device_name, model_flops, peak_flops, peak_memory
from trainers.data.batches import iterate_batches, iterate_pair_batches
from trainers.data.recall import IGNORE
from trainers.models import build_model

PRECISIONS = ("fp32", "bf16")
COMPILE_CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"
Report = Callable[[int, dict[str, float | int | str | bool]], None]


@dataclass(frozen=True)
class TrainConfig:
    """How a model is trained; together with its ``ModelConfig`` and data, a run is exact.

    Attributes:
        steps: Optimizer steps.
        batch_size: Examples per step.
        learning_rate: Peak AdamW learning rate (linear warm-up, then cosine decay to 10%).
        weight_decay: AdamW weight decay.
        warmup_steps: Steps of linear warm-up.
        eval_every: Steps between validation passes (and reports); the last step always reports.
        eval_examples: Validation examples per pass (None: the whole split).
        seed: Seeds the initial weights and the batch order.
        device: ``cpu``, ``cuda``, ``cuda:1`` ... or ``auto`` (CUDA when there is one).
        precision: ``fp32``, or ``bf16`` (autocast; weights and optimizer stay fp32).
        compile: Compile the model with ``torch.compile`` (cache in ``$TORCHINDUCTOR_CACHE_DIR``,
            by default ``runs/torch-compile-cache``, kept between runs).
    """

    steps: int = 200
    batch_size: int = 32
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 20
    eval_every: int = 50
    eval_examples: int | None = None
    seed: int = 0
    device: str = "auto"
    precision: str = "fp32"
    compile: bool = False

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision={self.precision!r} is not allowed; allowed: {', '.join(PRECISIONS)}")
        for name in ("steps", "batch_size", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate={self.learning_rate} must be > 0")

    def report_steps(self) -> list[int]:
        """The steps after which the run evaluates and reports."""
        steps = list(range(self.eval_every, self.steps + 1, self.eval_every))
        return steps if steps and steps[-1] == self.steps else [*steps, self.steps]


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite; the message names the step."""


@dataclass(frozen=True)
class TrainResult:
    """The outcome of a finished run: the last report's metrics."""

    metrics: dict[str, float | int | str | bool]


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; anything else as given."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _batches(split, config: ModelConfig, batch_size: int, *, seed: int, shuffle: bool) -> Iterator[dict[str, Tensor]]:
    iterate = iterate_pair_batches if config.architecture == "pair" else iterate_batches
    return iterate(split, batch_size, seed=seed, shuffle=shuffle)


def _endless_batches(split, config: ModelConfig, batch_size: int, seed: int) -> Iterator[dict[str, Tensor]]:
    """Training batches, epoch after epoch, each epoch in its own seeded order."""
    epoch = 0
    while True:
        yield from _batches(split, config, batch_size, seed=seed * 100_003 + epoch, shuffle=True)
        epoch += 1


def _logits_and_labels(model: nn.Module, config: ModelConfig, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    """Flat (N, C) logits and (N,) labels; positions labelled ``IGNORE`` are left out by the loss."""
    if config.architecture == "pair":
        logits = model(batch["tokens1"], batch["padding_mask1"], batch["tokens2"], batch["padding_mask2"])  # (B, C)
        return logits, batch["labels"]
    logits = model(batch["tokens"], batch["padding_mask"])  # (B, C) or (B, T, V)
    return logits.reshape(-1, logits.shape[-1]), batch["labels"].reshape(-1)


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bf16 autocast on the device, or nothing for fp32."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def compiled(model: nn.Module) -> nn.Module:
    """``torch.compile`` with a persistent cache (first compile of a model takes seconds; later ones reuse it).

    Dynamic shapes: length-bucketed batches change the sequence length from step to step.
    """
    os.environ.setdefault(COMPILE_CACHE_VARIABLE, str(Path("runs/torch-compile-cache").resolve()))
    return torch.compile(model, dynamic=True)


def adamw(model: nn.Module, config: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    """AdamW, with the fused kernel where this PyTorch has one for the device."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    try:
        return torch.optim.AdamW(parameters, lr=config.learning_rate, weight_decay=config.weight_decay, fused=device.type in ("cuda", "cpu"))
    except (RuntimeError, ValueError):  # no fused kernel for this device or dtype
        return torch.optim.AdamW(parameters, lr=config.learning_rate, weight_decay=config.weight_decay)


def _to(batch: dict[str, Tensor], device: torch.device) -> dict[str, Tensor]:
    return {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}


@torch.no_grad()
def evaluate(model: nn.Module, config: ModelConfig, split, *, batch_size: int, device: torch.device) -> float:
    """Accuracy over a split (over labelled positions for the decoder)."""
    model.eval()
    correct = total = 0
    for batch in _batches(split, config, batch_size, seed=0, shuffle=False):
        logits, labels = _logits_and_labels(model, config, _to(batch, device))
        counted = labels != IGNORE
        correct += int((logits.argmax(dim=-1) == labels)[counted].sum())
        total += int(counted.sum())
    model.train()
    return correct / max(total, 1)


def _learning_rate_factor(step: int, config: TrainConfig) -> float:
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(config.steps - config.warmup_steps, 1)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def train(model_config: ModelConfig, train_config: TrainConfig, splits, *, report: Report | None = None) -> TrainResult:
    """Train a model and report validation accuracy and costs as it goes.

    Args:
        model_config: The model.
        train_config: Steps, optimizer, evaluation schedule, seed and device.
        splits: ``train`` and ``val`` splits of a task (``trainers.data.tasks``).
        report: Called after each evaluation with ``(step, metrics)``; metrics hold
            ``step``, ``val_accuracy``, ``train_loss``, ``final`` (True on the last step),
            parameter counts, ``flops_per_example`` (forward, at ``max_length``),
            ``examples_per_s``, ``tokens_per_s``, ``flops_per_s`` (model FLOPs of the padded
            batches, analytic), ``model_flops_utilisation`` (of the device's peak; only where the
            peak is known, i.e. not on CPUs), ``peak_memory_bytes``, ``wall_seconds`` and ``device``.

    Returns:
        The last report's metrics.

    Raises:
        NonFiniteLossError: the loss became NaN or infinite (the step is named).
    """
    device = resolve_device(train_config.device)
    torch.manual_seed(train_config.seed)
    model = build_model(model_config).to(device)
    optimizer = adamw(model, train_config, device)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: _learning_rate_factor(step, train_config))
    validation = splits["val"]
    if train_config.eval_examples is not None and train_config.eval_examples < validation.num_rows:
        validation = validation.select(range(train_config.eval_examples))
    parameters = count_parameters(model)
    if train_config.compile:
        model = compiled(model)
    static = {
        "parameters": parameters.total,
        "attention_parameters": parameters.attention,
        "flops_per_example": model_flops(model_config, model_config.max_length).forward,
        "device": device_name(device),
    }

    start = time.perf_counter()
    training_seconds, examples, tokens, flops, peak_bytes, loss_sum, loss_count = 0.0, 0, 0, 0, 0, 0.0, 0
    peak = peak_flops(device, train_config.precision)
    flops_by_length: dict[int, Flops] = {}
    report_steps = set(train_config.report_steps())
    batches = _endless_batches(splits["train"], model_config, train_config.batch_size, train_config.seed)
    metrics: dict[str, float | int | str | bool] = {}
    for step in range(1, train_config.steps + 1):
        batch = _to(next(batches), device)
        step_start = time.perf_counter()
        # Peak memory is measured on the second step: the first allocates optimizer state.
        with peak_memory(device) if step == 2 else contextlib.nullcontext({"bytes": 0}) as memory:
            with autocast(device, train_config.precision):
                logits, labels = _logits_and_labels(model, model_config, batch)
                loss = F.cross_entropy(logits.float(), labels, ignore_index=IGNORE)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
        if step == 2:
            peak_bytes = memory["bytes"]
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        training_seconds += time.perf_counter() - step_start
        masks = [mask for name, mask in batch.items() if name.startswith("padding_mask")]
        examples += len(batch["labels"])
        tokens += sum(int(mask.sum()) for mask in masks)
        length = max(mask.shape[1] for mask in masks)
        if length not in flops_by_length:  # bucketed batches repeat few lengths
            flops_by_length[length] = model_flops(model_config, length)
        flops += flops_by_length[length].training_step(len(batch["labels"]))
        loss_value = float(loss.detach())
        if not math.isfinite(loss_value):  # stop here: every later step would be wasted
            raise NonFiniteLossError(f"training loss is {loss_value} at step {step} of {train_config.steps}")
        loss_sum, loss_count = loss_sum + loss_value, loss_count + 1
        if step in report_steps:
            with autocast(device, train_config.precision):
                accuracy = evaluate(model, model_config, validation, batch_size=2 * train_config.batch_size, device=device)
            metrics = static | {
                "step": step,
                "val_accuracy": accuracy,
                "train_loss": loss_sum / loss_count,
                "final": step == train_config.steps,
                "examples_per_s": examples / training_seconds,
                "tokens_per_s": tokens / training_seconds,
                "flops_per_s": flops / training_seconds,

                "peak_memory_bytes": peak_bytes,
                "wall_seconds": time.perf_counter() - start,
            }
            if peak:
                metrics["model_flops_utilisation"] = flops / training_seconds / peak
            loss_sum, loss_count = 0.0, 0
            if report is not None:
                report(step, metrics)
    return TrainResult(metrics=metrics)
