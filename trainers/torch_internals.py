"""The places where training relies on torch's internals, for want of a public call, each said once here
and checked by ``tests/trainers/test_torch_internals.py``, which fails when a torch release changes them:

- ``TorchDispatchMode`` (``torch.utils._python_dispatch``): the one hook that sees every tensor an
  operator creates, which a CPU step's peak memory needs (``trainers.measure.peak_memory``): torch's
  CPU allocator keeps no statistics, and the profiler's memory events cost a profile of every step;
- ``tree_leaves`` (``torch.utils._pytree``): an operator's outputs, however nested, as a flat list
  (torch 2.13 has no public pytree module);
- ``torch._inductor.config.compile_threads``: inductor reads ``TORCHINDUCTOR_COMPILE_THREADS`` once,
  at its import, so a worker that compiled before needs the setting itself (``set_compile_threads``).
"""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = ["TorchDispatchMode", "set_compile_threads", "tree_leaves"]


def set_compile_threads(threads: int) -> None:
    """Give ``torch.compile`` ``threads`` compile workers in this process, even after inductor was imported."""
    import torch._inductor.config as inductor_config  # seconds of import that a run without compile never needs

    inductor_config.compile_threads = threads
