"""Pareto sets and the comparison against MHA, on frames read from a real store."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from storage import open_storage
from studies.results.frame import trials_frame
from studies.results.fronts import family_budgets, family_fronts, pareto_mask
from studies.results.matching import best_baseline, pairings

ATTENTION = CategoricalDistribution(("mha", "damcha"))
RANK = CategoricalDistribution((4, 8, "full"))


def add(study: optuna.Study, attention: str, accuracy: float, flops: float, *, rank=None, state=TrialState.COMPLETE) -> None:
    params, distributions = {"attention": attention}, {"attention": ATTENTION}
    if rank is not None:
        params["metric_rank"], distributions["metric_rank"] = rank, RANK
    values = [accuracy, flops] if state == TrialState.COMPLETE else None
    trial = create_trial(
        params=params,
        distributions=distributions,
        values=values,
        state=state,
        intermediate_values={10: accuracy},
        user_attrs={"baseline": attention == "mha", "flops_per_example": flops},
    )
    study.add_trial(trial)


@pytest.fixture
def study(tmp_path: Path) -> optuna.Study:
    study = optuna.create_study(storage=open_storage(f"sqlite:///{tmp_path / 's.db'}"), directions=["maximize", "minimize"])
    add(study, "mha", 0.30, 100.0)  # 0
    add(study, "mha", 0.40, 200.0)  # 1
    add(study, "damcha", 0.35, 90.0, rank=4)  # 2: beats baseline 0 and is cheaper
    add(study, "damcha", 0.41, 250.0, rank="full")  # 3: on the front, but no baseline as dear or dearer
    add(study, "damcha", 0.20, 300.0, rank=8)  # 4: dominated
    add(study, "damcha", 0.90, 10.0, rank=8, state=TrialState.PRUNED)  # 5: pruned: never on the front
    return study


def test_frame_keeps_knob_types_and_pruned_accuracy(study: optuna.Study) -> None:
    frame = trials_frame(study)
    assert frame["metric_rank"].tolist() == [None, None, 4, "full", 8, 8]
    assert frame.loc[5, "state"] == "PRUNED" and frame.loc[5, "val_accuracy"] == 0.90
    assert frame["baseline"].tolist() == [True, True, False, False, False, False]


def test_pareto_mask_counts_complete_trials_only(study: optuna.Study) -> None:
    assert pareto_mask(trials_frame(study)).tolist() == [False, True, True, True, False, False]


def test_report_of_a_study_whose_trials_all_failed(tmp_path: Path) -> None:
    from reports.html import write_report

    study = optuna.create_study(storage=open_storage(f"sqlite:///{tmp_path / 's.db'}"), directions=["maximize", "minimize"])
    study.add_trial(
        create_trial(
            params={"attention": "mha"},
            distributions={"attention": ATTENTION},
            state=TrialState.FAIL,
            user_attrs={"baseline": True, "error": "ValueError: <boom>"},
        )
    )
    empty = optuna.create_study(storage=open_storage(f"sqlite:///{tmp_path / 's.db'}"), directions=["maximize", "minimize"])
    for one in (study, empty):
        page = write_report(one, tmp_path / f"{one.study_name}.html").read_text()
        assert 'id="pareto-figure"' in page


def test_pairings_compare_each_family_at_matched_cost_read_from_a_store(study: optuna.Study) -> None:
    frame = trials_frame(study)
    assert frame["family"].tolist() == ["MHA"] * 2 + ["DAMCHA"] * 4  # a store from before families
    assert frame.attrs["families"] == ["MHA", "DAMCHA"]
    # The best MHA (1, 200 FLOPs) has no DAMCHA within 15% of its cost; DAMCHA's best (3, 250 FLOPs) is
    # compared with the MHA at its own cost (1: 250/200 = 1.25, outside the band, so the nearest, flagged).
    (pairing,) = pairings(frame, frame.attrs["families"])
    assert (pairing.candidate, pairing.baseline, pairing.matched, pairing.at_best_baseline) == (3, 1, False, False)
    assert best_baseline(frame) == 1


def test_each_family_has_its_front_and_its_budget(study: optuna.Study) -> None:
    frame = trials_frame(study)
    assert frame[family_fronts(frame)]["number"].tolist() == [0, 1, 2, 3]  # 0 is on MHA's own front
    budgets = family_budgets(frame).set_index("family")
    assert budgets.index.tolist() == ["MHA", "DAMCHA"]  # the baseline first
    assert budgets.loc["DAMCHA", ["trials", "complete", "stopped early", "seed repeats"]].tolist() == [4, 3, 1, 0]


def test_the_fronts_table_leaves_a_family_s_missing_knobs_blank_and_keeps_integers(study: optuna.Study, tmp_path: Path) -> None:
    from reports.html import write_report

    page = write_report(study, tmp_path / "report.html").read_text()
    table = page[page.index("<h2>Each family's front</h2>") : page.index("<h2>Provenance</h2>")]
    assert "<td>4</td>" in table and "<td>full</td>" in table  # metric_rank as the study gave it
    assert "nan" not in table and "<td>4.0</td>" not in table  # pandas widened the column; MHA has no metric_rank
