"""One training run: a plain loop whose only hook is ``report(step, metrics)``.

The loop knows no database and no scheduler. A caller that wants to stop a run early
stops calling it (Ray Tune does) or raises from ``report``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trainers.compilation import CompiledGraphs, RecompileLimitError, compiled, is_recompile_limit
from trainers.config import ModelConfig
from trainers.costs import Flops, count_parameters, model_flops
from trainers.data.batches import FixedShape
from trainers.data.recall import IGNORE
from trainers.knob_declarations import knob
from trainers.measure import RunPeakMemory, device_name, peak_flops
from trainers.models import build_model
from trainers.optimizer import adamw, learning_rate_factor
from trainers.precisions import PRECISIONS
from trainers.step_batches import batches_of, fixed_shapes, on_device, training_batches
from trainers.torch_internals import compiled_graphs

Report = Callable[[int, dict[str, float | int | str | bool]], None]
VAL_ACCURACY = "val_accuracy"  # the report's validation accuracy: classification searches' first objective


@dataclass(frozen=True)
class TrainConfig:
    """How a model is trained; together with its ``ModelConfig`` and data, a run is exact.

    Attributes:
        steps: Optimizer steps.
        batch_size: Examples per step.
        learning_rate: Peak AdamW learning rate (linear warm-up, then cosine decay to 10%).
        weight_decay: AdamW weight decay, on linear maps' weight matrices only (``parameter_groups``).
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
    learning_rate: float = knob(1e-3, low=1e-5, high=1e-1, log=True, help="peak AdamW learning rate")
    weight_decay: float = knob(0.01, low=0.0, high=0.5, help="AdamW weight decay")
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
    """The training loss became NaN or infinite.

    Attributes:
        loss: The first non-finite loss.
        step: The step that produced it.
        steps: The run's planned steps.
    """

    def __init__(self, loss: float, step: int, steps: int) -> None:
        super().__init__(loss, step, steps)  # the arguments are what pickling (across Ray) keeps
        self.loss, self.step, self.steps = loss, step, steps

    def __str__(self) -> str:
        return f"training loss is {self.loss} at step {self.step} of {self.steps}"


@dataclass(frozen=True)
class Work:
    """Training work done: examples, real (non-padding) tokens and FLOPs, and the seconds it took (when timed)."""

    examples: int = 0
    tokens: int = 0
    flops: float = 0.0
    seconds: float = 0.0

    def plus(self, other: Work) -> Work:
        """Both amounts of work together (time is added where it is measured, not here)."""
        return Work(self.examples + other.examples, self.tokens + other.tokens, self.flops + other.flops, self.seconds)


@dataclass(frozen=True)
class TrainResult:
    """The outcome of a finished run: the last report's metrics."""

    metrics: dict[str, float | int | str | bool]


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; anything else as given."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def logits_and_labels(model: nn.Module, config: ModelConfig, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
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


@dataclass(frozen=True)
class Evaluation:
    """One validation pass.

    Attributes:
        accuracy: Share of predictions that are right (examples; for the decoder, labelled positions).
        count: How many predictions it counts.
        loss: Mean cross-entropy per counted prediction, in nats.
    """

    accuracy: float
    count: int
    loss: float


@torch.no_grad()
def evaluate(
    model: nn.Module, config: ModelConfig, split, *, batch_size: int, device: torch.device, shape: FixedShape | None = None
) -> Evaluation:
    """Accuracy and loss over a split (over labelled positions for the decoder), in batches of the
    fixed shape where one is given (its added rows and positions count nowhere)."""
    model.eval()
    correct = total = 0
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    keep_masks = shape is not None and shape.keep_masks
    for batch in batches_of(split, config, batch_size, seed=0, shuffle=False, shape=shape):
        logits, labels = logits_and_labels(model, config, on_device(batch, device, keep_masks=keep_masks))  # (N, C), (N,)
        counted = labels != IGNORE
        correct += int((logits.argmax(dim=-1) == labels)[counted].sum())
        total += int(counted.sum())
        loss_sum += F.cross_entropy(logits.float(), labels, ignore_index=IGNORE, reduction="sum").double()
    model.train()
    return Evaluation(correct / max(total, 1), total, float(loss_sum) / max(total, 1))


def _warm_up(
    model: nn.Module,
    stepped: nn.Module,
    model_config: ModelConfig,
    batches: tuple[dict[str, Tensor | None], dict[str, Tensor | None]],
    precision: str,
) -> None:
    """Compile the training and the evaluation graphs before any step is timed: a forward and
    backward pass on a training batch, a no-grad pass in evaluation mode on an evaluation batch.
    The weights, the optimizer and the random state are left as they were: the run trains as without it.

    Args:
        model: The eager module (whose gradients are cleared after).
        stepped: The compiled model.
        model_config: The model's configuration.
        batches: A training batch and an evaluation batch, on the device, in their fixed shapes.
        precision: The run's precision.
    """
    training, evaluation = batches
    device = next(model.parameters()).device
    with torch.random.fork_rng():  # the CPU's and every visible GPU's generators
        with autocast(device, precision):
            logits, labels = logits_and_labels(stepped, model_config, training)
            loss = F.cross_entropy(logits.float(), labels, ignore_index=IGNORE)
        loss.backward()
        model.zero_grad(set_to_none=True)
        stepped.eval()
        with torch.no_grad(), autocast(device, precision):
            logits_and_labels(stepped, model_config, evaluation)
        stepped.train()


