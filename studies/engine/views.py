"""A family's view of the store: the searched trials a decision about trial ``n`` reads (early stopping, the
cost band a sampler draws in), all numbered below a bound that depends on trial numbers alone
(``studies.engine.ledger``'s docstring says why)."""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState

from storage import record


def in_family_view(trial: FrozenTrial, family: str | None, view_end: int) -> bool:
    """Whether a trained trial is one of ``family``'s searched trials numbered below ``view_end``: no seed repeat,
    no configuration that could not train."""
    return (
        trial.number < view_end
        and trial.user_attrs.get(record.FAMILY) == family
        and record.REPEAT_OF not in trial.user_attrs
        and record.INFEASIBLE not in trial.user_attrs
    )


def family_view(study: optuna.Study, family: str | None, view_end: int) -> list[FrozenTrial]:
    """The searched, trained trials of ``family`` numbered below ``view_end`` (all told: ``Ledger._settled_before``)."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
    return [t for t in trials if in_family_view(t, family, view_end)]
