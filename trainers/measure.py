"""Measuring a run on its device: peak memory, the device's name and peak FLOP/s, the attention
kernels a step ran, and the benchmarks' interleaved step timer."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import Tensor
from torch.multiprocessing.reductions import StorageWeakRef

from trainers.torch_internals import TorchDispatchMode, tree_leaves


class _LiveTensorMemory(TorchDispatchMode):
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
    """A readable name: the GPU's model, or the CPU with its thread count and the vector instructions torch's CPU
    kernels use (``ATEN_CPU_CAPABILITY``): a float sum's order follows them, so a trial trains bit for bit alike only
    where they are the same (set the variable to the recorded one to re-run it elsewhere)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    kernels = torch.backends.cpu.get_cpu_capability()
    return f"cpu ({torch.get_num_threads()} threads, {os.cpu_count()} cores, {kernels} kernels)"


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


class RunPeakMemory:
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

    @contextmanager
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
