"""A local run's Ray is reachable from this machine alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from studies.engine.ray_address import LOCAL_ONLY_VARIABLE
from tests.commands import smoke_study_command
from tests.processes import descendants, kill_tree, listeners, wait_for_training_worker

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.drill  # make drills
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads sockets from Linux's /proc")
@pytest.mark.parametrize(
    ("address", "variable"),
    [(None, None), ("local", None)],
    ids=["no-address", "--address-local"],
)
def test_a_local_run_s_ray_processes_listen_on_loopback_only(tmp_path: Path, address: str | None, variable: str | None) -> None:
    """The class of runs that start their own Ray: no address, ``--address local``, ``RAY_ADDRESS=local`` (which
    reaches the same code as ``--address local``: ``test_every_way_to_ask_for_a_local_run_keeps_ray_on_loopback``)."""
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


@pytest.mark.parametrize("arguments", [(), ("--address", "local")], ids=["RAY_ADDRESS-local", "and-address-local"])
def test_every_way_to_ask_for_a_local_run_keeps_ray_on_loopback(arguments: tuple[str, ...]) -> None:
    """``RAY_ADDRESS=local`` (alone, and beside ``--address local``), before Ray is imported, sets the variable that
    keeps a local Ray on loopback, and the run takes the local path (this machine's resources are checked, no
    cluster is looked for): the path the real runs above take."""
    environment = {k: v for k, v in os.environ.items() if k != LOCAL_ONLY_VARIABLE} | {"RAY_ADDRESS": "local"}
    script = (
        "import os, sys; from studies.run import main, prepare_ray_environment\n"
        "address = sys.argv[2] if len(sys.argv) > 2 else None  # --address ADDRESS\n"
        f"prepare_ray_environment(address); print(os.environ.get({LOCAL_ONLY_VARIABLE!r}))\n"
        "sys.argv = ['studies.run', 'lra_sharing', '--preset', 'smoke', '--cpus-per-trial', '999', *sys.argv[1:]]\n"
        "main(sys.argv[1:])\n"
    )
    checked = subprocess.run(
        [sys.executable, "-c", script, *arguments], env=environment, capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert checked.stdout.splitlines()[0] == "0", checked.stderr
    assert checked.returncode == 2 and "more than this machine's" in checked.stderr  # the local check, not a cluster's
