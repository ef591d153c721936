"""A trial's memory budget is enforced by the kernel and an overrun is a clear error.

Each check runs in its own Python process: a budget limits the whole process, and the
test session's other threads (Ray's) must not share it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def run_python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_an_allocation_over_the_budget_fails_with_a_reason_and_the_limit_comes_back() -> None:
    output = run_python("""
        import resource, torch
        from trainers.memory import GIB, TrainingOutOfMemoryError, memory_budget
        before = resource.getrlimit(resource.RLIMIT_DATA)
        with memory_budget(GIB // 4):
            fits = torch.ones(16 * 2**20, dtype=torch.uint8)  # 16 MiB
        try:
            with memory_budget(GIB // 4):
                torch.ones(2**30, dtype=torch.uint8)  # 1 GiB
        except TrainingOutOfMemoryError as error:
            print("raised:", error)
            print("cause:", type(error.__cause__).__name__)
        assert resource.getrlimit(resource.RLIMIT_DATA) == before
        torch.ones(2**30, dtype=torch.uint8)  # outside the budget: fine again
        print("after: ok")
    """)
    assert "raised: out of memory: the run's budget of 0.25 GiB was not enough" in output
    assert "can't allocate memory" in output and "--" not in output.split("raised:")[1]  # no command-line flags here
    assert "cause: RuntimeError" in output and "after: ok" in output


def test_a_library_s_own_words_for_a_failed_allocation_are_out_of_memory_under_a_budget() -> None:
    """The class of allocation failures that do not say "out of memory": oneDNN's, a C++ bad_alloc."""
    output = run_python("""
        from trainers.memory import GIB, TrainingOutOfMemoryError, memory_budget
        for words in ("could not create a primitive", "std::bad_alloc"):
            try:
                with memory_budget(GIB):
                    raise RuntimeError(words)
            except TrainingOutOfMemoryError as error:
                print("budget:", error)
            try:
                with memory_budget(None):
                    raise RuntimeError(words)
            except RuntimeError as error:
                print("none:", type(error).__name__)
    """)
    assert output.count("budget: out of memory: the run's budget of 1 GiB was not enough") == 2
    assert output.count("none: RuntimeError") == 2  # without a budget, nothing says it was memory


def test_a_tiny_budget_fails_a_multithreaded_step_with_a_reason_not_an_abort() -> None:
    """A pool that starts its threads under the limit aborted the process (libgomp), killing the worker."""
    output = run_python("""
        import torch
        from trainers.memory import TrainingOutOfMemoryError, memory_budget
        torch.set_num_threads(2)
        x, q = torch.randn(32, 40, 64, requires_grad=True), torch.randn(32, 4, 40, 16, requires_grad=True)
        layer = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.LayerNorm(64))
        try:
            with memory_budget(2**20):
                for _ in range(3):
                    (layer(x).sum() + torch.nn.functional.scaled_dot_product_attention(q, q, q).sum()).backward()
        except TrainingOutOfMemoryError as error:
            print("raised:", error)
    """)
    assert "raised: out of memory: the run's budget of 0.000977 GiB was not enough" in output


def test_other_errors_pass_through_unchanged() -> None:
    output = run_python("""
        from trainers.memory import GIB, memory_budget
        try:
            with memory_budget(GIB):
                raise RuntimeError("shapes do not match")
        except RuntimeError as error:
            print(type(error).__name__, error)
    """)
    assert output.strip() == "RuntimeError shapes do not match"


def test_a_model_too_big_for_the_budget_fails_training_and_a_small_one_trains(tmp_path: Path) -> None:
    output = run_python(f"""
        import dataclasses
        from pathlib import Path
        from studies.catalogue import LRA_SHARING
        from trainers.config import ModelConfig
        from trainers.data.loaders import listops_generated
        from trainers.memory import GIB, TrainingOutOfMemoryError, memory_budget
        from trainers.train import train
        preset = LRA_SHARING.preset("smoke")
        spec = dataclasses.replace(preset.task.spec, train_size=64, val_size=16, test_size=16)
        splits = listops_generated(spec, cache_dir=Path({str(tmp_path)!r}))
        settings = dataclasses.replace(preset.train, steps=4, eval_every=2, warmup_steps=1)
        base = preset.task.model_fields() | dict(attention="mha", d_model=32, num_heads=2, num_layers=2)
        with memory_budget(GIB // 4):
            print("small:", train(ModelConfig(**base, mlp_width=64), settings, splits).metrics["step"])
        try:
            with memory_budget(GIB // 4):
                train(ModelConfig(**base, mlp_width=2**22), settings, splits)  # two 512 MiB weights per layer
        except TrainingOutOfMemoryError as error:
            print("big:", error)
    """)
    assert "small: 4" in output
    assert "big: out of memory: the run's budget of 0.25 GiB" in output
