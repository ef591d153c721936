"""Joining a Ray cluster by its address: a head from ``ray start --head``, the CLI as a separate driver."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.commands import smoke_study_command
from tests.conftest import SMOKE_STUDY

pytestmark = pytest.mark.drill  # make drills

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("how", ["host:port", "auto"])
def test_smoke_study_on_a_ray_head_joined_by_address(how: str, ray_head: dict, tmp_path: Path) -> None:
    """By the head's address from another machine, or with ``--address auto`` on a node of the cluster."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    address = ray_head["address"] if how == "host:port" else "auto"
    result = subprocess.run(
        smoke_study_command(
            "--address",
            address,
            "--storage",
            url,
            "--data-cache",
            str(tmp_path / "data"),
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | ray_head["env"],  # --address auto finds the head in its own temporary folder
    )
    assert result.returncode == 0, result.stderr[-3000:]
    trials = optuna.load_study(study_name=SMOKE_STUDY, storage=url).get_trials()
    assert len(trials) == 6 and {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert len({t.user_attrs["ray_trial_id"] for t in trials}) == 6


def test_smoke_study_as_a_ray_job(ray_head: dict, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    ray = str(Path(sys.executable).with_name("ray"))
    for _ in range(6):  # a fresh head's job agent may still be registering
        result = subprocess.run(
            [
                ray,
                "job",
                "submit",
                "--address",
                ray_head["jobs"],
                "--working-dir",
                str(ROOT),
                "--",
                sys.executable,
                "-m",
                "studies.run",
                "lra_sharing",
                "--preset",
                "smoke",
                "--repeat-seeds",
                "0",
                "--storage",
                url,
                "--data-cache",
                str(tmp_path / "data"),
                "--report",
                str(tmp_path / "report.html"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=os.environ | {"RAY_AUTH_MODE": "token"},
        )
        if "No available agent" not in result.stderr:
            break
        time.sleep(5)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "succeeded" in result.stdout + result.stderr
    trials = optuna.load_study(study_name=SMOKE_STUDY, storage=url).get_trials()
    assert len(trials) == 6 and (tmp_path / "report.html").is_file()


PG_PASSWORD = "Cl4ster-7e2b"


def test_the_cluster_recipe_runs_a_job_whose_password_is_in_postgresql_s_password_file_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/cluster.md as typed: the password in PostgreSQL's password file on the head node (the file
    ``PGPASSFILE`` names when the head starts: ``~/.pgpass`` is the user's own, which a test leaves alone),
    a URL that names none, the study submitted as a Ray job, against a real server that asks for the password."""
    import shutil
    import tempfile

    from common.postgres_server import postgres_binaries, throwaway_postgres
    from tests.processes import start_ray_node, stop_ray_node

    bin_dir = postgres_binaries()
    if bin_dir is None:
        if os.environ.get("DAMCHA_REQUIRE_SERVERS"):
            pytest.fail("PostgreSQL is not installed (or not root); .ci/run installs Debian's postgresql")
        pytest.skip("needs Debian's postgresql package and root (apt-get install postgresql)")
    with throwaway_postgres(bin_dir, password=PG_PASSWORD) as url:
        host, port = url.split("@", 1)[1].split("/", 1)[0].split(":")
        pgpass = tmp_path / "pgpass"
        pgpass.write_text(f"{host}:{port}:optuna:postgres:{PG_PASSWORD}\n")
        pgpass.chmod(0o600)
        with pytest.raises(Exception, match="password"):  # the server asks: without the file, no connection
            optuna.storages.RDBStorage(url)
        folder = tempfile.mkdtemp(prefix="ray-pg-", dir="/tmp")
        try:
            head = start_ray_node(folder, tmp_path / "start.log", jobs=True, environment={"PGPASSFILE": str(pgpass)})
            typed = [
                "job", "submit", "--address", head["jobs"], "--working-dir", str(ROOT), "--",
                sys.executable, "-m", "studies.run", "lra_sharing", "--preset", "smoke", "--repeat-seeds", "0",
                "--storage", url, "--data-cache", str(tmp_path / "data"), "--report", str(tmp_path / "report.html"),
            ]  # fmt: skip
            ray = str(Path(sys.executable).with_name("ray"))
            submitter = {k: v for k, v in os.environ.items() if k != "PGPASSFILE"} | {"RAY_AUTH_MODE": "token"}
            for _ in range(6):  # a fresh head's job agent may still be registering
                result = subprocess.run([ray, *typed], capture_output=True, text=True, timeout=300, env=submitter)
                if "No available agent" not in result.stderr:
                    break
                time.sleep(5)
            listed = subprocess.run(
                [ray, "job", "list", "--address", head["jobs"]], capture_output=True, text=True, timeout=60, env=submitter
            )
        finally:
            stop_ray_node(folder)
            shutil.rmtree(folder, ignore_errors=True)
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
        assert PG_PASSWORD not in " ".join(typed) and listed.returncode == 0 and PG_PASSWORD not in listed.stdout
        assert "entrypoint" in listed.stdout  # the job's metadata was read: it holds no password
        monkeypatch.setenv("PGPASSFILE", str(pgpass))  # this process reads the store as a machine with the file would
        trials = optuna.load_study(study_name=SMOKE_STUDY, storage=url).get_trials()
        assert len(trials) == 6 and (tmp_path / "report.html").is_file()


def test_a_cluster_that_refuses_the_driver_s_token_is_refused_within_seconds(tmp_path: Path) -> None:
    """A head in token mode, and drivers with a wrong token or none: each exits 2 naming the token, before its
    store is written (Ray itself gives up after about 20 s with a ConnectionError, exit 1)."""
    import shutil
    import tempfile

    from tests.processes import start_ray_node, stop_ray_node

    folder = tempfile.mkdtemp(prefix="ray-token-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    head = start_ray_node(folder, tmp_path / "start.log", environment={"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "c" * 32})
    home = tmp_path / "home"  # no ~/.ray/auth_token there
    home.mkdir()
    drivers = {
        "a wrong token": {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "w" * 32},
        "no token": {"HOME": str(home)},
    }
    try:
        for label, variables in drivers.items():
            store = tmp_path / f"{label}.db"
            environment = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")} | variables
            started = time.monotonic()
            result = subprocess.run(
                smoke_study_command("--address", head["address"], "--storage", f"sqlite:///{store}"),
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
                env=environment,
            )
            assert result.returncode == 2, (label, result.stderr[-2000:])
            assert "refused this driver's token" in result.stderr and "Traceback" not in result.stderr, label
            assert time.monotonic() - started < 60 and not store.exists(), label
    finally:
        stop_ray_node(folder)
        shutil.rmtree(folder, ignore_errors=True)


def test_stopping_a_head_stops_its_ray_client_server_too(tmp_path: Path) -> None:
    """A head's Ray Client server is started detached, and its command line names the head's address, not the
    head's folder: stopping the head by its folder must find it too, or it outlives the tests."""
    import shutil
    import tempfile

    from tests.processes import head_address_marker, processes_naming, start_ray_node, stop_ray_node

    folder = tempfile.mkdtemp(prefix="ray-stop-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    try:
        head = start_ray_node(folder, tmp_path / "start.log")
        client = processes_naming(f"--address={head['address']}") - processes_naming(folder)
        assert client and head_address_marker(folder) == f"--address={head['address']}"  # only its address names it
    finally:
        stop_ray_node(folder)
        shutil.rmtree(folder, ignore_errors=True)
    assert not processes_naming(f"--address={head['address']}") and not processes_naming(folder)
