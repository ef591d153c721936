"""The sampler is told about trials whose configuration cannot train, and learns to avoid their region.

Real Optuna samplers on real stores; the "training" is a formula so that hundreds of
trials take a second: learning rates above 1 diverge (FAIL, marked infeasible), the
others score by their distance from 1e-3.
"""

from __future__ import annotations

import math
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from storage import open_storage
from studies.sampler import INFEASIBLE_ATTRIBUTE, InfeasibleAwareSampler, sampler_for

LEARNING_RATES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 1e2, 1e3, 1e4)  # the last 3 of 8 diverge
PRIOR_SHARE = 3 / 8
TRIALS = 80


def run(sampler: optuna.samplers.BaseSampler, objectives: int, storage: str | None = None) -> tuple[optuna.Study, float]:
    """Ask and tell ``TRIALS`` trials; returns the study and the diverging share of the second half's proposals."""
    study = optuna.create_study(storage=storage, directions=["maximize", "minimize"][:objectives], sampler=sampler)
    diverged = []
    for number in range(TRIALS):
        trial = study.ask()
        learning_rate = trial.suggest_categorical("learning_rate", LEARNING_RATES)
        width = trial.suggest_int("width", 1, 8)
        if learning_rate > 1:
            trial.set_user_attr("error", "NonFiniteLossError: training loss is nan at step 2 of 60")
            trial.set_user_attr(INFEASIBLE_ATTRIBUTE, "diverged")
            study.tell(trial, state=TrialState.FAIL)
            diverged.append(number)
        else:
            accuracy = 1 - abs(math.log10(learning_rate) + 3) / 3 + 0.01 * width
            study.tell(trial, [accuracy, width][:objectives])
    return study, sum(number >= TRIALS // 2 for number in diverged) / (TRIALS - TRIALS // 2)


@pytest.mark.parametrize("objectives", [1, 2], ids=["tpe", "multi-objective-tpe"])
def test_tpe_told_about_diverged_trials_stops_proposing_their_region(objectives: int) -> None:
    told = [run(InfeasibleAwareSampler(optuna.samplers.TPESampler(seed=seed)), objectives)[1] for seed in range(3)]
    untold = [run(optuna.samplers.TPESampler(seed=seed), objectives)[1] for seed in range(3)]
    assert max(told) < 0.3 < PRIOR_SHARE  # told: it learned; its second half rarely diverges
    assert min(untold) > 0.75  # the same sampler not told keeps proposing the region: the telling is what works


def test_the_products_sampler_shows_failures_as_infeasible_and_the_store_keeps_them_fail(tmp_path: Path) -> None:
    sampler = sampler_for(objectives=2, trials=32, seed=0)  # NSGA-II (population 8), as a study runs it
    study, share = run(sampler, 2, storage=open_storage(f"sqlite:///{tmp_path / 'store.db'}"))
    assert share < PRIOR_SHARE  # NSGA-II breeds from its best trials, which never diverged
    stored = study.get_trials()
    failed = {t.number for t in stored if t.state == TrialState.FAIL}
    assert failed and all(INFEASIBLE_ATTRIBUTE in stored[n].user_attrs for n in failed)

    shown = sampler.view(study).get_trials(states=(TrialState.COMPLETE,))
    assert [t.number for t in shown] == [t.number for t in stored]  # every trial is an observation
    for trial in shown:  # constrained domination ranks the infeasible ones behind every feasible one
        assert trial.constraints == ({"trainable": 1.0} if trial.number in failed else {})
    assert sampler.view(study).get_trials(states=(TrialState.FAIL,)) == []
