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
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from common.outputs import CHOSEN_COMPILE_CACHE, COMPILE_CACHE_DIR, COMPILE_CACHE_VARIABLE
from trainers.config import ModelConfig
from trainers.costs import Flops, count_parameters, model_flops
from trainers.data.batches import FixedShape, iterate_batches, iterate_pair_batches, rows_vary_in_length
from trainers.data.recall import IGNORE
from trainers.knob_declarations import knob
from trainers.measure import device_name, peak_flops, peak_memory
from trainers.models import build_model
from trainers.precisions import PRECISIONS
from trainers.torch_internals import compiled_graphs, fail_at_recompile_limit, recompile_limit_hit, set_compile_threads

COMPILE_THREADS_VARIABLE = "TORCHINDUCTOR_COMPILE_THREADS"
# A GPU trial's batches are built ahead by this many loader processes: at LRA lengths one took
# 7.5-12.6 ms a batch, about as long as a step of a small model on an H200.
LOADER_WORKERS = 2
COMPILE_BACKEND = "inductor"  # torch.compile's backend (tests set aot_eager: the same graphs, compiled in a fraction of the time)
Report = Callable[[int, dict[str, float | int | str | bool]], None]


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


def _batches(
    split,
    config: ModelConfig,
    batch_size: int,
    *,
    seed: int,
    shuffle: bool,
    shape: FixedShape | None = None,
    share: tuple[int, int] = (0, 1),
) -> Iterator[dict[str, Tensor]]:
    """A pass's batches (``trainers.data.batches``), in the fixed shape where one is given."""
    iterate = iterate_pair_batches if config.architecture == "pair" else iterate_batches
    batches = iterate(split, batch_size, seed=seed, shuffle=shuffle, share=share)
    return batches if shape is None else map(shape.fit, batches)


