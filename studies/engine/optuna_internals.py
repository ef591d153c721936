"""The two places where the samplers rely on Optuna's internals, for want of a public call, each said once
here and checked by ``tests/studies/test_optuna_internals.py``, which fails when an Optuna release changes
them:

- a sampler reads a study's trials through ``Study._get_trials``: a ``StudyView`` overrides it to show a
  family's sampler that family's trials alone (Optuna offers no filtered study; a study of copies would
  need syncing and would give the sampler other trial numbers);
- an enqueued trial's values are kept in its ``system_attrs["fixed_params"]``: ``queued_values`` reads
  them while the sampler fills in the rest (they are not yet ``params``; Optuna has no accessor);
- while a trial is sampled, ``Study._get_trials(use_cache=True)`` reads the store once for all of that
  trial's parameters, as Optuna's own samplers do: ``trials_while_sampling`` (``get_trials`` would read
  the store again for each parameter and each proposal).
"""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState


def queued_values(trial: FrozenTrial) -> dict[str, Any]:
    """The values ``Study.enqueue_trial`` gave ``trial``, which the sampler must not change ({} for none)."""
    return dict(trial.system_attrs.get("fixed_params", {}))


def trials_while_sampling(study: optuna.Study) -> list[FrozenTrial]:
    """The study's trials, read once per sampled trial (Optuna's cache for that trial), not copied."""
    return study._get_trials(deepcopy=False, use_cache=True)


class StudyView:
    """``study`` with its trials passed through ``shown``, everything else as it is.

    Optuna's samplers read a study's trials through ``Study._get_trials`` (``get_trials`` and
    ``trials`` call it), so a view changes what a sampler learns from, never what the store holds.

    Args:
        study: The study viewed.
        shown: The trials a sampler is shown, from those the study holds (``_get_trials``'s).
    """

    def __init__(self, study: optuna.Study, shown: Callable[[list[FrozenTrial]], list[FrozenTrial]]) -> None:
        self._whole, self._shown = study, shown

    def __getattr__(self, name: str) -> Any:
        return getattr(self._whole, name)

    def _get_trials(
        self, deepcopy: bool = True, states: Container[TrialState] | None = None, use_cache: bool = False
    ) -> list[FrozenTrial]:
        return self._shown(self._whole._get_trials(deepcopy=deepcopy, states=states, use_cache=use_cache))

    def get_trials(self, deepcopy: bool = True, states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        return self._get_trials(deepcopy, states)

    @property
    def trials(self) -> list[FrozenTrial]:
        return self.get_trials()
