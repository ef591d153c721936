"""The smoke study against a real PostgreSQL server: the cluster store, read back with plain Optuna."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from studies.run import main
from tests.conftest import SMOKE_STUDY


def test_smoke_study_on_postgresql(postgres_url: str, local_ray, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAMCHA_PG_URL", postgres_url)
    assert main(["lra_sharing", "--preset", "smoke", "--storage", "env:DAMCHA_PG_URL", "--data-cache", str(tmp_path / "data")]) == 0
    trials = optuna.load_study(study_name=SMOKE_STUDY, storage=postgres_url).get_trials()
    assert len(trials) == 6 and {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert sum(bool(t.user_attrs["baseline"]) for t in trials) == 2
    assert all(t.intermediate_values and "flops_per_example" in t.user_attrs for t in trials)
    assert not list(tmp_path.glob("runs/*.writer-lock"))  # PostgreSQL needs no single-writer lock
