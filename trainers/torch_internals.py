"""The places where training relies on torch's internals, for want of a public call, each said once here
and checked by ``tests/trainers/test_torch_internals.py``, which fails when a torch release changes them:

- ``TorchDispatchMode`` (``torch.utils._python_dispatch``): the one hook that sees every tensor an
  operator creates, which a CPU step's peak memory needs (``trainers.measure.peak_memory``): torch's
  CPU allocator keeps no statistics, and the profiler's memory events cost a profile of every step;
- ``tree_leaves`` (``torch.utils._pytree``): an operator's outputs, however nested, as a flat list
  (torch 2.13 has no public pytree module);
- ``torch._inductor.config.compile_threads``: inductor reads ``TORCHINDUCTOR_COMPILE_THREADS`` once,
  at its import, so a worker that compiled before needs the setting itself (``set_compile_threads``);
- Dynamo's count of the graphs it compiled (``torch._dynamo.utils.counters``), which a trial needs to keep
  compilation out of its throughput and to record its recompiles (``compiled_graphs``): torch has no public
  counter;
- ``torch._dynamo.config.fail_on_recompile_limit_hit`` and the error it raises
  (``recompile_limit_hit``): without it, a function that reaches the recompile limit runs uncompiled from
  then on and says so only in a warning (``fail_at_recompile_limit``).
"""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = [
    "TorchDispatchMode",
    "compiled_graphs",
    "fail_at_recompile_limit",
    "recompile_limit_hit",
    "set_compile_threads",
    "tree_leaves",
]


def set_compile_threads(threads: int) -> None:
    """Give ``torch.compile`` ``threads`` compile workers in this process, even after inductor was imported."""
    import torch._inductor.config as inductor_config  # seconds of import that a run without compile never needs

    inductor_config.compile_threads = threads


def compiled_graphs() -> int:
    """How many graphs Dynamo has compiled in this process so far (a reset does not lower it)."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def fail_at_recompile_limit() -> None:
    """Make a compiled function that reaches Dynamo's recompile limit raise ``RecompileLimitHit``
    instead of running uncompiled from then on."""
    import torch._dynamo.config as dynamo_config

    dynamo_config.fail_on_recompile_limit_hit = True


def recompile_limit_hit() -> type[Exception]:
    """The error a compiled function raises at the recompile limit after ``fail_at_recompile_limit``."""
    from torch._dynamo.exc import FailOnRecompileLimitHit  # seconds of import a run without compile never needs

    return FailOnRecompileLimitHit
