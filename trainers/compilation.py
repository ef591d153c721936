"""A training run's ``torch.compile``: its cache and compile workers, the compiled model, and the graphs a
run compiles (counted, so that compiling stays out of the throughput, and bounded: the recompile limit is a
failure, not a silent fall back to eager code)."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from common.outputs import CHOSEN_COMPILE_CACHE, COMPILE_CACHE_DIR, COMPILE_CACHE_VARIABLE
from trainers.torch_internals import compiled_graphs, fail_at_recompile_limit, recompile_limit_hit, set_compile_threads

COMPILE_THREADS_VARIABLE = "TORCHINDUCTOR_COMPILE_THREADS"
COMPILE_BACKEND = "inductor"  # torch.compile's backend (tests set aot_eager: the same graphs, compiled in a fraction of the time)


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


class RecompileLimitError(RuntimeError):
    """``torch.compile`` reached its recompile limit: the trial would have gone on uncompiled, its
    throughput no longer the compiled model's, so it stops instead (the message says where and what to do)."""


class CompiledGraphs:
    """A compiled trial's graphs: how many it compiled, and the seconds they took, which its
    throughput leaves out (the warm-up's, and any step's that compiled a graph)."""

    def __init__(self) -> None:
        self.start = compiled_graphs()  # other trials' graphs in this process (the count never goes down)
        self.warmed = self.start
        self.seconds = 0.0

    def warmed_up(self, seconds: float) -> None:
        """The warm-up compiled the run's graphs in ``seconds``: later graphs are recompiles."""
        self.seconds, self.warmed = seconds, compiled_graphs()

    def graphs(self) -> int:
        """Graphs this trial compiled."""
        return compiled_graphs() - self.start

    def recompiles(self) -> int:
        """Graphs compiled after the warm-up: none where the fixed shapes hold."""
        return compiled_graphs() - self.warmed


def is_recompile_limit(error: BaseException) -> bool:
    """Whether ``error`` is Dynamo's at the recompile limit (``compiled`` makes it raise one)."""
    return isinstance(error, recompile_limit_hit())
