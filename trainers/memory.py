"""A memory budget for one training run, and out-of-memory errors that say so.

On a shared worker several trials run side by side; one configuration too big for its
share must fail alone, with a reason, instead of taking the machine (and the other
trials) down with it. The budget is enforced by the kernel: ``RLIMIT_DATA`` caps the
process's private writable memory (heap and anonymous mappings, where PyTorch's CPU
tensors live) at what it uses now plus the budget, so an allocation beyond it fails
inside PyTorch with an error rather than waking the OOM killer.
"""

from __future__ import annotations

import contextlib
import re
import resource
from collections.abc import Iterator
from pathlib import Path

import torch

GIB = 2**30
_OUT_OF_MEMORY = re.compile(r"out of memory|can't allocate memory|Cannot allocate memory", re.IGNORECASE)
# How libraries word an allocation that failed, where a budget makes it the likely cause (oneDNN's scratchpad).
_UNDER_A_BUDGET = re.compile(r"could not create a primitive|bad_alloc|failed to allocate", re.IGNORECASE)
_PARALLEL_ELEMENTS = 2**17  # an op this large runs on the intra-op thread pool (grain size 32768)


class TrainingOutOfMemoryError(MemoryError):
    """A run needed more memory than it had.

    Attributes:
        detail: The allocator's own first line.
        on_gpu: It was accelerator memory (PyTorch's ``OutOfMemoryError``), not host memory.
        budget_bytes: The run's host-memory budget, or None.
    """

    def __init__(self, detail: str, on_gpu: bool, budget_bytes: int | None) -> None:
        super().__init__(detail, on_gpu, budget_bytes)  # the arguments are what pickling (across Ray) keeps
        self.detail, self.on_gpu, self.budget_bytes = detail, on_gpu, budget_bytes

    def __str__(self) -> str:
        if self.on_gpu:
            return f"out of GPU memory: {self.detail}"
        if self.budget_bytes is None:
            return f"out of memory: {self.detail}"
        return f"out of memory: the run's budget of {self.budget_bytes / GIB:.3g} GiB was not enough ({self.detail})"


def data_segment_bytes() -> int:
    """This process's private writable memory now (``VmData``), in bytes."""
    status = Path("/proc/self/status").read_text()
    match = re.search(r"^VmData:\s+(\d+) kB", status, re.MULTILINE)
    if match is None:
        raise OSError("/proc/self/status has no VmData line: memory budgets need Linux")
    return int(match.group(1)) * 1024


@contextlib.contextmanager
def memory_budget(budget_bytes: int | None) -> Iterator[None]:
    """Let the block allocate at most ``budget_bytes`` more private memory (None: no budget).

    The previous limit comes back afterwards (a Ray worker process runs many trials).

    Raises:
        TrainingOutOfMemoryError: an allocation in the block went over the budget (or a
            GPU ran out of memory); chained to PyTorch's error.
    """
    previous = resource.getrlimit(resource.RLIMIT_DATA)
    if budget_bytes is not None:
        # The thread pool first: a thread's stack counts against the limit, and a pool that cannot start its
        # threads under it aborts the process (libgomp: "Thread creation failed") instead of raising.
        torch.zeros(_PARALLEL_ELEMENTS).add_(1).sum()
        soft = data_segment_bytes() + budget_bytes
        if previous[1] != resource.RLIM_INFINITY:
            soft = min(soft, previous[1])
        resource.setrlimit(resource.RLIMIT_DATA, (soft, previous[1]))
    try:
        yield
    except (MemoryError, RuntimeError) as error:  # torch.OutOfMemoryError is a RuntimeError
        if isinstance(error, TrainingOutOfMemoryError) or not (
            is_out_of_memory(error) or (budget_bytes is not None and _UNDER_A_BUDGET.search(str(error)))
        ):
            raise
        detail = (str(error).strip().splitlines() or [type(error).__name__])[0]
        on_gpu = type(error).__name__ == "OutOfMemoryError"  # torch's, raised for accelerator memory only
        raise TrainingOutOfMemoryError(detail, on_gpu, budget_bytes) from error
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, previous)


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is an allocation failure (host or GPU), not some other runtime error."""
    return isinstance(error, MemoryError) or bool(_OUT_OF_MEMORY.search(str(error)))
