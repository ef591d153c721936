"""Cost accounting: parameters, analytic forward FLOPs, measured throughput and memory.

FLOPs count matrix products only (2 per multiply-add), as
``torch.utils.flop_counter.FlopCounterMode`` does; layer norms, softmax, GELU and
other element-wise work are left out. Fused attention is counted over the full T×T
score matrix even when causal (the counter's convention; FlashAttention skips the
masked half, so causal models do about ``2·T²·D`` fewer FLOPs per layer than stated).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.utils._python_dispatch
from torch import Tensor, nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop, sdpa_flop

from trainers.attention import MetricGenerator
from trainers.attention.metric import chunk_count
from trainers.config import ModelConfig

# The fused attention's backward recomputes the scores: the counter charges 2.5× its forward.
ATTENTION_CORE_BACKWARD_FACTOR = 2.5


@dataclass(frozen=True)
class ParameterCounts:
    """Parameter counts of a model.

    Attributes:
        total: All parameters.
        attention: Parameters of attention layers, their generators included.
        generator: Parameters of DAMCHA metric generators.
    """

    total: int
    attention: int
    generator: int


def count_parameters(model: nn.Module) -> ParameterCounts:
    """Count a model's parameters by role.

    Args:
        model: A model built by ``trainers.models.build_model`` (or any module).

    Returns:
        The counts.
    """

    def size(modules: list[nn.Module]) -> int:
        return sum(p.numel() for m in modules for p in m.parameters())

    attention = [m for name, m in model.named_modules() if name.endswith(".attention")]
    generators = [m for m in model.modules() if isinstance(m, MetricGenerator)]
    return ParameterCounts(total=size([model]), attention=size(attention), generator=size(generators))


@dataclass(frozen=True)
class Flops:
    """Forward FLOPs of one example, split by how their backward is counted.

    Attributes:
        dense: Every matrix product except the attention core (projections, MLPs,
            metric generation and application, output heads).
        attention_core: The fused ``softmax(Q Kᵀ) V`` products.
    """

    dense: int
    attention_core: int

    @property
    def forward(self) -> int:
        """Forward FLOPs per example."""
        return self.dense + self.attention_core

    def training_step(self, batch_size: int) -> int:
        """FLOPs of one training step (forward + backward) on ``batch_size`` examples.

        Backward is 2× forward for matrix products and 2.5× for the fused attention
        core, whose backward recomputes the scores.
        """
        per_example = 3 * self.dense + (1 + ATTENTION_CORE_BACKWARD_FACTOR) * self.attention_core
        return int(batch_size * per_example)


def _generator_flops(config: ModelConfig, contexts: int) -> int:
    """One generator's FLOPs for ``contexts`` context vectors."""
    widths = config.attention_knobs().hidden_widths()
    if not widths:
        return 0
    d = config.d_model
    if config.metric_rank == "full":  # the rowsum mode emits only the row sums of W's head blocks: H·d² = D·d
        out = d * (d // config.num_heads) if config.metric_mode == "rowsum" else d * d
    else:
        out = 2 * d * config.metric_rank
    fan_ins, fan_outs = (d, *widths), (*widths, out)
    per_context = sum(fan_in * fan_out for fan_in, fan_out in zip(fan_ins, fan_outs, strict=True))
    return 2 * contexts * per_context


def encoder_stack_flops(config: ModelConfig, length: int) -> Flops:
    """Forward FLOPs of the Transformer stack on one sequence of ``length`` positions: each layer's
    attention (its family's ``layer_flops``) and MLP, and DAMCHA's generators, one per group of layers."""
    d, layers = config.d_model, config.num_layers
    mlp = 4 * length * d * config.mlp_width
    attention, core = config.attention_knobs().layer_flops(length=length, d_model=d, num_heads=config.num_heads)
    generators = 0
    if config.is_damcha:
        chunked = config.causal and config.generator_depth > 0
        contexts = chunk_count(length, config.metric_chunk) if chunked else 1
        generators = math.ceil(layers / config.layers_per_generator) * _generator_flops(config, contexts)
    return Flops(dense=layers * (attention + mlp) + generators, attention_core=layers * core)


def model_flops(config: ModelConfig, length: int) -> Flops:
    """Analytic forward FLOPs per example for the model ``config`` describes.

    Args:
        config: The model configuration.
        length: Tokens per input sequence (each of the two, for ``pair``).

    Returns:
        The FLOPs, split into dense work and the attention core.
    """
    d = config.d_model
    positions = length + (1 if config.pooling == "cls" and config.architecture != "decoder" else 0)
    stack = encoder_stack_flops(config, positions)
    if config.architecture == "encoder":
        head = 2 * d * config.num_classes
        return Flops(stack.dense + head, stack.attention_core)
    if config.architecture == "pair":
        head = 2 * 4 * d * config.mlp_width + 2 * config.mlp_width * config.num_classes
        return Flops(2 * stack.dense + head, 2 * stack.attention_core)
    head = 2 * length * d * config.vocab_size
    return Flops(stack.dense + head, stack.attention_core)


def _counter_mapping() -> dict:
    """FLOP formulas for the CPU's fused attention, which the counter does not know."""
    aten = torch.ops.aten
    return {
        aten._scaled_dot_product_flash_attention_for_cpu: sdpa_flop.__wrapped__,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: sdpa_backward_flop.__wrapped__,
    }


def counted_flops(fn: Callable[[], object]) -> int:
    """Run ``fn`` under ``FlopCounterMode`` (CPU fused attention included) and return its FLOPs."""
    with FlopCounterMode(display=False, custom_mapping=_counter_mapping()) as counter:
        fn()
    return counter.get_total_flops()


class _LiveTensorMemory(torch.utils._python_dispatch.TorchDispatchMode):
    """Tracks the bytes of tensor storages created by operators while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}
        self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        # Drop freed storages first: a new storage may reuse a freed address.
        self.live = {ptr: entry for ptr, entry in self.live.items() if not entry[0].expired()}
        for value in tree_leaves(out):
            if isinstance(value, Tensor):
                storage = value.untyped_storage()
                if storage.data_ptr() and storage.data_ptr() not in self.live:
                    self.live[storage.data_ptr()] = (StorageWeakRef(storage), storage.nbytes())
        self.peak = max(self.peak, sum(nbytes for _, nbytes in self.live.values()))
        return out


@contextmanager
def peak_memory(device: torch.device) -> Iterator[dict[str, int]]:
    """Measure the peak memory that the enclosed code allocates.

    On CUDA, the caching allocator's peak above the memory in use at entry. On CPU, the
    peak total of tensor storages created inside the block and alive at once (tensors
    that existed before, such as parameters, are not counted; allocator overhead is not
    either).

    Yields:
        A dict whose ``"bytes"`` entry is filled in on exit.
    """
    result = {"bytes": 0}
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        yield result
        torch.cuda.synchronize(device)
        result["bytes"] = torch.cuda.max_memory_allocated(device) - start
        return
    with _LiveTensorMemory() as tracker:
        yield result
    result["bytes"] = tracker.peak


def device_name(device: torch.device) -> str:
    """A readable name: the GPU's model, or the CPU with its thread count."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({torch.get_num_threads()} threads, {os.cpu_count()} cores)"


# Dense peak throughput (no sparsity) of accelerators by their exact CUDA device name, FLOP/s:
# (bf16, fp32). fp32 is the TF32 tensor-core rate, which training turns on for fp32 runs on
# GPUs. Vendor data sheets; a name not listed (another board of the same chip, say) gets no MFU.
PEAK_FLOPS: dict[str, tuple[float, float]] = {
    "NVIDIA H200": (989e12, 494e12),  # SXM
    "NVIDIA H200 NVL": (835e12, 418e12),
    "NVIDIA H100 80GB HBM3": (989e12, 494e12),  # SXM
    "NVIDIA H100 PCIe": (756e12, 378e12),
    "NVIDIA H100 NVL": (835e12, 418e12),
    "NVIDIA A100-SXM4-80GB": (312e12, 156e12),
    "NVIDIA A100-SXM4-40GB": (312e12, 156e12),
    "NVIDIA A100 80GB PCIe": (312e12, 156e12),
    "NVIDIA A100-PCIE-40GB": (312e12, 156e12),
    "NVIDIA L40S": (362e12, 183e12),
}


def peak_flops_of(name: str, precision: str) -> float | None:
    """The dense peak FLOP/s of the accelerator called ``name`` at ``precision``, or None when unknown."""
    if name not in PEAK_FLOPS:
        return None
    bf16, fp32 = PEAK_FLOPS[name]
    return bf16 if precision == "bf16" else fp32


def peak_flops(device: torch.device, precision: str) -> float | None:
    """The device's dense peak FLOP/s at ``precision`` (``bf16`` or ``fp32``), or None when unknown (CPUs)."""
    if device.type != "cuda":
        return None
    return peak_flops_of(torch.cuda.get_device_name(device), precision)


def interleaved_seconds(steps: Mapping[str, Callable[[], object]], reps: int, device: torch.device) -> dict[str, list[float]]:
    """Time each step ``reps`` times, interleaved: every step once per round, so that a slow
    moment of a shared machine hits all of them alike. CUDA is synchronised around each
    step, so its time is the GPU's, not the launch's.

    Args:
        steps: Name -> a callable that runs one step.
        reps: Rounds.
        device: Where the steps run.

    Returns:
        Name -> its ``reps`` durations in seconds.
    """

    def synchronize() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(reps):
        for name, step in steps.items():
            synchronize()
            start = time.perf_counter()
            step()
            synchronize()
            times[name].append(time.perf_counter() - start)
    return times


ATTENTION_OPERATORS = {
    "torch_attn::_varlen_attn": "flash_attention_varlen",
    "torch_attn::_varlen_attn_backward": "flash_attention_varlen_backward",
}  # besides ATen's ``_scaled_dot_product_*`` kernels


def attention_kernels(fn: Callable[[], object]) -> set[str]:
    """Run ``fn`` and return the attention kernels it ran, forward and backward.

    Names are those of ATen's kernels without their prefix, e.g. ``flash_attention``
    (FlashAttention on CUDA), ``cudnn_attention``, ``efficient_attention``,
    ``flash_attention_for_cpu``, their ``..._backward`` twins, or ``attention_math`` (the
    unfused fallback, whose backward is autograd's over its parts); and
    ``flash_attention_varlen`` (``trainers.attention.sdpa.varlen_attention``) with its
    backward. They are read from the profiler's operator events, which compiled models
    record too (a dispatch mode around a compiled model would stop it compiling).
    """
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        fn()
    names = {event.name for event in profiler.events()}
    kernels = {name.removeprefix("aten::_scaled_dot_product_") for name in names if name.startswith("aten::_scaled_dot_product_")}
    return kernels | {kernel for operator, kernel in ATTENTION_OPERATORS.items() if operator in names}
