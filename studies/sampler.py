"""The study's sampler, told about configurations that cannot train.

Optuna's samplers learn only from COMPLETE (and, for TPE, PRUNED) trials: a FAIL trial
is invisible to them, so a region whose loss diverges, or whose model does not fit in
memory, would be proposed again and again. Such trials stay FAIL in the store (their
state says what happened) and carry an ``infeasible`` user attribute; the sampler sees
them as *infeasible* observations, the way Optuna 5 models constraints
(``Trial.set_constraint``): NSGA-II ranks an infeasible trial behind every feasible one
(constrained domination), TPE counts it among the bad trials. Both read trials through
``Study._get_trials``, which is where the view below differs from the study.
"""

from __future__ import annotations

import copy
from collections.abc import Container, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

INFEASIBLE_ATTRIBUTE = "infeasible"  # user attribute of a FAIL trial: why its configuration cannot train
CONSTRAINT_KEY = "constraints:trainable"  # Optuna 5's system attribute for a constraint named "trainable"


def sampler_for(objectives: int, trials: int, seed: int) -> InfeasibleAwareSampler:
    """TPE for one objective; NSGA-II for several; both told about infeasible trials.

    Optuna's multi-objective TPE fails on pruned trials that have intermediate values
    (optuna#5260: it asks the study for a single direction), and this product keeps
    both the pruned trials and their curves.
    """
    if objectives == 1:
        return InfeasibleAwareSampler(optuna.samplers.TPESampler(seed=seed))
    return InfeasibleAwareSampler(optuna.samplers.NSGAIISampler(seed=seed, population_size=min(50, max(4, trials // 4))))


def as_infeasible(trial: FrozenTrial, objectives: int) -> FrozenTrial:
    """A FAIL trial as the sampler sees it: COMPLETE, with its ``trainable`` constraint violated.

    Its objective values are placeholders (0.0): constrained domination compares an
    infeasible trial with any other by the violation alone.
    """
    shown = copy.copy(trial)
    shown.state = TrialState.COMPLETE
    shown.values = [0.0] * objectives
    shown.system_attrs = {**trial.system_attrs, CONSTRAINT_KEY: 1.0}
    return shown


class _SamplerView:
    """The study as the wrapped sampler sees it: infeasible FAIL trials appear as infeasible COMPLETE ones."""

    def __init__(self, study: optuna.Study, shown: dict[int, FrozenTrial]) -> None:  # trial id -> view
        self._study, self._shown = study, shown

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def _get_trials(self, deepcopy: bool = True, states: Container[TrialState] | None = None, use_cache: bool = False) -> list[FrozenTrial]:
        trials = self._study._get_trials(deepcopy=deepcopy, states=None, use_cache=use_cache)
        objectives = len(self._study.directions)
        view = []
        for trial in trials:
            if trial.state == TrialState.FAIL and INFEASIBLE_ATTRIBUTE in trial.user_attrs:
                if trial._trial_id not in self._shown:  # a FAIL trial never changes: build its view once
                    self._shown[trial._trial_id] = as_infeasible(trial, objectives)
                trial = self._shown[trial._trial_id]
            if states is None or trial.state in states:
                view.append(trial)
        return view

    def get_trials(self, deepcopy: bool = True, states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        return self._get_trials(deepcopy=deepcopy, states=states)

    @property
    def trials(self) -> list[FrozenTrial]:
        return self._get_trials()


class InfeasibleAwareSampler(BaseSampler):
    """Wraps an Optuna sampler so that it learns from trials whose configuration cannot train.

    Args:
        inner: The sampler that proposes (``TPESampler``, ``NSGAIISampler``, ...).
    """

    def __init__(self, inner: BaseSampler) -> None:
        self.inner = inner
        self._shown: dict[int, FrozenTrial] = {}

    def __str__(self) -> str:
        return f"{self.inner} told about infeasible trials"

    def view(self, study: optuna.Study) -> Any:
        """The study as the wrapped sampler sees it (infeasible FAIL trials shown COMPLETE and infeasible)."""
        return _SamplerView(study, self._shown)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.inner.infer_relative_search_space(self.view(study), trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self.inner.sample_relative(self.view(study), trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution) -> Any:
        return self.inner.sample_independent(self.view(study), trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.inner.before_trial(self.view(study), trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        self.inner.after_trial(self.view(study), trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()
