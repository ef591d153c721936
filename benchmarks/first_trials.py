"""A preset's first trials, as a run asks them, trained on this machine's GPU without Ray.

The study's own ``Ledger`` asks the configurations (families in turn, the sampler's
proposals, the preset's training settings: bf16 and ``torch.compile`` for ``full``) from a
throw-away SQLite store; ``studies.engine.trainable.train_trial``, the function a Ray worker calls,
trains each as a trial holding one whole GPU. Each evaluation's costs are printed: compile
seconds, throughput, model FLOP utilisation and the allocator's peak. Shorter runs and
less training data (``--steps``, ``--train-size``) keep the check short; they change no
per-step cost.

    python -m benchmarks.first_trials lra_sharing --preset full --trials 2 --steps 1000 --train-size 8000
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
from dataclasses import replace
from pathlib import Path

import optuna
import torch

from common.naming import UnknownNameError
from common.outputs import exit_with
from storage import open_storage, record
from studies.catalogue import get_study
from studies.catalogue.tasks import ListOpsTask
from studies.engine.ledger import Asking, Ledger, LedgerStore, TrialSetup
from studies.engine.recovery import heartbeat_options
from studies.engine.sampler import sampler_for
from studies.engine.study_space import preset_space
from studies.engine.trainable import TrialDevice, train_trial
from studies.results.quality import quality_named
from studies.run import integer_from
from trainers.data.cache import default_cache_dir

COSTS = (
    (record.EXAMPLES_PER_S, "examples/s", "{:.0f}"),
    (record.TOKENS_PER_S, "tokens/s", "{:.0f}"),
    (record.MODEL_FLOPS_UTILISATION, "MFU", "{:.1%}"),
    (record.COMPILE_SECONDS, "compile s", "{:.1f}"),
    (record.RECOMPILES, record.RECOMPILES, "{:d}"),
    (record.PEAK_MEMORY_BYTES, "peak GiB", "{:.2f}"),
    (record.WALL_SECONDS, "wall s", "{:.1f}"),
)


def _row(number: int, label: str, columns: tuple, metrics: dict) -> str:
    values = []
    for key, _, form in columns:
        value = metrics.get(key)
        if key == record.PEAK_MEMORY_BYTES and value is not None:
            value /= 2**30
        values.append("-" if value is None else form.format(value))
    return f"{number:>3} {label:<40} {metrics['step']:>6} " + " ".join(f"{v:>10}" for v in values)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; exit code 1 when a trial failed (each failure is printed, and the
    next trials still run)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.first_trials", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("study")
    parser.add_argument("--preset", default="full")
    parser.add_argument("--trials", type=integer_from(1), default=2, help="the first N trials (families take turns)")
    parser.add_argument("--steps", type=integer_from(1), help="train each this many steps (default: the preset's)")
    parser.add_argument(
        "--train-size", type=integer_from(1), help="generated ListOps: fewer training examples (quicker to build)"
    )
    parser.add_argument("--batch-size", type=integer_from(1), help="examples a step (default: the preset's)")
    parser.add_argument(
        "--compile", action=argparse.BooleanOptionalAction, help="torch.compile the models, or not (default: the preset's)"
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    try:
        study = get_study(args.study)
        preset = study.preset(args.preset)
    except UnknownNameError as error:
        parser.error(str(error))
    if args.train_size is not None:
        if not isinstance(preset.task, ListOpsTask):
            parser.error("--train-size applies to generated ListOps only")
        preset = replace(preset, task=replace(preset.task, spec=replace(preset.task.spec, train_size=args.train_size)))
    chosen = {"steps": args.steps, "batch_size": args.batch_size, "compile": args.compile}
    preset = replace(preset, train=replace(preset.train, **{k: v for k, v in chosen.items() if v is not None}))
    cache_dir = default_cache_dir().resolve()
    preset.task.load(cache_dir)  # built once, as the driver does
    print(f"{args.study} {preset.name}: {preset.task.describe()}; {preset.train}", flush=True)

    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'first-trials.db'}"
        storage = open_storage(url, **heartbeat_options())
        store = optuna.create_study(
            storage=storage,
            directions=[objective.direction for objective in study.objectives],
            sampler=sampler_for(len(study.objectives), args.trials, 0),
        )
        ledger = Ledger(
            LedgerStore(store, storage),
            Asking(study, preset, preset_space(study, preset), args.trials),
            TrialSetup(str(cache_dir)),
        )
        failed = False
        placement = TrialDevice(args.device, 1.0 if args.device == "cuda" else 0.0, os.cpu_count() or 1)
        objective = study.objectives[0]  # the value that judges a trial: val acc, val bpb
        short = quality_named(objective.metric, objective.direction == "maximize").short
        columns = ((objective.metric, f"val {short}", "{:.3f}"), *COSTS)
        print(f"{'#':>3} {'configuration':<40} {'step':>6} " + " ".join(f"{title:>10}" for _, title, _ in columns), flush=True)
        while (spec := ledger.ask(f"first-trial-{ledger.asked}")) is not None:
            number = spec.number
            label = f"{store.trials[number].user_attrs.get(record.FAMILY, '')} {_knobs(spec.model)}"
            try:
                train_trial(spec, placement, report=functools.partial(_print_row, number, label, columns))
            except Exception as error:  # noqa: BLE001 (a check: the next trials still run, the exit code says it)
                first_line = (str(error).strip().splitlines() or [""])[0]
                print(f"{number:>3} {label:<40} FAILED: {type(error).__name__}: {first_line}", flush=True)
                failed = True
    return 1 if failed else 0


def _print_row(number: int, label: str, columns: tuple, step: int, metrics: dict) -> None:  # noqa: ARG001 (a train report)
    print(_row(number, label, columns, metrics), flush=True)


def _knobs(model: dict) -> str:
    """The searched model knobs in a few characters."""
    text = f"d={model['d_model']} H={model['num_heads']}"
    if model["attention"] == "damcha":
        text += f" r={model['metric_rank']} g={model['generator_depth']} {model['sharing']}"
    return text


if __name__ == "__main__":
    exit_with(main)
