"""Orchestration overhead: what Ray Tune + Optuna + SQLite add to the training they run.

    python -m benchmarks.orchestration                  # one trial of about 60 s (target: overhead <= 5%)
    python -m benchmarks.orchestration --steps 100      # a shorter check
    python -m benchmarks.orchestration --preset quick   # a whole preset, many trials (target: overhead <= 3%)

One trial: the same configuration (the quick preset's MHA baseline, same seed, one
thread) trained directly and through the study runner, on the same cached data, one
after the other in this process, so the ratio is measured side by side. The
orchestrated time counts from the call to the study runner to its return (store, Ray
Tune, the trial's worker, the report) with local Ray already up; starting Ray, paid once
per run, is timed on its own.

A whole preset (``lra_sharing``, exactly as ``python -m studies.run lra_sharing --preset
NAME`` runs it, in a new store): the sum of the trials' own training seconds
(``wall_seconds``, measured inside ``train``) against the runner's wall seconds times the
trial slots Ray had (CPUs / CPUs per trial); the rest is overhead: worker start-up, data
loading in the worker, the store, the report, and slots left idle while the last trials
finish. It also prints the run's summary (the study's seeded answer).
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

import optuna
import ray
import torch

from search_space.space import Choice
from storage import record
from studies.catalogue import LRA_SHARING
from studies.engine.options import RunOptions
from studies.engine.runner import run_study
from studies.run import integer_from
from studies.show import show_study
from trainers.config import ModelConfig
from trainers.train import train


def start_local_ray() -> float:
    """Start local Ray on every CPU, as a run does; returns the seconds it took."""
    start = time.perf_counter()
    ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    return time.perf_counter() - start


def preset_overhead(preset_name: str) -> None:
    """Run a whole ``lra_sharing`` preset in a new store and print its overhead (see the module's docstring)."""
    preset = LRA_SHARING.preset(preset_name)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        os.chdir(root)
        ray_start = start_local_ray()
        slots = int(ray.cluster_resources()["CPU"] // preset.cpus_per_trial)
        url = f"sqlite:///{root / 'store.db'}"
        summary = io.StringIO()
        start = time.perf_counter()
        outcome = run_study(LRA_SHARING, RunOptions(preset=preset_name, storage=url, cache_dir=root / "data"), out=summary)
        show_study(outcome, summary)  # its report and summary, as the command line shows them
        wall = time.perf_counter() - start
        ray.shutdown()
        trials = optuna.load_study(study_name=outcome.study_name, storage=url).get_trials()
    training = sum(float(t.user_attrs.get(record.WALL_SECONDS, 0.0)) for t in trials)
    # Asked to told, as the store saw each trial: training plus the worker's and the bookkeeping's share.
    held = sum((t.datetime_complete - t.datetime_start).total_seconds() for t in trials if t.datetime_complete)
    print(summary.getvalue())
    print(f"lra_sharing --preset {preset_name}: {len(trials)} trials, {slots} trial slots ({preset.cpus_per_trial:g} CPU each)")
    print(f"trials' training seconds (sum):   {training:8.1f} s")
    print(f"run wall seconds x slots:         {wall * slots:8.1f} s  ({wall:.1f} s x {slots})")
    print(f"overhead:                         {(1 - training / (wall * slots)) * 100:7.1f}%  (target <= 3%)")
    print(f"  in the trials (asked to told, beyond training): {(held - training) / (wall * slots) * 100:5.1f}%")
    print(f"  slots without a trial (set-up, report, the last trials' tail): {(1 - held / (wall * slots)) * 100:5.1f}%")
    print(f"starting local Ray (once a run):  {ray_start:8.1f} s = {ray_start / wall * 100:.1f}% of the run's wall time")


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.orchestration", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--steps", type=integer_from(1), default=500, help="training steps of the trial (default: 500, about 60 s here)"
    )
    parser.add_argument("--preset", help="measure a whole lra_sharing preset (smoke, quick, full) instead of one trial")
    args = parser.parse_args(argv)
    if args.preset:
        preset_overhead(args.preset)
        return

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
        ray_start = start_local_ray()
        start = time.perf_counter()
        options = RunOptions(storage=f"sqlite:///{root / 'store.db'}", cache_dir=cache, repeat_seeds=0)
        outcome = run_study(study, options, out=io.StringIO())
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