def train(model_config: ModelConfig, train_config: TrainConfig, splits, *, report: Report | None = None) -> TrainResult:
    """Train a model and report validation accuracy and costs as it goes.

    Args:
        model_config: The model.
        train_config: Steps, optimizer, evaluation schedule, seed and device.
        splits: ``train`` and ``val`` splits of a task (``trainers.data.loaders``), and ``test``, which
            the last report scores (``test_accuracy``, ``test_count``, ``test_loss``) and nothing else reads.
        report: Called after each evaluation with ``(step, metrics)``; metrics hold
            ``step``, ``val_accuracy``, ``val_count`` (the predictions it counts),
            ``val_loss`` (mean cross-entropy per counted prediction, nats), ``train_loss``,
            ``final`` (True on the last step), parameter counts,
            ``flops_per_example`` (forward, at ``max_length``), ``examples_per_s``,
            ``tokens_per_s``, ``flops_per_s`` (model FLOPs of the padded batches, analytic),
            ``model_flops_utilisation`` (of the device's peak; only where the peak is known,
            i.e. not on CPUs), ``compile_seconds`` (compiling the model's graphs: the warm-up
            before the first step and any step that compiled; 0 without compile),
            ``compiled_graphs`` and ``recompiles`` (graphs compiled in all, and after the warm-up;
            compiled runs only), ``peak_memory_bytes`` (over the run), ``wall_seconds`` and
            ``device``. The throughputs leave out the first step (optimizer state), unless it is
            the only one, and every second spent compiling.

    A compiled run's batches take fixed shapes (``trainers.data.batches.FixedShape``) and its
    graphs are compiled before the first step, so that it compiles a known, small number of
    graphs (one for training, one for evaluation) and none while it is timed.

    Returns:
        The last report's metrics.

    Raises:
        NonFiniteLossError: the loss became NaN or infinite (the step is named). On a GPU
            the check waits for the next report, so that no step waits for the GPU.
        RecompileLimitError: a compiled run reached ``torch.compile``'s recompile limit.
    """
    try:
        return _train(model_config, train_config, splits, report)
    except Exception as error:
        if train_config.compile and is_recompile_limit(error):
            raise RecompileLimitError(
                f"torch.compile reached its recompile limit in this trial ({error}); it stops rather than train "
                "uncompiled from here on. TORCH_LOGS=recompiles names the guard that failed; --no-compile trains eagerly"
            ) from error
        raise


