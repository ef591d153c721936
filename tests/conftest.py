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


SMOKE_STUDY = "lra_sharing-smoke-v1"


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory: pytest.TempPathFactory, local_ray) -> dict:
    """Run the smoke study once, then simulate a dead run's trial and resume with two more trials and seed repeats."""
    import optuna

    from studies.registry import LRA_SHARING
    from studies.run import main

    preset = LRA_SHARING.preset("smoke")
    root = tmp_path_factory.mktemp("smoke")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        url = f"sqlite:///{root / 'store.db'}"
        argv = ["lra_sharing", "--preset", "smoke", "--storage", url, "--data-cache", str(root / "data")]
        assert main(argv) == 0
        first = optuna.load_study(study_name=SMOKE_STUDY, storage=url).get_trials()

        store = optuna.load_study(study_name=SMOKE_STUDY, storage=url)  # a trial a killed driver left RUNNING
        store.enqueue_trial({"attention": "damcha", "d_model": 32, "num_heads": 2, "sharing": "stack", "metric_rank": 4, "generator_depth": 0})
        dead = store.ask()
        LRA_SHARING.space_for(preset).suggest(dead)

        assert main([*argv, "--trials", str(len(first) + 2), "--repeat-seeds", "1"]) == 0
        second = optuna.load_study(study_name=SMOKE_STUDY, storage=url).get_trials()
    return {"root": root, "url": url, "first": first, "second": second, "dead": dead.number}
