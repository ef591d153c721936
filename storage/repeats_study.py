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


class RepeatsStudyError(LookupError):
    """A study that stands as a search's study of seed repeats and is not one: another program's, another
    search's, or holding trials that are not seed repeats of the search (the sentence says which and the fix)."""


def _delete_hint(name: str) -> str:
    return f"delete it (optuna delete-study --study-name '{name}' --storage URL) or rename the search (--fresh)"


def check_repeats_place(storage: optuna.storages.BaseStorage, search_name: str) -> None:
    """Before a run: where the store holds a study under the name of ``search_name``'s seed repeats, it is
    that search's (linked back to it); a run never adopts a study it did not create.

    Raises:
        RepeatsStudyError: the study there names no search study, or another.
    """
    name = repeats_study_name(search_name)
    found = next((summary for summary in optuna.get_all_study_summaries(storage) if summary.study_name == name), None)
    if found is None:
        return
    linked = found.user_attrs.get(record.SEARCH_STUDY)
    if linked != search_name:
        whose = "names no search study" if linked is None else f"holds the seed repeats of {linked!r}"
        raise RepeatsStudyError(
            f"the store holds a study {name!r} that {whose}: it is not {search_name!r}'s study of seed repeats, "
            f"which a run creates itself; {_delete_hint(name)}"
        )


def linked_repeats(study: optuna.Study) -> optuna.Study | None:
    """The study of ``study``'s seed repeats, verified (``verify_repeats``), or None where it has none (no repeat
    yet, an older store, a study held in memory, or deleted since: its repeats are gone with it).

    Raises:
        RepeatsStudyError: the link names another search's study of repeats, or the study found is not this
            search's seed repeats.
    """
    name = study.user_attrs.get(record.REPEATS_STUDY)
    if name is None:
        return None
    if name != repeats_study_name(study.study_name):
        raise RepeatsStudyError(
            f"study {study.study_name!r} names {name!r} as its seed repeats, which are kept in "
            f"{repeats_study_name(study.study_name)!r}: its {record.REPEATS_STUDY!r} attribute was changed; "
            f"set it back (or delete it, if the search has no repeats yet)"
        )
    try:
        repeats = optuna.load_study(study_name=name, storage=_storage_of(study))
    except KeyError:  # deleted since (``optuna delete-study``)
        return None
    verify_repeats(study, repeats)
    return repeats


def verify_repeats(search: optuna.Study, repeats: optuna.Study) -> None:
    """Check that ``repeats`` holds ``search``'s seed repeats and nothing else: it links back to ``search``, and
    every trial names a search trial (``record.REPEAT_OF``) and a fresh seed (``record.REPEAT_INDEX`` >= 1), and
    every complete one has that trial's configuration, a seed no other complete repeat of it has, and a seed
    (``record.SEED``) no search trial trained on.

    Raises:
        RepeatsStudyError: the first trial, or the link, that does not hold, in a sentence.
    """
    where = f"study {repeats.study_name!r}"
    if repeats.user_attrs.get(record.SEARCH_STUDY) != search.study_name:
        raise RepeatsStudyError(
            f"{where} does not link back to {search.study_name!r}: it is not its seed repeats; {_delete_hint(repeats.study_name)}"
        )
    originals = {trial.number: trial for trial in search.get_trials(deepcopy=False)}
    searched = {trial.user_attrs[record.SEED]: trial.number for trial in originals.values() if record.SEED in trial.user_attrs}
    taken: dict[tuple, int] = {}
    for trial in repeats.get_trials(deepcopy=False):
        of, index = trial.user_attrs.get(record.REPEAT_OF), trial.user_attrs.get(record.REPEAT_INDEX)
        said = f"{where}'s trial {trial.number}"
        if not _whole(of) or not _whole(index) or index < 1:
            raise RepeatsStudyError(
                f"{said} is no seed repeat ({record.REPEAT_OF}={of!r}, {record.REPEAT_INDEX}={index!r}): "
                f"a run puts nothing else there; {_delete_hint(repeats.study_name)}"
            )
        original = originals.get(of)
        complete = trial.state == TrialState.COMPLETE  # a queued trial has no parameters yet; only figures count twice
        if original is None or (complete and original.params != trial.params):
            what = "which it does not hold" if original is None else "whose configuration is another"
            raise RepeatsStudyError(
                f"{said} repeats trial {of} of {search.study_name!r}, {what}; {_delete_hint(repeats.study_name)}"
            )
        if not complete:
            continue
        if (seed := trial.user_attrs.get(record.SEED)) in searched:
            raise RepeatsStudyError(
                f"{said} trained on seed {seed}, which search trial {searched[seed]} trained on: no fresh seed, and "
                f"its figure would judge on what selected; {_delete_hint(repeats.study_name)}"
            )
        key = (tuple(sorted(trial.params.items(), key=lambda item: item[0])), index)
        if key in taken:
            raise RepeatsStudyError(
                f"{said} and trial {taken[key]} both repeat trial {of}'s configuration on fresh seed {index}: "
                f"a seed's figure would count twice; {_delete_hint(repeats.study_name)}"
            )
        taken[key] = trial.number


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def open_linked_repeats(study: optuna.Study) -> optuna.Study:
    """The study of ``study``'s seed repeats, created in its store (with the link both ways) if it has none yet.

    Every repeat is queued with all its parameters (``Study.enqueue_trial``), so the study's sampler is never
    asked for a value: Optuna's random sampler, the cheapest, stands in.

    Raises:
        RepeatsStudyError: a study of that name is there that is not this search's (``check_repeats_place``).
    """
    name = repeats_study_name(study.study_name)
    check_repeats_place(_storage_of(study), study.study_name)  # never adopt a study this product did not create
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


def complete_repeats(trials: list[FrozenTrial]) -> int:
    """How many of a study's trials (``trials_with_repeats``: its linked study's, and an older store's among its own)
    are complete seed repeats: a stored verdict records the count, so that a reader sees when they changed since."""
    return sum(trial.state == TrialState.COMPLETE and record.REPEAT_OF in trial.user_attrs for trial in trials)
