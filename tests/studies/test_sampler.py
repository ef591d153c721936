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
from reports.results.frame import outcome, trials_frame
from reports.results.names import INFEASIBLE, INFEASIBLE_ATTRIBUTE
from storage import open_storage
from studies.engine.sampler import TRAINABLE, sampler_for

TRIALS = 80


@pytest.mark.parametrize("objectives", [1, 2], ids=["tpe", "multi-objective-tpe"])
def test_tpe_told_about_diverged_trials_stops_proposing_their_region(objectives: int) -> None:
    told = [diverging_share(optuna.samplers.TPESampler(seed=seed), objectives, TRIALS)[1] for seed in range(3)]
    untold = [diverging_share(optuna.samplers.TPESampler(seed=seed), objectives, TRIALS, told=False)[1] for seed in range(3)]
    assert max(told) < 0.3 < DIVERGING_SHARE  # told: it learned; its second half rarely diverges
    assert min(untold) > 0.75  # the same sampler not told keeps proposing the region: the telling is what works


def test_the_products_sampler_learns_from_infeasible_trials_that_no_result_includes(tmp_path: Path) -> None:
    sampler = sampler_for(objectives=2, trials=32, seed=0)  # NSGA-II (population 8), as a study runs it
    study, share = diverging_share(sampler, 2, TRIALS, storage=open_storage(f"sqlite:///{tmp_path / 'store.db'}"))
    assert share < DIVERGING_SHARE  # NSGA-II breeds from its best trials, which never diverged
    stored = study.get_trials()
    infeasible = {t.number for t in stored if t.params["learning_rate"] > 1}
    assert infeasible  # in Optuna's own terms: COMPLETE, its constraint violated
    for trial in stored:
        assert trial.state == TrialState.COMPLETE
        assert trial.constraints == ({TRAINABLE: 1.0} if trial.number in infeasible else {})
        assert (outcome(trial) == INFEASIBLE) == (INFEASIBLE_ATTRIBUTE in trial.user_attrs) == (trial.number in infeasible)
    assert not infeasible & {t.number for t in study.best_trials}  # Optuna's Pareto front leaves them out...
    frame = trials_frame(study)  # ...and so does every result of this product
    assert set(frame.loc[frame["state"] == INFEASIBLE, "number"]) == infeasible
    assert frame.loc[frame["state"] == INFEASIBLE, "val_accuracy"].isna().all()
