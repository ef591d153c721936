"""What a Ray Tune worker runs for one trial: load the data, train, report each evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray import tune

from trainers.config import ModelConfig
from trainers.train import TrainConfig, train


def run_trial(config: dict[str, Any]) -> None:
    """Train one configuration asked by the ledger (``studies.ledger.Ledger.ask``).

    Args:
        config: ``model`` and ``train`` config fields, the ``task`` and the data
            ``cache_dir``; the split caches were built by the driver, so workers
            memory-map them.
    """
    splits = config["task"].load(Path(config["cache_dir"]))
    train(
        ModelConfig(**config["model"]),
        TrainConfig(**config["train"]),
        splits,
        report=lambda step, metrics: tune.report(metrics),
    )
