"""The sampler is told about trials whose configuration cannot train, and learns to avoid their region.

Real Optuna samplers on real stores; the "training" is the synthetic search of
``benchmarks.infeasible`` (learning rates above 1 diverge), so hundreds of trials take a second.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from benchmarks.infeasible import DIVERGING_SHARE, diverging_share
from storage import open_storage
from studies.sampler import INFEASIBLE_ATTRIBUTE, InfeasibleAwareSampler, sampler_for

TRIALS = 80


@pytest.mark.parametrize("objectives", [1, 2], ids=["tpe", "multi-objective-tpe"])
def test_tpe_told_about_diverged_trials_stops_proposing_their_region(objectives: int) -> None:
    told = [diverging_share(InfeasibleAwareSampler(optuna.samplers.TPESampler(seed=seed)), objectives, TRIALS)[1] for seed in range(3)]
    untold = [diverging_share(optuna.samplers.TPESampler(seed=seed), objectives, TRIALS)[1] for seed in range(3)]
    assert max(told) < 0.3 < DIVERGING_SHARE  # told: it learned; its second half rarely diverges
    assert min(untold) > 0.75  # the same sampler not told keeps proposing the region: the telling is what works


def test_the_products_sampler_shows_failures_as_infeasible_and_the_store_keeps_them_fail(tmp_path: Path) -> None:
    sampler = sampler_for(objectives=2, trials=32, seed=0)  # NSGA-II (population 8), as a study runs it
    study, share = diverging_share(sampler, 2, TRIALS, storage=open_storage(f"sqlite:///{tmp_path / 'store.db'}"))
    assert share < DIVERGING_SHARE  # NSGA-II breeds from its best trials, which never diverged
    stored = study.get_trials()
    failed = {t.number for t in stored if t.state == TrialState.FAIL}
    assert failed and all(INFEASIBLE_ATTRIBUTE in stored[n].user_attrs for n in failed)

    shown = sampler.view(study).get_trials(states=(TrialState.COMPLETE,))
    assert [t.number for t in shown] == [t.number for t in stored]  # every trial is an observation
    for trial in shown:  # constrained domination ranks the infeasible ones behind every feasible one
        assert trial.constraints == ({"trainable": 1.0} if trial.number in failed else {})
    assert sampler.view(study).get_trials(states=(TrialState.FAIL,)) == []