def _train(model_config: ModelConfig, train_config: TrainConfig, splits, report: Report | None) -> TrainResult:
    """``train``'s work."""
    device = resolve_device(train_config.device)
    if device.type == "cuda" and train_config.precision == "fp32":
        # fp32 matrix products on tensor cores (TF32), as the fp32 peak in trainers.costs assumes.
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(train_config.seed)
    model = build_model(model_config).to(device)
    optimizer = adamw(model, train_config, device)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: learning_rate_factor(step, train_config))
    validation = splits["val"]
    if train_config.eval_examples is not None and train_config.eval_examples < validation.num_rows:
        validation = validation.select(range(train_config.eval_examples))
    parameters = count_parameters(model)
    stepped = compiled(model) if train_config.compile else model  # `model` stays the eager module (memory steps)
    compilation = CompiledGraphs() if train_config.compile else None
    training_shape, evaluation_shape = (
        fixed_shapes(model_config, train_config.batch_size, train_config.compile, splits)
        if train_config.compile or device.type == "cuda"
        else (None, None)
    )
    keep_masks = training_shape is not None and training_shape.keep_masks
    evaluation_batch = 2 * train_config.batch_size
    static = {
        "parameters": parameters.total,
        "attention_parameters": parameters.attention,
        "flops_per_example": model_flops(model_config, model_config.max_length).forward,
        "device": device_name(device),
    }

    def synchronize() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    start = time.perf_counter()
    memory = RunPeakMemory(device)
    training_seconds, after_first = 0.0, Work()  # after_first: work after step 1, untimed
    loss_sum, loss_count = torch.zeros((), device=device), 0
    first_bad_step, first_bad_loss = torch.zeros((), dtype=torch.long, device=device), torch.zeros((), device=device)
    peak = peak_flops(device, train_config.precision)
    flops_by_length: dict[int, Flops] = {}
    report_steps = set(train_config.report_steps())
    batches = training_batches(splits["train"], model_config, train_config.batch_size, train_config.seed, device, training_shape)
    metrics: dict[str, float | int | str | bool] = {}
    batch = next(batches)
    if compilation is not None:
        evaluated = next(batches_of(validation, model_config, evaluation_batch, seed=0, shuffle=False, shape=evaluation_shape))
        warm_up_start = time.perf_counter()
        warm_up_batches = (on_device(batch, device, keep_masks=keep_masks), on_device(evaluated, device, keep_masks=keep_masks))
        _warm_up(model, stepped, model_config, warm_up_batches, train_config.precision)
        synchronize()
        compilation.warmed_up(time.perf_counter() - warm_up_start)
    interval_start, excluded_seconds = time.perf_counter(), 0.0  # excluded: steps that compiled, in this interval
    for step in range(1, train_config.steps + 1):
        batch = batch if step == 1 else next(batches)
        step_start, graphs_before = time.perf_counter(), compiled_graphs() if compilation else 0
        rows = len(batch["labels"]) if training_shape is None else training_shape.real_rows(batch)
        length = max(mask.shape[1] for name, mask in batch.items() if name.startswith("padding_mask"))
        batch_tokens = sum(int(mask[:rows].sum()) for name, mask in batch.items() if name.startswith("padding_mask"))
        batch = on_device(batch, device, keep_masks=keep_masks)
        # A compiled run's first step runs the compiled model; its memory is measured from step 2 on.
        measured = not (step == 1 and train_config.compile) and memory.wants(length)
        with memory.measuring(optimizer) if measured else contextlib.nullcontext():
            with autocast(device, train_config.precision):
                logits, labels = logits_and_labels(model if measured else stepped, model_config, batch)
                loss = F.cross_entropy(logits.float(), labels, ignore_index=IGNORE)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
        loss = loss.detach()  # stays on the device: no step waits for the GPU
        newly_bad = ~torch.isfinite(loss) & (first_bad_step == 0)
        first_bad_step = torch.where(newly_bad, step, first_bad_step)
        first_bad_loss = torch.where(newly_bad, loss, first_bad_loss)
        loss_sum, loss_count = loss_sum + loss, loss_count + 1
        if step == 1 or step in report_steps or device.type != "cuda":  # a CPU step costs nothing to check
            if bad_step := int(first_bad_step):  # stop here: every later step would be wasted
                raise NonFiniteLossError(float(first_bad_loss), int(bad_step), train_config.steps)
        if length not in flops_by_length:  # bucketed batches repeat few lengths
            flops_by_length[length] = model_flops(model_config, length)
        done = Work(rows, batch_tokens, flops_by_length[length].training_step(rows))
        recompiled = compilation is not None and compiled_graphs() != graphs_before
        if step == 1 or recompiled:  # optimizer state, or compiling: kept out of the throughput
            synchronize()  # (on a GPU, a recompiling step's time may hold a few earlier steps' last kernels)
            elapsed = time.perf_counter() - step_start
            if recompiled:
                compilation.seconds += elapsed
            if step == 1:
                first_step = replace(done, seconds=elapsed)
                interval_start = time.perf_counter()
            else:
                excluded_seconds += elapsed
        else:
            after_first = after_first.plus(done)
        if step in report_steps:
            synchronize()
            training_seconds += time.perf_counter() - interval_start - excluded_seconds
            # Until a step after the first has run, the first is all there is to measure.
            counted = replace(after_first, seconds=training_seconds) if after_first.examples else first_step
            seconds = counted.seconds
            with autocast(device, train_config.precision):
                evaluation = evaluate(
                    stepped, model_config, validation, batch_size=evaluation_batch, device=device, shape=evaluation_shape
                )
            metrics = static | {
                "step": step,
                VAL_ACCURACY: evaluation.accuracy,
                "val_count": evaluation.count,
                "val_loss": evaluation.loss,
                "train_loss": float(loss_sum) / loss_count,
                "final": step == train_config.steps,
                "examples_per_s": counted.examples / seconds,
                "tokens_per_s": counted.tokens / seconds,
                "flops_per_s": counted.flops / seconds,
                "compile_seconds": compilation.seconds if compilation else 0.0,
                "peak_memory_bytes": memory.peak(),
                "wall_seconds": time.perf_counter() - start,
            }
            if peak:
                metrics["model_flops_utilisation"] = counted.flops / seconds / peak
            if compilation is not None:
                metrics |= {"compiled_graphs": compilation.graphs(), "recompiles": compilation.recompiles()}
            if step == train_config.steps and "test" in splits:  # held out: scored once, by the trained model
                with autocast(device, train_config.precision):
                    test = evaluate(
                        stepped, model_config, splits["test"], batch_size=evaluation_batch, device=device, shape=evaluation_shape
                    )
                metrics |= {"test_accuracy": test.accuracy, "test_count": test.count, "test_loss": test.loss}
            loss_sum, loss_count = torch.zeros((), device=device), 0
            if report is not None:
                report(step, metrics)
            interval_start, excluded_seconds = time.perf_counter(), 0.0
    return TrainResult(metrics=metrics)
