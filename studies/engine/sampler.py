"""The study's sampler, and how it is told about configurations that cannot train.

Optuna's samplers learn nothing from FAIL trials, so a region whose loss diverges, or
whose model does not fit in memory, would be proposed again and again. Optuna's own
answer is a constraint (``Trial.set_constraint``): a trial whose constraint value is
above 0 is *infeasible*. NSGA-II ranks it behind every feasible trial (constrained
domination), TPE counts it among the bad ones, and ``Study.best_trials`` and
optuna-dashboard leave it out. Samplers read constraints of COMPLETE trials, so such a
trial is told COMPLETE, with placeholder objective values, its ``trainable`` constraint
violated, and an ``infeasible`` user attribute saying why (``reports.results.frame`` shows it as
``INFEASIBLE``, never as a result).
"""

from __future__ import annotations

import optuna

from reports.results.names import INFEASIBLE_ATTRIBUTE

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


def tell_infeasible(study: optuna.Study, trial: optuna.Trial, reason: str) -> None:
    """Finish ``trial`` as a configuration that cannot train, so that the sampler avoids it.

    Args:
        study: The study the trial belongs to.
        trial: A running trial.
        reason: Why (``diverged``, ``out of memory``, ``forbidden combination``).
    """
    trial.set_user_attr(INFEASIBLE_ATTRIBUTE, reason)
    trial.set_constraint(TRAINABLE, 1.0)
    # Constrained domination compares an infeasible trial with any other by its violation alone.
    study.tell(trial, [0.0] * len(study.directions))
