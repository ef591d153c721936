"""Orchestration overhead: one trial through Ray Tune + Optuna + SQLite against the same training called directly.

    python -m benchmarks.orchestration              # a trial of about 60 s (the target: overhead <= 5%)
    python -m benchmarks.orchestration --steps 100  # a shorter check

Both runs train the same configuration (the quick preset's MHA baseline, same seed, one
thread) on the same cached data, one after the other in this process, so the ratio is
measured side by side. The orchestrated time counts from the call to the study runner
to its return (store, Ray Tune, the trial's worker, the report) with local Ray already
up; starting Ray, paid once per run, is timed on its own.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import logging
import os
import tempfile
import time
from pathlib import Path

import ray
import torch

from search_space.space import Choice
from studies.registry import LRA_SHARING
from studies.runner import RunOptions, run_study
from trainers.config import ModelConfig
from trainers.train import train


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=500, help="training steps of the trial (default: 500, about 60 s here)")
    args = parser.parse_args(argv)

    quick = LRA_SHARING.preset("quick")
    preset = dataclasses.replace(
        quick,
        name="bench",
        train=dataclasses.replace(quick.train, steps=args.steps, eval_every=args.steps),
        domains=dict(quick.domains) | {"d_model": Choice((64,)), "num_heads": Choice((4,))},  # one baseline: the trial
        trials=1,
    )
    study = dataclasses.replace(LRA_SHARING, presets={"bench": preset}, default_preset="bench")

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        cache = root / "data"
        splits = preset.task.load(cache)
        model = ModelConfig(**preset.task.model_fields(), **preset.fixed, attention="mha", d_model=64, num_heads=4)
        torch.set_num_threads(1)  # what a 1-CPU Ray trial gets
        start = time.perf_counter()
        train(model, dataclasses.replace(preset.train, seed=0, device="cpu"), splits)
        direct = time.perf_counter() - start

        os.chdir(root)
        start = time.perf_counter()
        ray.init(
            address="local", num_cpus=os.cpu_count(), include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False
        )
        ray_start = time.perf_counter() - start
        start = time.perf_counter()
        outcome = run_study(study, RunOptions(storage=f"sqlite:///{root / 'store.db'}", cache_dir=cache), out=io.StringIO())
        orchestrated = time.perf_counter() - start
        ray.shutdown()

    print(f"one trial, {args.steps} steps, quick preset MHA baseline (d_model=64, 4 heads), 1 thread")
    print(f"direct train():                   {direct:7.1f} s")
    print(f"run_study, Ray up (Tune+Optuna):  {orchestrated:7.1f} s   trials complete: {outcome.counts['COMPLETE']}")
    overhead = orchestrated - direct
    print(f"per-trial overhead:               {overhead:7.1f} s = {(orchestrated / direct - 1) * 100:+.1f}% of the direct run")
    print(f"starting local Ray (once a run):  {ray_start:7.1f} s = {ray_start / direct * 100:.1f}% of one trial")


if __name__ == "__main__":
    main()
