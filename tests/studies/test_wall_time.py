"""The one model of a run's wall time that the plan and the live ETA share."""

from __future__ import annotations

import pytest

from studies.catalogue.search_strategy import Search
from studies.engine.wall_time import (
    MEASURED_OVERHEADS,
    STOPPED_SHARE,
    Overheads,
    expected_run_seconds,
    packed_seconds,
    searched_share,
)


def test_trials_are_packed_in_rounds_on_the_slots() -> None:
    assert packed_seconds(40.0, 4, 2) == 20.0  # two rounds of two 10 s trials
    assert packed_seconds(30.0, 3, 2) == 20.0  # the third trial runs alone: a whole round
    assert packed_seconds(30.0, 3, 1) == 30.0
    assert packed_seconds(0.0, 0, 2) == 0.0


def test_a_run_pays_its_start_each_phase_s_workers_and_its_closing() -> None:
    overheads = Overheads(start=10.0, phase=5.0, closing=3.0)
    assert expected_run_seconds([4.0, 4.0], [6.0, 6.0], 2, overheads) == 10 + 5 + 4 + 5 + 6 + 3
    assert expected_run_seconds([4.0, 4.0], [], 2, overheads) == 10 + 5 + 4 + 3  # no repeats: one phase
    assert expected_run_seconds([], [], 2, overheads) == 13.0  # a finished study: its start and its summary
    assert MEASURED_OVERHEADS.around(2) > MEASURED_OVERHEADS.around(1)


@pytest.mark.parametrize("rule", sorted(STOPPED_SHARE))
def test_early_stopping_shortens_a_searched_trial_by_its_measured_share(rule: str) -> None:
    search = Search("random", per_family=True, untried=True, stopping_rule=rule, in_band=True)
    assert searched_share(search, 2000, 4000) == pytest.approx(1 - STOPPED_SHARE[rule] / 2)
    assert searched_share(search, 4000, 4000) == 1.0  # the grace period is the whole trial: nothing stops


def test_no_rule_stops_nothing() -> None:
    assert searched_share(Search("random", per_family=True, untried=True, stopping_rule="none", in_band=True), 2000, 4000) == 1.0
