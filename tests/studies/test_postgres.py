"""The smoke study against a real PostgreSQL server: the cluster store, read back with plain Optuna."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from studies.run import main
from tests.commands import smoke_study_command
from tests.conftest import SMOKE_STUDY


def test_smoke_study_on_postgresql(postgres_url: str, local_ray, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAMCHA_PG_URL", postgres_url)
    argv = ["lra_sharing", "--preset", "smoke", "--repeat-seeds", "0", "--storage", "env:DAMCHA_PG_URL"]
    assert main([*argv, "--data-cache", str(tmp_path / "data")]) == 0
    trials = optuna.load_study(study_name=SMOKE_STUDY, storage=postgres_url).get_trials()
    assert len(trials) == 6 and {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert sum(bool(t.user_attrs["baseline"]) for t in trials) == 2  # MHA's share of six trials over three families
    assert all(t.intermediate_values and "flops_per_example" in t.user_attrs for t in trials)
    assert not list(tmp_path.glob("runs/*.writer-lock"))  # PostgreSQL needs no single-writer lock


def test_two_drivers_share_one_postgresql_study(postgres_url: str, tmp_path: Path) -> None:
    import subprocess

    command = smoke_study_command(
        "--fix",
        "num_heads=2",
        "--storage",
        postgres_url,
        "--data-cache",
        str(tmp_path / "data"),
        "--trials",
        "6",
    )
    drivers = [
        subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)
    ]
    outputs = [driver.communicate(timeout=600)[0] for driver in drivers]
    assert [driver.returncode for driver in drivers] == [0, 0], outputs
    trials = optuna.load_study(study_name=f"{SMOKE_STUDY}-num_heads=2", storage=postgres_url).get_trials()
    assert len({t.number for t in trials}) == len(trials)  # no duplicated numbers
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.FAIL)]  # no trial failed or lost
    assert len(trials) == 6  # the two drivers together respect --trials
    assert len({t.user_attrs["driver"] for t in trials}) == 2  # both drivers worked on it
