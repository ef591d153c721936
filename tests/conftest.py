"""Shared test settings: deterministic seeds and few threads (CI has 2 cores)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def pytest_configure(config: pytest.Config) -> None:
    """Nothing in the suite may reach a hub: ``datasets`` works offline here."""
    import os

    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def local_ray():
    """One real local Ray instance for the whole session (2 CPUs, no dashboard)."""
    import logging

    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    yield ray
    ray.shutdown()
