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