def _endless_batches(
    split, config: ModelConfig, batch_size: int, seed: int, shape: FixedShape | None = None, share: tuple[int, int] = (0, 1)
) -> Iterator[dict[str, Tensor]]:
    """Training batches, epoch after epoch, each epoch in its own seeded order.

    Args:
        share: ``(k, n)``: batches k, k + n ... of the endless sequence (the k-th of n loader workers),
            counted across epochs, so that n workers taken in turn give the one worker's order.
    """
    worker, workers = share
    per_epoch = -(-split.num_rows // batch_size)  # every sorting window but the last holds whole batches
    epoch = 0
    while True:
        first = (worker - epoch * per_epoch) % workers
        yield from _batches(
            split, config, batch_size, seed=seed * 100_003 + epoch, shuffle=True, shape=shape, share=(first, workers)
        )
        epoch += 1


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


def compile_cache_dir() -> Path:
    """The absolute folder of ``torch.compile``'s cache: ``$TORCHINDUCTOR_CACHE_DIR`` as the user set it
    (``common.outputs.CHOSEN_COMPILE_CACHE``: torch sets it to its own default on import), else
    ``runs/torch-compile-cache`` under the working directory (resolve it where the runs share it: a
    study's driver, not each trial's own working directory)."""
    return Path(CHOSEN_COMPILE_CACHE or COMPILE_CACHE_DIR).resolve()


def use_compile_settings(cache_dir: Path, threads: int) -> None:
    """Point ``torch.compile`` at a shared cache and give it ``threads`` compile workers (a
    trial's CPUs: more would take its neighbours' cores)."""
    os.environ[COMPILE_CACHE_VARIABLE] = str(cache_dir)
    os.environ[COMPILE_THREADS_VARIABLE] = str(threads)
    set_compile_threads(threads)  # the variable is read at import: set it too for a worker that compiled before


def compiled(model: nn.Module) -> nn.Module:
    """``torch.compile`` with a persistent cache (first compile of a model takes seconds; later ones reuse it).

    The process's compiled code is reset first: a trial's graphs are its own, whatever trials its
    worker ran before (a reused Ray worker's earlier graphs once took it to the recompile limit).
    At the limit a trial fails (``RecompileLimitError``) rather than going on uncompiled.

    Dynamic shapes: length-bucketed batches change the sequence length from step to step.
    Inductor's coalescing analysis of GPU kernels is off: with dynamic shapes it failed an
    internal assertion compiling DAMCHA on an H200 (PyTorch 2.11), and its own notes say
    it does not apply to dynamic shapes.
    """
    if not CHOSEN_COMPILE_CACHE:  # torch's own default, which importing it put there, is no one's choice
        os.environ[COMPILE_CACHE_VARIABLE] = str(compile_cache_dir())
    torch.compiler.reset()
    fail_at_recompile_limit()
    if COMPILE_BACKEND != "inductor":  # the tests' quicker backends take no inductor options
        return torch.compile(model, dynamic=True, backend=COMPILE_BACKEND)
    return torch.compile(model, dynamic=True, options={"triton.coalesce_tiling_analysis": False})


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """The model's trainable parameters, with weight decay on the matrices of linear maps only.

    Biases, LayerNorm gains and embeddings (token, position, CLS; the decoder's output layer
    shares the token embedding) are not decayed: shrinking them towards zero is no
    regularisation (nanoGPT's ``configure_optimizers``).

    Args:
        model: The model.
        weight_decay: AdamW's decay for the decayed group.

    Returns:
        Two AdamW parameter groups: decayed, then not decayed.
    """
    embeddings = {id(p) for module in model.modules() if isinstance(module, nn.Embedding) for p in module.parameters()}
    decayed, kept = [], []
    for parameter in model.parameters():
        if parameter.requires_grad:
            (decayed if parameter.dim() >= 2 and id(parameter) not in embeddings else kept).append(parameter)
    return [{"params": decayed, "weight_decay": weight_decay}, {"params": kept, "weight_decay": 0.0}]


def adamw(model: nn.Module, config: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    """AdamW over ``parameter_groups``, with the fused kernel where this PyTorch has one for the device."""
    groups = parameter_groups(model, config.weight_decay)
    try:
        return torch.optim.AdamW(groups, lr=config.learning_rate, fused=device.type in ("cuda", "cpu"))
    except (RuntimeError, ValueError):  # no fused kernel for this device or dtype
        return torch.optim.AdamW(groups, lr=config.learning_rate)


def _to(batch: dict[str, Tensor], device: torch.device, *, keep_masks: bool = False) -> dict[str, Tensor | None]:
    """The batch on ``device``. A padding mask without padding becomes None (unless ``keep_masks``),
    so that attention runs without a mask (FlashAttention takes none); it is read on the host, so
    no GPU work waits for it."""
    return {
        name: None
        if not keep_masks and name.startswith("padding_mask") and bool(tensor.all())
        else tensor.to(device, non_blocking=True)
        for name, tensor in batch.items()
    }


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
    for batch in _batches(split, config, batch_size, seed=0, shuffle=False, shape=shape):
        logits, labels = logits_and_labels(model, config, _to(batch, device, keep_masks=keep_masks))  # (N, C), (N,)
        counted = labels != IGNORE
        correct += int((logits.argmax(dim=-1) == labels)[counted].sum())
        total += int(counted.sum())
        loss_sum += F.cross_entropy(logits.float(), labels, ignore_index=IGNORE, reduction="sum").double()
    model.train()
    return Evaluation(correct / max(total, 1), total, float(loss_sum) / max(total, 1))


def _learning_rate_factor(step: int, config: TrainConfig) -> float:
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(config.steps - config.warmup_steps, 1)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


class _TrainBatches(torch.utils.data.IterableDataset):
    """The endless, seeded training batches, for a ``DataLoader`` that builds them in its workers,
    each worker its share of them (``_endless_batches``)."""

    def __init__(self, split, config: ModelConfig, batch_size: int, seed: int, shape: FixedShape | None) -> None:
        super().__init__()
        self.split, self.config, self.batch_size, self.seed, self.shape = split, config, batch_size, seed, shape

    def __iter__(self) -> Iterator[dict[str, Tensor]]:
        worker = torch.utils.data.get_worker_info()
        share = (0, 1) if worker is None else (worker.id, worker.num_workers)
        return _endless_batches(self.split, self.config, self.batch_size, self.seed, self.shape, share)


def training_batches(
    split,
    config: ModelConfig,
    batch_size: int,
    seed: int,
    device: torch.device,
    shape: FixedShape | None = None,
    *,
    workers: int = LOADER_WORKERS,
) -> Iterator[dict[str, Tensor]]:
    """The training batches, in the fixed shape where one is given. On a GPU ``workers`` processes
    build them ahead of the step, in pinned memory, so that the GPU does not wait for the CPU (the
    order is one process's); on a CPU they are built in line (a worker would take a core from the trial)."""
    batches = _TrainBatches(split, config, batch_size, seed, shape)
    if device.type != "cuda":
        return iter(batches)
    loader = torch.utils.data.DataLoader(batches, batch_size=None, num_workers=workers, pin_memory=True, prefetch_factor=8)
    return iter(loader)


class RecompileLimitError(RuntimeError):
    """``torch.compile`` reached its recompile limit: the trial would have gone on uncompiled, its
    throughput no longer the compiled model's, so it stops instead (the message says where and what to do)."""


class _Compilation:
    """A compiled trial's graphs: how many it compiled, and the seconds they took, which its
    throughput leaves out (the warm-up's, and any step's that compiled a graph)."""

    def __init__(self) -> None:
        self.start = compiled_graphs()  # other trials' graphs in this process (the count never goes down)
        self.warmed = self.start
        self.seconds = 0.0

    def graphs(self) -> int:
        """Graphs this trial compiled."""
        return compiled_graphs() - self.start

    def recompiles(self) -> int:
        """Graphs compiled after the warm-up: none where the fixed shapes hold."""
        return compiled_graphs() - self.warmed


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


class _PeakMemory:
    """A run's peak memory, measured without wrapping a compiled model in a dispatch mode
    (Dynamo would stop compiling the frames it saw under one, for good).

    On CUDA: the caching allocator's peak over the whole run, above the memory in use at
    the start. On CPU: the live-tensor tracker (``trainers.measure.peak_memory``) around the
    eager model, on each step whose batch is longer than every one measured before
    (bucketed batches grow the peak only with their length, and there are few such steps).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.bytes = 0
        self.longest = 0
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            self.start = torch.cuda.memory_allocated(device)

    def wants(self, length: int) -> bool:
        """Whether the step with a batch of ``length`` positions is measured (CPU only)."""
        if self.device.type == "cuda" or length <= self.longest:
            return False
        self.longest = length
        return True

    @contextlib.contextmanager
    def measuring(self, optimizer: torch.optim.Optimizer) -> Iterator[None]:
        """Measure the enclosed step; optimizer state made by an earlier step counts too (on
        CUDA it is part of the allocator's peak)."""
        state = sum(t.nbytes for values in optimizer.state.values() for t in values.values() if isinstance(t, Tensor))
        with peak_memory(self.device) as memory:
            yield
        self.bytes = max(self.bytes, state + memory["bytes"])

    def peak(self) -> int:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) - self.start
        return self.bytes


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
        if train_config.compile and isinstance(error, recompile_limit_hit()):
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
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: _learning_rate_factor(step, train_config))
    validation = splits["val"]
    if train_config.eval_examples is not None and train_config.eval_examples < validation.num_rows:
        validation = validation.select(range(train_config.eval_examples))
    parameters = count_parameters(model)
    stepped = compiled(model) if train_config.compile else model  # `model` stays the eager module (memory steps)
    compilation = _Compilation() if train_config.compile else None
    fixed = train_config.compile or device.type == "cuda"
    training_shape, evaluation_shape = _fixed_shapes(model_config, train_config, splits) if fixed else (None, None)
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
    memory = _PeakMemory(device)
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
        evaluated = next(_batches(validation, model_config, evaluation_batch, seed=0, shuffle=False, shape=evaluation_shape))
        warm_up_start = time.perf_counter()
        warm_up_batches = (_to(batch, device, keep_masks=keep_masks), _to(evaluated, device, keep_masks=keep_masks))
        _warm_up(model, stepped, model_config, warm_up_batches, train_config.precision)
        synchronize()
        compilation.seconds, compilation.warmed = time.perf_counter() - warm_up_start, compiled_graphs()
    interval_start, excluded_seconds = time.perf_counter(), 0.0  # excluded: steps that compiled, in this interval
    for step in range(1, train_config.steps + 1):
        batch = batch if step == 1 else next(batches)
        step_start, graphs_before = time.perf_counter(), compiled_graphs() if compilation else 0
        # Rows with a label that counts: a fixed shape's added rows (copies of a real one) have none.
        rows = int((batch["labels"] != IGNORE).reshape(len(batch["labels"]), -1).any(dim=1).sum())
        length = max(mask.shape[1] for name, mask in batch.items() if name.startswith("padding_mask"))
        batch_tokens = sum(int(mask[:rows].sum()) for name, mask in batch.items() if name.startswith("padding_mask"))
        batch = _to(batch, device, keep_masks=keep_masks)
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
                "val_accuracy": evaluation.accuracy,
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


def _fixed_shapes(model_config: ModelConfig, train_config: TrainConfig, splits) -> tuple[FixedShape, FixedShape]:
    """The fixed shapes of the training and evaluation batches of a compiled run or a run on a GPU.

    On a GPU eager runs take them too: cuDNN attention plans each new shape, and the padding costs about
    3% (a ``full`` MHA trial on an H200: 676 examples/s with them; docs/benchmarks.md). Masks that mask
    nothing are kept for a compiled model only (one graph); eager kernels run faster without one. CPU
    runs without compile keep their batches as built (the committed truth tables were trained so).
    """
    keep_masks = train_config.compile and rows_vary_in_length(splits["train"])
    return (
        FixedShape(rows=train_config.batch_size, max_length=model_config.max_length, keep_masks=keep_masks),
        FixedShape(rows=2 * train_config.batch_size, max_length=model_config.max_length, keep_masks=keep_masks),
    )
