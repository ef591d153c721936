"""A trial of one configuration on one seed gives the same numbers bit for bit, whatever runs beside it:
a truth table and its replays rest on it (docs/verdict.md, "The same answer from the same command")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

# Costs measured by the clock: they depend on the machine's load by nature. Everything else must not.
TIMED = {"examples_per_s", "tokens_per_s", "flops_per_s", "wall_seconds", "compile_seconds"}

TRIAL = """
    import dataclasses, json, sys
    from pathlib import Path
    from studies.catalogue import LRA_SHARING
    from studies.engine.trainable import TrialDevice, train_trial
    from studies.engine.trial_config import TrialSpec
    preset = LRA_SHARING.preset("smoke")
    for mode in sys.argv[1].split(","):  # trials in turn, as a reused Ray worker trains them; the last one's reports
        family = dict(attention="mha") if mode == "mha" else dict(
            attention="damcha", metric_mode=mode, metric_rank=4, generator_depth=1, sharing="layer"
        )
        spec = TrialSpec(
            number=0,
            model=preset.task.model_fields() | dict(d_model=32, num_heads=2, num_layers=2, mlp_width=64) | family,
            train=dataclasses.replace(preset.train, steps=120, eval_every=40, seed=80_003),
            task=preset.task,
            cache_dir=sys.argv[2],
            compile_cache_dir=sys.argv[2],
            memory_bytes=int(sys.argv[3]) or None,
        )
        reports = []
        train_trial(spec, TrialDevice("cpu", 0.0, 1), report=lambda step, metrics: reports.append(metrics))
    print(json.dumps(reports))
"""


def _trial(mode: str, cache: Path, memory_bytes: int = 0, threads: int = 1, kernels: str | None = None) -> list[dict]:
    """Every report of one DAMCHA trial of one CPU (``mode``: its metric mode; ``a,b,c``: trials of those modes
    in turn, ``mha`` an MHA one, and the last one's reports), trained in a process of its own as a Ray worker
    trains it, with ``threads`` as the environment's OMP_NUM_THREADS (Ray's, or a user's) and ``kernels`` as its
    ATEN_CPU_CAPABILITY (None: torch's choice for this CPU)."""
    environment = os.environ | {"OMP_NUM_THREADS": str(threads)}
    environment.pop("ATEN_CPU_CAPABILITY", None)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(TRIAL), mode, str(cache), str(memory_bytes)],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment | ({"ATEN_CPU_CAPABILITY": kernels} if kernels else {}),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_damcha_trial_trains_bit_for_bit_the_same_with_the_machine_loaded(tmp_path: Path) -> None:
    for mode in ("cross", "rowsum"):
        quiet = _trial(mode, tmp_path)
        # Every core busy, the second trial under a memory budget as --trial-memory gives one, and an environment
        # that asks for another thread count (a float sum's order follows it: 1e-7 apart at step 120 otherwise).
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
        try:
            loaded = _trial(mode, tmp_path, memory_bytes=2**31, threads=2)
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()
        assert [report["step"] for report in quiet] == [40, 80, 120]
        for alone, beside in zip(quiet, loaded, strict=True):
            measured = {name: value for name, value in alone.items() if name not in TIMED}
            assert measured == {name: value for name, value in beside.items() if name not in TIMED}, mode
        assert "test_accuracy" in quiet[-1] and "peak_memory_bytes" in quiet[-1]  # the last report's, compared too


def test_a_trial_records_the_cpu_kernels_it_trained_with_and_trains_alike_where_they_are_set_to_them(tmp_path: Path) -> None:
    """A float sum's order follows the vector instructions torch's CPU kernels use, which it picks for the CPU: a
    trial names them in its ``device``, and a re-run elsewhere that sets ATEN_CPU_CAPABILITY to them trains alike."""
    import torch

    own = _trial("rowsum", tmp_path)
    assert own[-1]["device"].endswith(f"{torch.backends.cpu.get_cpu_capability()} kernels)")
    plain = [_trial("rowsum", tmp_path, kernels="default") for _ in range(2)]
    assert plain[0][-1]["device"].endswith("DEFAULT kernels)")
    for first, second in zip(*plain, strict=True):
        assert {k: v for k, v in first.items() if k not in TIMED} == {k: v for k, v in second.items() if k not in TIMED}


def test_a_damcha_trial_trains_bit_for_bit_the_same_after_other_trials_in_its_process(tmp_path: Path) -> None:
    """A reused Ray worker trains trials in turn: what it trained before (an MHA, a cross-head trial) changes
    nothing of a row-sum trial's figures."""
    alone = _trial("rowsum", tmp_path)
    after = _trial("mha,cross,rowsum", tmp_path)
    assert [report["step"] for report in after] == [40, 80, 120]
    for first, second in zip(alone, after, strict=True):
        assert {k: v for k, v in first.items() if k not in TIMED} == {k: v for k, v in second.items() if k not in TIMED}
