"""The sampler is told about trials whose configuration cannot train, and learns to avoid their region.

Real Optuna samplers on real stores; the "training" is the synthetic search of
``benchmarks.infeasible`` (learning rates above 1 diverge), so hundreds of trials take a second.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from benchmarks.infeasible import DIVERGING_SHARE, diverging_share
from storage import open_storage, record
from studies.catalogue import get_study
from studies.catalogue.search_strategy import Search
from studies.engine.family_sampler import FamilySampler
from studies.engine.sampler import SAMPLER_MAKERS, TRAINABLE, sampler_for, study_sampler
from studies.engine.study_space import preset_space
from studies.results.frame import outcome, trials_frame
from studies.results.names import INFEASIBLE

TRIALS = 80


@pytest.mark.parametrize("objectives", [1, 2], ids=["tpe", "multi-objective-tpe"])
def test_tpe_told_about_diverged_trials_stops_proposing_their_region(objectives: int) -> None:
    told = [diverging_share(optuna.samplers.TPESampler(seed=seed), objectives, TRIALS)[1] for seed in range(3)]
    untold = [diverging_share(optuna.samplers.TPESampler(seed=seed), objectives, TRIALS, told=False)[1] for seed in range(3)]
    assert max(told) < 0.3 < DIVERGING_SHARE  # told: it learned; its second half rarely diverges
    assert min(untold) > 0.75  # the same sampler not told keeps proposing the region: the telling is what works


def test_the_products_sampler_learns_from_infeasible_trials_that_no_result_includes(tmp_path: Path) -> None:
    sampler = sampler_for(objectives=2, trials=32, seed=0)  # NSGA-II (population 8), as a study runs it
    study, share = diverging_share(sampler, 2, TRIALS, storage=open_storage(f"sqlite:///{tmp_path / 'store.db'}"))
    assert share < DIVERGING_SHARE  # NSGA-II breeds from its best trials, which never diverged
    stored = study.get_trials()
    infeasible = {t.number for t in stored if t.params["learning_rate"] > 1}
    assert infeasible  # in Optuna's own terms: COMPLETE, its constraint violated
    for trial in stored:
        assert trial.state == TrialState.COMPLETE
        assert trial.constraints == ({TRAINABLE: 1.0} if trial.number in infeasible else {})
        assert (outcome(trial) == INFEASIBLE) == (record.INFEASIBLE in trial.user_attrs) == (trial.number in infeasible)
    assert not infeasible & {t.number for t in study.best_trials}  # Optuna's Pareto front leaves them out...
    frame = trials_frame(study)  # ...and so does every result of this product
    assert set(frame.loc[frame["state"] == INFEASIBLE, "number"]) == infeasible
    assert frame.loc[frame["state"] == INFEASIBLE, "val_accuracy"].isna().all()


def test_the_products_gpsampler_searches_beside_infeasible_trials_and_avoids_their_region() -> None:
    with pytest.raises(ValueError, match="number of constraints must be the same"):  # Optuna's own, on this product's store
        diverging_share(optuna.samplers.GPSampler(seed=0, n_startup_trials=4), 2, 12)
    shares = [diverging_share(SAMPLER_MAKERS["gp"](2, 8, seed), 2, 40)[1] for seed in range(2)]  # a family's share: 8
    assert max(shares) < 0.2 < DIVERGING_SHARE  # told, it learned; its second half rarely diverges


class _Watching(optuna.samplers.RandomSampler):
    """A random sampler that records the families of the trials it is shown."""

    def __init__(self, seed: int, seen: set) -> None:
        super().__init__(seed=seed)
        self.seen = seen

    def sample_independent(self, study, trial, param_name, param_distribution):
        self.seen.update(t.user_attrs.get("family") for t in study.get_trials(deepcopy=False) if t.number != trial.number)
        return super().sample_independent(study, trial, param_name, param_distribution)


def _family_study(sampler: optuna.samplers.BaseSampler, trials: int) -> list[tuple[str, tuple]]:
    """``trials`` trials of two families in turn, each suggesting two categorical knobs; (family, values) each."""
    study = optuna.create_study(sampler=sampler)
    taken = []
    for number in range(trials):
        family = ("a", "b")[number % 2]
        study.enqueue_trial({"kind": family}, user_attrs={"family": family})
        trial = study.ask()
        trial.suggest_categorical("kind", ["a", "b"])
        values = (trial.suggest_categorical("x", [1, 2, 3]), trial.suggest_categorical("y", [1, 2]))
        study.tell(trial, float(sum(values)))
        taken.append((family, values))
    return taken


GRIDS = {family: [{"kind": family, "x": x, "y": y} for x in (1, 2, 3) for y in (1, 2)] for family in ("a", "b")}


def test_a_family_s_sampler_sees_its_family_s_trials_alone() -> None:
    seen: dict[int, set] = {}

    def make(seed: int) -> optuna.samplers.BaseSampler:
        return _Watching(seed, seen.setdefault(seed, set()))

    _family_study(FamilySampler(make, seed=0, per_family=True), 8)
    assert sorted(map(sorted, seen.values())) == [["a"], ["b"]]  # two samplers, each shown one family
    shared: dict[int, set] = {}
    _family_study(FamilySampler(lambda seed: _Watching(seed, shared.setdefault(seed, set())), seed=0, per_family=False), 8)
    assert list(shared.values()) == [{"a", "b"}]  # one sampler, shown both


MAKERS = {
    "random": lambda seed: optuna.samplers.RandomSampler(seed=seed),
    # relative sampling from the third trial of a family on: the proposals that repeat are redrawn
    "tpe": lambda seed: optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=2),
}


@pytest.mark.parametrize("maker", MAKERS)
@pytest.mark.parametrize("per_family", [True, False], ids=["per-family", "shared"])
def test_untried_sampling_takes_every_configuration_of_a_family_before_any_twice(per_family: bool, maker: str) -> None:
    for seed in range(5):
        sampler = FamilySampler(MAKERS[maker], seed=seed, per_family=per_family, untried=GRIDS)
        taken = _family_study(sampler, 16)  # 8 a family: each family's 6 configurations, then 2 more
        for family in ("a", "b"):
            values = [v for f, v in taken if f == family]
            assert len(set(values[:6])) == 6, (seed, family, values)
    plain = [_family_study(optuna.samplers.RandomSampler(seed=seed), 12) for seed in range(5)]
    assert any(len({v for f, v in taken if f == "a"}) < 6 for taken in plain)  # the test could fail: plain random repeats


def _band_study(sampler: optuna.samplers.BaseSampler, trials: int) -> list[tuple[str, int, int, int | None]]:
    """``trials`` trials of baseline ``a`` and family ``b`` in turn, maximizing ``x`` (a trial's cost is ``x``):
    (family, x, y, x of the best ``a`` trial told before it) each."""
    study = optuna.create_study(sampler=sampler, direction="maximize")
    taken: list[tuple[str, int, int, int | None]] = []
    for number in range(trials):
        family = ("a", "b")[number % 2]
        best_a = max((x for f, x, _, _ in taken if f == "a"), default=None)
        study.enqueue_trial({"kind": family}, user_attrs={"family": family})
        trial = study.ask()
        trial.suggest_categorical("kind", ["a", "b"])
        x, y = trial.suggest_categorical("x", [1, 2, 3]), trial.suggest_categorical("y", [1, 2])
        study.tell(trial, float(x))
        taken.append((family, x, y, best_a))
    return taken


@pytest.mark.parametrize("maker", MAKERS)
def test_in_band_sampling_takes_the_best_baseline_s_cost_while_a_configuration_there_is_untried(maker: str) -> None:
    def cost(config: dict) -> float:
        return float(config["x"])  # 1, 2, 3: no two values within the 15% band of each other

    outside = 0
    for seed in range(5):
        sampler = FamilySampler(MAKERS[maker], seed=seed, per_family=True, untried=GRIDS, cost=cost, baseline="a")
        taken = _band_study(sampler, 16)
        for number, (family, x, _, best_a) in enumerate(taken):
            if family != "b" or best_a is None:
                continue
            tried = {(tx, ty) for f, tx, ty, _ in taken[:number] if f == "b"}
            if any((best_a, other) not in tried for other in (1, 2)):
                assert x == best_a, (seed, number, taken)  # an untried one in the band was left: taken
        unbanded = _band_study(FamilySampler(MAKERS[maker], seed=seed, per_family=True, untried=GRIDS), 16)
        outside += sum(family == "b" and best is not None and x != best for family, x, _, best in unbanded[:8])
    assert outside  # the test could fail: without the band, family b's first trials leave it


@pytest.mark.parametrize("maker", MAKERS)
def test_matchable_sampling_never_draws_a_configuration_no_baseline_matches_in_cost_while_one_is_left(maker: str) -> None:
    """Family ``b``'s configurations with ``x`` = 3 cost 3, which none of baseline ``a``'s configurations (costs 1 and
    2, ``a`` searching ``x`` in 1..2 alone) lies within the cost band of: with ``matchable`` they are drawn only once
    the matchable ones (``x`` 1 or 2, four of them) are all tried; without it, some of ``b``'s first trials take them."""
    grids = {"a": [{"kind": "a", "x": x, "y": 1} for x in (1, 2)], "b": GRIDS["b"]}

    def cost(config: dict) -> float:
        return float(config["x"])

    unmatchable_early = 0
    for seed in range(5):
        sampler = FamilySampler(
            MAKERS[maker], seed=seed, per_family=True, untried=grids, cost=cost, baseline="a", baseline_costs=[1.0, 2.0]
        )
        taken = [x for family, x, _, _ in _band_study(sampler, 12) if family == "b"]
        assert 3 not in taken[:4] and set(taken[4:]) == {3}, (seed, taken)  # the four matchable, then the rest
        plain = FamilySampler(MAKERS[maker], seed=seed, per_family=True, untried=grids, cost=cost, baseline="a")
        unmatchable_early += sum(x == 3 for family, x, _, _ in _band_study(plain, 8) if family == "b")
    assert unmatchable_early  # the test could fail: without it, family b's first trials take unmatchable ones


def test_a_matchable_search_needs_the_band_s_costs() -> None:
    with pytest.raises(ValueError, match="in_band=True"):
        Search("random", in_band=False, matchable=True)
    assert "only configurations some baseline configuration matches in cost" in Search(matchable=True).describe(10, 20)


def test_a_search_in_the_band_needs_untried_configurations_and_their_costs() -> None:
    with pytest.raises(ValueError, match="untried=True"):
        Search("random", per_family=False, untried=False, stopping_rule="none", in_band=True)
    definition = get_study("lra_sharing")
    preset = definition.presets["quick"]
    search = Search("random", per_family=False, untried=True, stopping_rule="none", in_band=True)
    with pytest.raises(ValueError, match="pass cost"):
        study_sampler(search, definition, preset_space(definition, preset), 24, 0)
