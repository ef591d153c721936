"""A search's seed repeats in a linked study of the same store (``storage.repeats_study``), on a real SQLite store."""

from __future__ import annotations

import warnings
from pathlib import Path

import optuna
import pytest

from reports.store_index import resolve_study_name
from storage import open_storage, record
from storage.repeats_study import (
    _storage_of,
    is_repeats_study,
    linked_repeats,
    open_linked_repeats,
    repeats_study_name,
    repeats_trials,
)


def _search(tmp_path: Path) -> tuple[optuna.Study, str]:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    study = optuna.create_study(study_name="lra_sharing-smoke-v6", storage=open_storage(url), directions=["maximize", "minimize"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(["val_accuracy", "flops_per_example"])
    return study, url


def test_the_one_internal_a_study_s_storage_is_where_optuna_keeps_it(tmp_path: Path) -> None:
    """Optuna has no public accessor for a study's storage; if a release moves it, this fails first."""
    storage = open_storage(f"sqlite:///{tmp_path / 'store.db'}")
    study = optuna.create_study(study_name="s", storage=storage)
    other = optuna.create_study(study_name="other", storage=storage)
    other.set_user_attr("here", True)
    found = _storage_of(study)  # Optuna's cache in front of ``storage``
    assert isinstance(found, optuna.storages.BaseStorage)
    assert optuna.load_study(study_name="other", storage=found).user_attrs == {"here": True}


def test_a_search_and_its_repeats_name_each_other_and_only_the_search_holds_the_front(tmp_path: Path) -> None:
    search, url = _search(tmp_path)
    assert linked_repeats(search) is None and repeats_trials(search) == []  # none before the first repeat
    search.add_trial(optuna.trial.create_trial(values=[0.5, 10.0], user_attrs={record.FAMILY: "MHA"}))
    repeats = open_linked_repeats(search)
    assert repeats.study_name == repeats_study_name(search.study_name) == "lra_sharing-smoke-v6:repeats"
    assert open_linked_repeats(search).study_name == repeats.study_name  # opened again, not made twice
    assert repeats.directions == search.directions and repeats.metric_names == search.metric_names
    repeat = optuna.trial.create_trial(values=[0.9, 1.0], user_attrs={record.FAMILY: "MHA", record.REPEAT_OF: 0})
    repeats.add_trial(repeat)  # it would dominate the search's trial, were it in the search's study

    reread = optuna.load_study(study_name=search.study_name, storage=url)  # another process, by the store alone
    assert reread.user_attrs[record.REPEATS_STUDY] == repeats.study_name
    assert is_repeats_study(linked_repeats(reread).user_attrs) and not is_repeats_study(reread.user_attrs)
    assert [t.user_attrs[record.REPEAT_OF] for t in repeats_trials(reread)] == [0]
    assert [t.number for t in reread.best_trials] == [0] and reread.best_trials[0].values == [0.5, 10.0]


def test_a_study_of_repeats_is_no_study_a_report_is_asked_of(tmp_path: Path) -> None:
    search, url = _search(tmp_path)
    repeats = open_linked_repeats(search)
    summaries = optuna.get_all_study_summaries(_storage_of(search))
    with pytest.raises(LookupError, match="holds the seed repeats of 'lra_sharing-smoke-v6'.*name 'lra_sharing-smoke-v6'"):
        resolve_study_name(repeats.study_name, summaries, url)
    assert resolve_study_name("lra_sharing", summaries, url) == search.study_name
