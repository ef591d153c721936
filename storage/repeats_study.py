"""A search's seed repeats live in a study of their own, linked to it, in the same store.

Optuna's own tools read a study's complete trials as its results: ``optuna best-trials``,
``Study.best_trials`` and optuna-dashboard's Pareto front. A seed repeat trains a configuration the
search already tried, on a fresh seed, and is judged on test data: in the search's study it would
enter that front. So a run queues its repeats in ``<search study>:repeats`` (``repeats_study_name``),
and the two studies name each other in their ``record.REPEATS_STUDY`` and ``record.SEARCH_STUDY``
attributes. Each repeat's ``record.REPEAT_OF`` is the number of the search trial it repeats.
Stores written before this kept their repeats in the search's study; reading both places reads both.

Optuna has no public way from a study to its storage, which loading its linked study needs:
``_storage_of`` reads ``Study._storage``, the one use here, checked by
``tests/storage/test_repeats_study.py`` (it fails when an Optuna release changes it).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from storage import record

REPEATS_SUFFIX = ":repeats"


def repeats_study_name(search_name: str) -> str:
    """The name of the study that holds the seed repeats of the study ``search_name``."""
    return f"{search_name}{REPEATS_SUFFIX}"


def is_repeats_study(user_attrs: Mapping[str, Any]) -> bool:
    """Whether a study with these user attributes holds another study's seed repeats."""
    return record.SEARCH_STUDY in user_attrs


def _storage_of(study: optuna.Study) -> optuna.storages.BaseStorage:
    """The storage ``study`` was opened on (Optuna keeps it private: see the module's docstring)."""
    return study._storage


def linked_repeats(study: optuna.Study) -> optuna.Study | None:
    """The study of ``study``'s seed repeats, or None where it has none (no repeat yet, an older store, a study
    held in memory)."""
    name = study.user_attrs.get(record.REPEATS_STUDY)
    if name is None:
        return None
    try:
        return optuna.load_study(study_name=name, storage=_storage_of(study))
    except KeyError:  # deleted since (``optuna delete-study``): its repeats are gone with it
        return None


def open_linked_repeats(study: optuna.Study) -> optuna.Study:
    """The study of ``study``'s seed repeats, created in its store (with the link both ways) if it has none yet.

    Every repeat is queued with all its parameters (``Study.enqueue_trial``), so the study's sampler is never
    asked for a value: Optuna's random sampler, the cheapest, stands in.
    """
    name = repeats_study_name(study.study_name)
    repeats = optuna.create_study(
        study_name=name,
        storage=_storage_of(study),
        directions=study.directions,
        sampler=optuna.samplers.RandomSampler(seed=0),
        load_if_exists=True,
    )
    if study.metric_names is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            repeats.set_metric_names(study.metric_names)
    repeats.set_user_attr(record.SEARCH_STUDY, study.study_name)
    study.set_user_attr(record.REPEATS_STUDY, name)  # after the study exists: a reader never finds a dangling link
    return repeats


def repeats_trials(study: optuna.Study, states: tuple[TrialState, ...] | None = None) -> list[FrozenTrial]:
    """The trials of ``study``'s linked study of seed repeats ([] where it has none); ``states`` as ``get_trials``'s."""
    repeats = linked_repeats(study)
    return [] if repeats is None else repeats.get_trials(deepcopy=False, states=states)


def trials_with_repeats(study: optuna.Study, states: tuple[TrialState, ...] | None = None) -> list[FrozenTrial]:
    """``study``'s trials, then those of its linked study of seed repeats; ``states`` as ``get_trials``'s. A repeat's
    number is its own study's (``record.REPEAT_OF`` names the search trial it repeats)."""
    return [*study.get_trials(deepcopy=False, states=states), *repeats_trials(study, states)]
