"""Joining a Ray cluster by its address: a head from ``ray start --head``, the CLI as a separate driver."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
from optuna.trial import TrialState

from tests.conftest import SMOKE_STUDY


def test_smoke_study_on_a_ray_head_joined_by_address(ray_head: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    result = subprocess.run(
        [sys.executable, "-m", "studies.run", "lra_sharing", "--preset", "smoke", "--address", ray_head,
         "--storage", url, "--data-cache", str(tmp_path / "data")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    trials = optuna.load_study(study_name=SMOKE_STUDY, storage=url).get_trials()
    assert len(trials) == 6 and {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert len({t.user_attrs["ray_trial_id"] for t in trials}) == 6
