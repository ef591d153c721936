"""The study's sampler, and how it is told about configurations that cannot train.

Optuna's samplers learn nothing from FAIL trials, so a region whose loss diverges, or
whose model does not fit in memory, would be proposed again and again. Optuna's own
answer is a constraint (``Trial.set_constraint``): a trial whose constraint value is
above 0 is *infeasible*. NSGA-II ranks it behind every feasible trial (constrained
domination), TPE counts it among the bad ones, GPSampler models the constraint
(``ConstraintAwareGPSampler``), and ``Study.best_trials`` and
optuna-dashboard leave it out. Samplers read constraints of COMPLETE trials, so such a
trial is told COMPLETE, with placeholder objective values, its ``trainable`` constraint
violated, and an ``infeasible`` user attribute saying why (``studies.results.frame`` shows it as
``INFEASIBLE``, never as a result).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial

from search_space import SearchSpace
from search_space.space import Value
from storage import record
from studies.catalogue.schema import Study
from studies.catalogue.search_strategy import Search
from studies.engine.family_sampler import FamilySampler, family_configurations
from studies.engine.optuna_internals import StudyView
from studies.engine.study_space import baseline_costs

TRAINABLE = "trainable"  # the constraint's name: 1.0 when violated


def sampler_for(objectives: int, trials: int, seed: int) -> optuna.samplers.BaseSampler:
    """TPE for one objective; NSGA-II for several; both learn from infeasible trials.

    Optuna's multi-objective TPE fails on pruned trials that have intermediate values
    (optuna#5260: it asks the study for a single direction), and this product keeps
    both the pruned trials and their curves.
    """
    if objectives == 1:
        return optuna.samplers.TPESampler(seed=seed)
    return optuna.samplers.NSGAIISampler(seed=seed, population_size=min(50, max(4, trials // 4)))


def _startup(trials: int) -> int:
    """Random start-up trials of a model-based sampler that sees ``trials``: Optuna's 10, or half of fewer
    (a family's share of a quick budget is 8)."""
    return min(10, max(2, trials // 2))


def _tpe(objectives: int, trials: int, seed: int) -> optuna.samplers.TPESampler:
    """TPE, multivariate and grouped: experimental in Optuna, and chosen (measured on the truth table), so not warned of."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(multivariate=True, group=True, seed=seed, n_startup_trials=_startup(trials))


def _constrained_alike(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """``trials`` as GPSampler fits them: once one carries the ``trainable`` constraint (``tell_infeasible``), every
    one does, 0.0 (feasible) where none was set. GPSampler refuses trials whose constraints differ ("The number of
    constraints must be the same for all trials"); the store keeps the constraint on infeasible trials only."""
    if not any(trial.constraints for trial in trials):
        return trials  # no infeasible trial: GPSampler's unconstrained search, the one the truth table measured
    return [trial if trial.constraints else _feasible(trial) for trial in trials]


def _feasible(trial: FrozenTrial) -> FrozenTrial:
    """A copy of ``trial`` with its ``trainable`` constraint satisfied."""
    told = copy.deepcopy(trial)
    told.set_constraint(TRAINABLE, 0.0)
    return told


class ConstraintAwareGPSampler(optuna.samplers.GPSampler):
    """Optuna's GPSampler, which fits a study whose infeasible trials (and only they) carry a constraint."""

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return super().sample_relative(StudyView(study, _constrained_alike), trial, search_space)


SAMPLER_MAKERS: dict[str, Callable[[int, int, int], optuna.samplers.BaseSampler]] = {  # (objectives, trials, seed)
    "nsga2": sampler_for,
    "random": lambda objectives, trials, seed: optuna.samplers.RandomSampler(seed=seed),
    "tpe": _tpe,
    "gp": lambda objectives, trials, seed: ConstraintAwareGPSampler(
        seed=seed, n_startup_trials=_startup(trials), warn_independent_sampling=False
    ),
}


def study_sampler(
    search: Search,
    definition: Study,
    space: SearchSpace,
    trials: int,
    seed: int,
    cost: Callable[[Mapping[str, Value]], float | None] | None = None,
) -> optuna.samplers.BaseSampler:
    """The sampler a study of ``trials`` searched trials runs by ``search``.

    Args:
        search: The preset's search (``Preset.search``).
        definition: The study (its families and objectives).
        space: The space it samples.
        trials: Its searched trials (a family's own sampler is made for its share of them).
        seed: The run's seed.
        cost: A configuration's forward FLOPs (``trial_config.configuration_flops``), which ``search.in_band`` needs.

    Raises:
        SearchSpaceError: ``search.untried`` on a space that is not finite.
        ValueError: ``search.in_band`` without ``cost``.
    """
    if search.in_band and cost is None:
        raise ValueError("a search within the cost band needs each configuration's FLOPs: pass cost")
    objectives = len(definition.objectives)
    make = SAMPLER_MAKERS[search.sampler]
    if not (search.per_family or search.untried):
        return make(objectives, trials, seed)
    share = max(1, trials // len(definition.families)) if search.per_family else trials
    return FamilySampler(
        lambda family_seed: make(objectives, share, family_seed),
        seed,
        per_family=search.per_family,
        untried=family_configurations(definition, space) if search.untried else None,
        cost=cost if search.in_band else None,
        baseline=next(family.label for family in definition.families if family.baseline),
        baseline_costs=baseline_costs(definition, space, cost) if search.matchable and cost is not None else None,
    )


def tell_infeasible(study: optuna.Study, trial: optuna.Trial, reason: str) -> None:
    """Finish ``trial`` as a configuration that cannot train, so that the sampler avoids it.

    Args:
        study: The study the trial belongs to.
        trial: A running trial.
        reason: Why (``diverged``, ``out of memory``, ``forbidden combination``).
    """
    trial.set_user_attr(record.INFEASIBLE, reason)
    trial.set_constraint(TRAINABLE, 1.0)
    # Constrained domination compares an infeasible trial with any other by its violation alone.
    study.tell(trial, [0.0] * len(study.directions))
