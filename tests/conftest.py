"""Shared test settings: deterministic seeds and few threads (CI has 2 cores)."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest
import torch

from studies.engine.study_space import preset_space


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

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    yield ray
    ray.shutdown()


SMOKE_STUDY = "lra_sharing-smoke-v6"


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory: pytest.TempPathFactory, local_ray) -> dict:
    """Run the smoke study once without seed repeats, then simulate a dead run's trial and resume with
    two more trials and the preset's seed repeats."""
    import optuna

    from studies.catalogue import LRA_SHARING
    from studies.run import main

    preset = LRA_SHARING.preset("smoke")
    root = tmp_path_factory.mktemp("smoke")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        url = f"sqlite:///{root / 'store.db'}"
        argv = ["lra_sharing", "--preset", "smoke", "--storage", url, "--data-cache", str(root / "data")]
        assert main([*argv, "--repeat-seeds", "0"]) == 0
        first = optuna.load_study(study_name=SMOKE_STUDY, storage=url).get_trials()

        store = optuna.load_study(study_name=SMOKE_STUDY, storage=url)  # a trial a killed driver left RUNNING
        store.enqueue_trial(
            {"attention": "damcha", "metric_mode": "cross", "d_model": 32, "num_heads": 2, "sharing": "stack", "metric_rank": 4},
            user_attrs={"family": "DAMCHA (cross)", "baseline": False},
        )
        dead = store.ask()
        preset_space(LRA_SHARING, preset).suggest(dead)

        frames = _count_trial_frames(patch)  # every module's trials_frame, counted from here on
        with contextlib.redirect_stdout(io.StringIO()) as output:
            assert main([*argv, "--trials", str(len(first) + 2)]) == 0  # and the preset's seed repeats
        second = optuna.load_study(study_name=SMOKE_STUDY, storage=url).get_trials()
        repeats = optuna.load_study(study_name=f"{SMOKE_STUDY}:repeats", storage=url).get_trials()
    return {
        "root": root,
        "url": url,
        "first": first,
        "second": second,
        "repeats": repeats,
        "dead": dead.number,
        "output": output.getvalue(),
        "frames": frames,
    }


def copy_store(url: str, path: Path) -> str:
    """A consistent copy of a SQLite store (SQLite's own backup: the write-ahead log's commits included), as a URL."""
    import sqlite3

    with sqlite3.connect(url.removeprefix("sqlite:///")) as source, sqlite3.connect(path) as target:
        source.backup(target)
    return f"sqlite:///{path}"


def _count_trial_frames(patch: pytest.MonkeyPatch) -> list[str]:
    """Replace ``trials_frame`` wherever a loaded module holds it with one that records each call.

    Returns:
        The list the calls are recorded in (the study's name, once per frame built).
    """
    import sys

    from studies.results import frame

    calls: list[str] = []
    original = frame.trials_frame

    def counted(study):
        calls.append(study.study_name)
        return original(study)

    for module in list(sys.modules.values()):
        if getattr(module, "trials_frame", None) is original:
            patch.setattr(module, "trials_frame", counted)
    return calls


@pytest.fixture(scope="session")
def postgres_url():
    """A throw-away PostgreSQL server on 127.0.0.1 (as NOTES.md shows), stopped by ``pg_ctl stop`` at the end."""
    from common.postgres_server import postgres_binaries, throwaway_postgres

    bin_dir = postgres_binaries()
    if bin_dir is None:
        if os.environ.get("DAMCHA_REQUIRE_SERVERS"):
            pytest.fail("PostgreSQL is not installed (or not root); .ci/run installs Debian's postgresql")
        pytest.skip("needs Debian's postgresql package and root (apt-get install postgresql)")
    with throwaway_postgres(bin_dir) as url:
        yield url


@pytest.fixture(scope="session")
def ray_head(tmp_path_factory: pytest.TempPathFactory):
    """A Ray head (with its job server) started by ``ray start --head`` on free ports, in a temporary folder
    of its own (``RAY_TMPDIR``: its session, sockets, logs and address file), so that it is found, joined and
    stopped as what this fixture started: never through ``/tmp/ray``, never by ``ray stop``.

    Yields:
        ``{"address": "HOST:PORT", "jobs": "http://127.0.0.1:PORT", "env": {"RAY_TMPDIR": folder}}``: a
        driver that joins with ``--address auto`` needs ``env``.
    """
    import shutil
    import tempfile

    from tests.processes import start_ray_node, stop_ray_node

    folder = tempfile.mkdtemp(prefix="ray-head-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    head = start_ray_node(folder, tmp_path_factory.mktemp("ray-head") / "start.log", jobs=True)
    try:
        yield head | {"env": {"RAY_TMPDIR": folder}}
    finally:
        stop_ray_node(folder)
        shutil.rmtree(folder, ignore_errors=True)
