"""What the per-family samplers rely on in Optuna's internals (``studies.engine.optuna_internals``), checked
against the installed Optuna: when a release changes either, these tests fail, rather than the samplers
silently learning from every family's trials or overwriting a trial's queued values."""

from __future__ import annotations

import warnings

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import FrozenTrial

from studies.engine.optuna_internals import StudyView, queued_values, trials_while_sampling
from studies.engine.sampler import ConstraintAwareGPSampler, sampler_for


def _study_with_trials(count: int) -> optuna.Study:
    study = optuna.create_study(directions=["maximize", "minimize"])
    for number in range(count):
        study.add_trial(
            optuna.trial.create_trial(
                params={"x": number / count},
                distributions={"x": FloatDistribution(0.0, 1.0)},
                values=[number / count, 1 - number / count],
                user_attrs={"family": "odd" if number % 2 else "even"},
            )
        )
    return study


def test_an_enqueued_trial_s_values_are_where_queued_values_reads_them() -> None:
    study = optuna.create_study()
    study.enqueue_trial({"attention": "damcha", "num_heads": 4})
    trial = study.ask()
    frozen = study.get_trials(deepcopy=False)[trial.number]
    assert queued_values(frozen) == {"attention": "damcha", "num_heads": 4}
    assert [t.number for t in trials_while_sampling(study)] == [t.number for t in study.get_trials(deepcopy=False)]
    plain = study.ask()  # a trial nothing queued
    assert queued_values(study.get_trials(deepcopy=False)[plain.number]) == {}


@pytest.mark.parametrize(
    "sampler",
    [
        optuna.samplers.TPESampler(seed=0, n_startup_trials=2, multivariate=True),
        ConstraintAwareGPSampler(seed=0, n_startup_trials=2),
        sampler_for(2, 12, 0),  # NSGA-II, as the study makes it
    ],
    ids=["tpe", "gp", "nsga2"],
)
def test_a_sampler_reads_a_study_s_trials_only_through_what_a_study_view_shows(sampler) -> None:
    """Each model-based sampler the study uses, given a view that shows one family, reads the trials through
    the view (and the view's filter decides what it learns from)."""
    study = _study_with_trials(12)
    seen: list[list[int]] = []

    def one_family(trials: list[FrozenTrial]) -> list[FrozenTrial]:
        shown = [t for t in trials if t.user_attrs.get("family") == "odd"]
        seen.append([t.number for t in shown])
        return shown

    view = StudyView(study, one_family)
    trial = study.ask()
    frozen = study.get_trials(deepcopy=False)[trial.number]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        space = sampler.infer_relative_search_space(view, frozen)
        sampler.sample_relative(view, frozen, space)
        sampler.sample_independent(view, frozen, "x", FloatDistribution(0.0, 1.0))
    assert seen, "the sampler read the study's trials without Study._get_trials: StudyView no longer filters them"
    assert all(set(numbers) <= {1, 3, 5, 7, 9, 11} for numbers in seen)
