"""An exhaustive preset (a truth table): every configuration of the space, each seed's pass in turn,
on seeds shared across configurations, never stopped early, resumed where a run left off."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from ray.exceptions import ActorDiedError

from search_space.knobs import KNOBS, RULES
from search_space.space import Choice, Range, SearchSpace, SearchSpaceError
from studies.catalogue import LRA_SHARING
from studies.catalogue.schema import choices
from studies.engine.ledger import Asking, Ledger, LedgerStore, TrialSetup
from studies.engine.seeds import TABLE_SEEDS_FROM
from studies.engine.study_space import exhaustive_grid, preset_space, table_grid
from studies.results.frame import configuration_key
from tests.studies.test_ledger import PRESET, make_ledger, report

TABLE = replace(
    PRESET,
    name="table",
    domains=choices(
        d_model=(32,), num_heads=(2, 4), sharing=("stack",), metric_rank=(4,), generator_depth=(0, 1), learning_rate=(1e-3,)
    ),
    repeat_seeds=0,
    exhaustive_seeds=2,
)
# MHA: 2 head counts; DAMCHA (paper): the authors' configuration at 2 head counts, then 2 x 2;
# DAMCHA (cross): 2 x 2. Each twice.
TABLE_SIZE = 2 * (2 + 2 + 4 + 4)


def table_ledger(tmp_path: Path, budget: int = TABLE_SIZE) -> Ledger:
    return make_ledger(tmp_path, [], budget, preset=TABLE)


def train_all(ledger: Ledger, fail_first: bool = False) -> list[dict]:
    """Ask until the ledger has nothing left; every trial ends complete (the first dies once when ``fail_first``)."""
    asked = []
    while (config := ledger.ask(f"ray-{len(asked)}")) is not None:
        asked.append(config)
        if fail_first and len(asked) == 1:
            died = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
            ledger.finish(config.number, report(20), died, ActorDiedError())
            continue
        for step in TABLE.train.report_steps():  # the worst value at every evaluation: never stopped
            assert not ledger.stops(config.number, step, 0.0)
            ledger.record_report(config.number, report(step))
        ledger.finish(config.number, report(60, final=True) | {"test_accuracy": 0.5}, None)
    return asked


def table_rows(ledger: Ledger) -> Counter:
    """(point, configuration, seed index) of every complete trial, counted."""
    return Counter(
        (t.user_attrs.get("point"), configuration_key(t.params), t.user_attrs["seed_index"])
        for t in ledger.study.get_trials()
        if t.state.name == "COMPLETE"
    )


def test_the_space_lists_every_configuration_the_sampler_could_choose_and_no_forbidden_one() -> None:
    space = SearchSpace(knobs=KNOBS, searched=("attention", "metric_mode", "metric_form"), rules=RULES)
    damcha = space.configurations({"attention": "damcha"})
    forms = KNOBS["metric_form"].domain.values
    assert {(c["metric_mode"], c["metric_form"]) for c in damcha} == {
        (mode, form) for mode in KNOBS["metric_mode"].domain.values for form in forms if mode != "rowsum" or form == "bilinear"
    }  # rowsum is bilinear only (the rule)
    assert space.configurations({"attention": "mha"}) == [{"attention": "mha"}]  # DAMCHA's knobs do not exist for MHA
    ranged = space.narrowed({"metric_form": Choice(forms)})
    ranged = replace(ranged, knobs=dict(ranged.knobs) | {"metric_mode": replace(KNOBS["metric_mode"], domain=Range(0, 1))})
    with pytest.raises(SearchSpaceError, match="metric_mode.*no finite grid"):
        ranged.configurations({"attention": "damcha"})


def test_every_configuration_trains_once_per_seed_on_seeds_shared_across_configurations(tmp_path: Path) -> None:
    ledger = table_ledger(tmp_path)
    asked = train_all(ledger)
    assert len(asked) == TABLE_SIZE == len(exhaustive_grid(LRA_SHARING, ledger.space, 2))
    rows = table_rows(ledger)
    assert len(rows) == TABLE_SIZE and set(rows.values()) == {1}  # each (configuration, seed) once
    trials = ledger.study.get_trials()
    first_pass = [t.user_attrs["seed_index"] for t in trials[: TABLE_SIZE // 2]]
    assert first_pass == [0] * (TABLE_SIZE // 2)  # the whole space on one seed before the next
    for trial in trials:
        assert trial.user_attrs["seed"] == 3 * 100_000 + TABLE_SEEDS_FROM + trial.user_attrs["seed_index"]
    assert Counter(t.user_attrs["family"] for t in trials[:6]) == Counter({"MHA": 2, "DAMCHA (paper)": 2, "DAMCHA (cross)": 2})
    points = [t for t in trials if t.user_attrs.get("point") == "authors' configuration"]
    assert len(points) == 4 and all(t.user_attrs["train_config"]["learning_rate"] == 3e-4 for t in points)  # their recipe


def test_a_stopped_table_resumes_where_it_left_off_and_a_died_trial_is_retried_on_its_seed(tmp_path: Path) -> None:
    first = table_ledger(tmp_path, budget=5)
    train_all(first, fail_first=True)  # the retry of the died trial comes first in the queue
    trials = first.study.get_trials()
    died, retried = trials[0], [t for t in trials if t.user_attrs.get("retry_of") == 0]
    assert died.state.name == "FAIL" and len(retried) == 1
    assert retried[0].params == died.params and retried[0].user_attrs["seed"] == died.user_attrs["seed"]
    resumed = Ledger(
        LedgerStore(first.study, first.storage),
        Asking(first.definition, TABLE, first.space, TABLE_SIZE, seed=3),
        TrialSetup(str(tmp_path)),
    )
    train_all(resumed)
    rows = table_rows(resumed)
    assert len(rows) == TABLE_SIZE and set(rows.values()) == {1}  # nothing twice, nothing missing
    assert resumed.ask("more") is None


def test_lra_sharing_table_trains_the_quick_preset_s_whole_space() -> None:
    quick, table = LRA_SHARING.preset("quick"), LRA_SHARING.preset("table")
    same = {"description": quick.description, "trials": quick.trials, "deciding": None, "reliability": quick.reliability}
    assert replace(table, name="quick", **same) == replace(
        quick, repeat_seeds=0, exhaustive_seeds=3
    )  # the same task, training, fixed knobs and domains
    assert table.trials == len(table_grid(LRA_SHARING, preset_space(LRA_SHARING, table), table))


def test_the_deciding_configurations_train_more_seeds_after_the_whole_space() -> None:
    table = LRA_SHARING.preset("table")
    space = preset_space(LRA_SHARING, table)
    grid = table_grid(LRA_SHARING, space, table)
    whole = exhaustive_grid(LRA_SHARING, space, 3)
    assert grid[: len(whole)] == whole  # the committed 3-seed table is the first part, unchanged
    extra = grid[len(whole) :]
    assert {entry.seed_index for entry in extra} == set(range(3, 9))
    runs = Counter((entry.family.label, entry.point and entry.point.label, tuple(entry.configuration.items())) for entry in extra)
    assert set(runs.values()) == {6}
    for family, point, configuration in runs:
        knobs = dict(configuration)
        assert (
            point == "authors' configuration"
            or (knobs["d_model"] == 64 and knobs["learning_rate"] == 1e-3)
            or family == "MHA"  # every MHA: any can be a baseline, and a search tries some three times
        )
    assert Counter(family for family, _, _ in runs) == Counter({"MHA": 8, "DAMCHA (paper)": 16 + 4, "DAMCHA (cross)": 16})


def test_cross_head_s_deciding_configurations_are_those_a_matched_comparison_can_select() -> None:
    """At 1e-3, every configuration some MHA matches in cost gets 15 seeds, at either width; none that no MHA matches:
    MoA with 2 experts per head at D=64 (1.58x MHA's FLOPs at D=64) took 12 extra seeds each in the table's first
    design, and DAMCHA (cross) at D=48, which a search can select against MHA at D=48, had 3."""
    from studies.catalogue import get_study

    study = get_study("cross_head")
    table = study.preset("table")
    space = preset_space(study, table)
    grid = table_grid(study, space, table)
    assert table.trials == len(grid)
    extra = Counter(
        (entry.family.label, entry.point and entry.point.label, tuple(sorted(entry.configuration.items())))
        for entry in grid
        if entry.seed_index >= table.exhaustive_seeds
    )
    assert set(extra.values()) == {15 - 3}

    def deciding(family: str, **knobs: object) -> set[bool]:
        """Whether each configuration of ``family`` with these knobs (at 1e-3) takes the deciding seeds."""
        return {
            any(label == family and point is None and dict(config) == configuration for label, point, config in extra)
            for configuration in space.configurations(next(f.values for f in study.families if f.label == family))
            if all(configuration[name] == value for name, value in (knobs | {"learning_rate": 1e-3}).items())
        }

    assert deciding("MoA", d_model=64, expert_factor=2) == {False}
    assert deciding("MoA", d_model=48, expert_factor=2) == {True}
    assert deciding("DAMCHA (cross)", d_model=48, metric_rank=4) == {True}
    assert deciding("DAMCHA (cross)", d_model=48, metric_rank=16) == {False}  # 1.16x MHA at D=48, 0.77x at D=64
    assert deciding("Talking-Heads", d_model=64, num_heads=4) == {False}
    assert deciding("Talking-Heads", d_model=48, num_heads=4) == {True}
    assert deciding("DAMCHA (paper)", metric_rank=4) == {False}
    assert deciding("MHA") == {True}
    families = Counter(label for label, point, _ in extra if point is None)
    assert families == Counter(
        {
            "MHA": 4,
            "DAMCHA (paper)": 4,
            "DAMCHA (cross)": 6,
            "Talking-Heads": 2,
            "DCMHA": 2,
            "Collaborative MHA": 4,
            "Mixed MHA": 4,
            "MoA": 6,
        }
    )
