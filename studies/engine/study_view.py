"""A study as a sampler sees it: the same study, its trials shown through a function."""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState


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
