"""A search's seed repeats in a linked study of the same store (``storage.repeats_study``), on a real SQLite store."""

from __future__ import annotations

import re
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
    repeat = optuna.trial.create_trial(
        values=[0.9, 1.0], user_attrs={record.FAMILY: "MHA", record.REPEAT_OF: 0, record.REPEAT_INDEX: 1}
    )
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


def _run(url: str, *options: str) -> tuple[int, str]:
    """``studies.run`` on the smoke preset; its exit code and what it printed to stderr."""
    import contextlib
    import io

    from studies.run import main

    said = io.StringIO()
    with contextlib.redirect_stderr(said), pytest.raises(SystemExit) as exited:
        main(["lra_sharing", "--preset", "smoke", "--storage", url, *options])
    return exited.value.code, said.getvalue()


def _listed(url: str) -> tuple[int, str]:
    import contextlib
    import io

    from reports.__main__ import main

    said = io.StringIO()
    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
        try:
            code = main(["list", "--storage", url])
        except SystemExit as exited:
            code = exited.code
    return code, said.getvalue()


def test_a_run_never_adopts_a_study_of_repeats_it_did_not_create(tmp_path: Path) -> None:
    """Another program's study under the repeats' name: once adopted, its trials counted as search runs ("DAMCHA
    (paper) gains 13.3"); now the run refuses before it stores anything."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    foreign = optuna.create_study(study_name=repeats_study_name("lra_sharing-smoke-v6"), storage=open_storage(url))
    foreign.enqueue_trial({"x": 1.0})
    code, said = _run(url)
    assert code == 2 and "is not 'lra_sharing-smoke-v6''s study of seed repeats" in said and "optuna delete-study" in said
    assert [s.study_name for s in optuna.get_all_study_summaries(open_storage(url))] == [foreign.study_name]  # nothing stored


def test_a_study_of_repeats_is_verified_before_it_is_believed(smoke_run: dict, tmp_path: Path) -> None:
    """Each way a linked study of repeats can be wrong is refused in a sentence, exit 2, by the list, the report and
    a resumed run (before any trial runs and before anything is stored); a deleted one makes the stored verdict stale."""
    from tests.conftest import SMOKE_STUDY, copy_store

    def broken(change) -> str:  # noqa: ANN001 (a function of the copy's search study and its study of repeats)
        url = copy_store(smoke_run["url"], tmp_path / f"{change.__name__}.db")
        search = optuna.load_study(study_name=SMOKE_STUDY, storage=open_storage(url))
        change(search, linked_repeats(search))
        return url

    def another_search_s(search: optuna.Study, repeats: optuna.Study) -> None:
        other = optuna.create_study(study_name="other-smoke-v1", storage=_storage_of(search))
        open_linked_repeats(other)
        search.set_user_attr(record.REPEATS_STUDY, repeats_study_name("other-smoke-v1"))

    def a_repeat_of_no_trial(search: optuna.Study, repeats: optuna.Study) -> None:
        trial = repeats.ask()
        trial.set_user_attr(record.REPEAT_OF, 999)
        trial.set_user_attr(record.REPEAT_INDEX, 1)

    def a_seed_twice(search: optuna.Study, repeats: optuna.Study) -> None:
        first = next(t for t in repeats.trials if t.state == optuna.trial.TrialState.COMPLETE)
        repeats.add_trial(
            optuna.trial.create_trial(
                params=first.params, distributions=first.distributions, values=first.values, user_attrs=first.user_attrs
            )
        )

    def a_searched_seed(search: optuna.Study, repeats: optuna.Study) -> None:
        first = next(t for t in repeats.trials if t.state == optuna.trial.TrialState.COMPLETE)
        searched = next(t for t in search.trials if t.number != first.user_attrs[record.REPEAT_OF])
        attributes = first.user_attrs | {record.REPEAT_INDEX: 99, record.SEED: searched.user_attrs[record.SEED]}
        repeats.add_trial(
            optuna.trial.create_trial(
                params=first.params, distributions=first.distributions, values=first.values, user_attrs=attributes
            )
        )

    for change, words in (
        (another_search_s, "names 'other-smoke-v1:repeats' as its seed repeats"),
        (a_searched_seed, "which search trial"),
        (a_repeat_of_no_trial, "repeats trial 999 of 'lra_sharing-smoke-v6', which it does not hold"),
        (a_seed_twice, "on fresh seed 1: a seed's figure would count twice"),
    ):
        url = broken(change)
        verdict = optuna.load_study(study_name=SMOKE_STUDY, storage=open_storage(url)).user_attrs[record.VERDICT]
        code, said = _listed(url)
        assert code == 2 and words in said, (change.__name__, said)
        before = optuna.load_study(study_name=SMOKE_STUDY, storage=open_storage(url)).user_attrs
        code, said = _run(url, "--trials", "9")
        assert code == 2 and words in said, (change.__name__, said)
        after = optuna.load_study(study_name=SMOKE_STUDY, storage=open_storage(url)).user_attrs
        assert after == before and after[record.VERDICT] == verdict  # nothing stored: not even the run's command

    url = copy_store(smoke_run["url"], tmp_path / "deleted.db")
    optuna.delete_study(study_name=repeats_study_name(SMOKE_STUDY), storage=open_storage(url))
    code, said = _listed(url)
    assert code == 0 and re.search(
        r"verdict \(stale: it read [1-9]\d* seed repeats, the store holds 0 now; python -m reports", said
    )
