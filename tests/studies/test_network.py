"""A local run's Ray is reachable from this machine alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from studies.run import LOCAL_ONLY_VARIABLE
from tests.commands import smoke_study_command
from tests.processes import descendants, kill_tree, listeners, wait_for_training_worker


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads sockets from Linux's /proc")
@pytest.mark.parametrize(
    ("address", "variable"),
    [(None, None), ("local", None), (None, "local")],
    ids=["no-address", "--address-local", "RAY_ADDRESS-local"],
)
def test_a_local_run_s_ray_processes_listen_on_loopback_only(tmp_path: Path, address: str | None, variable: str | None) -> None:
    """The class of runs that start their own Ray: no address, ``--address local``, ``RAY_ADDRESS=local``."""
    environment = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", LOCAL_ONLY_VARIABLE)}
    if variable is not None:
        environment["RAY_ADDRESS"] = variable
    options = ("--address", address) if address else ()
    command = smoke_study_command(
        "--storage", f"sqlite:///{tmp_path / 'store.db'}", "--data-cache", str(tmp_path / "data"), *options
    )
    driver = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for_training_worker(driver)  # by now the GCS, the raylet, its agents and a trial's worker all listen
        listening = listeners([(driver.pid, "driver"), *descendants(driver.pid)])
    finally:
        kill_tree(driver)
    servers = {"gcs_server", "raylet", "ray::ImplicitFunc"}
    assert {name for name in servers if any(name in s.command for s in listening)} == servers, listening  # it saw them
    exposed = [f"{s.command.split()[0]} on {s.address}:{s.port}" for s in listening if not s.on_loopback]
    assert not exposed, exposed
