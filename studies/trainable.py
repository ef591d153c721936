"""What a Ray Tune worker runs for one trial: load the data, train, report each evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray import tune

from trainers.config import ModelConfig
from trainers.memory import memory_budget
from trainers.train import TrainConfig, train


def run_trial(config: dict[str, Any]) -> None:
    """Train one configuration asked by the ledger (``studies.ledger.Ledger.ask``).

    Args:
        config: ``model`` and ``train`` config fields, the ``task`` and the data
            ``cache_dir``; the split caches were built by the driver, so workers
            memory-map them. ``memory_bytes`` (optional): the trial's memory budget.

    Raises:
        trainers.memory.TrainingOutOfMemoryError: the trial went over its budget.
        trainers.train.NonFiniteLossError: the loss diverged (the step is named).
    """
    splits = config["task"].load(Path(config["cache_dir"]))
    with memory_budget(config.get("memory_bytes")):
        train(
            ModelConfig(**config["model"]),
            TrainConfig(**config["train"]),
            splits,
            report=lambda step, metrics: tune.report(metrics),
        )
