"""The report reads at a glance: one colour per family in every figure, axes over the contested range, settings
as tables, hover texts in units, knob effects one point per configuration, importances per family."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from reports.html import report_html
from storage import open_storage
from tests.conftest import SMOKE_STUDY

FAMILIES = {"MHA": {"attention": "mha"}, "DAMCHA (paper)": {"attention": "damcha"}, "DAMCHA (cross)": {"attention": "damcha"}}
DISTRIBUTIONS = {
    "attention": CategoricalDistribution(("mha", "damcha")),
    "d_model": CategoricalDistribution((32, 64)),
    "metric_rank": CategoricalDistribution((4, 16)),
}


@pytest.fixture
def study(tmp_path: Path) -> optuna.Study:
    """Three families whose trials come in an order that puts DAMCHA (cross) before DAMCHA (paper) in some
    subsets; one configuration searched twice; a stopped trial far below the contest."""
    study = optuna.create_study(storage=open_storage(f"sqlite:///{tmp_path / 's.db'}"), directions=["maximize", "minimize"])
    study.set_user_attr("budget", {"trials": 12, "families": FAMILIES})
    study.set_user_attr("search_space", {"attention": "one of", "d_model": "one of", "metric_rank": "one of"})
    rows = [
        ("DAMCHA (cross)", 32, 4, 0.55, TrialState.COMPLETE),
        ("MHA", 32, None, 0.56, TrialState.COMPLETE),
        ("DAMCHA (cross)", 64, 16, 0.58, TrialState.COMPLETE),
        ("MHA", 64, None, 0.59, TrialState.COMPLETE),
        ("DAMCHA (paper)", 32, 4, 0.54, TrialState.COMPLETE),
        ("DAMCHA (paper)", 32, 4, 0.56, TrialState.COMPLETE),  # the same configuration again: one point, 0.55
        ("DAMCHA (paper)", 64, 16, 0.57, TrialState.COMPLETE),
        ("DAMCHA (paper)", 64, 4, 0.20, TrialState.PRUNED),  # stopped early far below: drawn at the axis's edge
    ]
    for family, width, rank, accuracy, state in rows:
        params = {"attention": FAMILIES[family]["attention"], "d_model": width} | ({"metric_rank": rank} if rank else {})
        flops = float(width * 1000 + (rank or 0))
        study.add_trial(
            create_trial(
                params=params,
                distributions={name: DISTRIBUTIONS[name] for name in params},
                values=[accuracy, flops] if state == TrialState.COMPLETE else None,
                state=state,
                intermediate_values={1000: accuracy - 0.05, 2000: accuracy},
                user_attrs={
                    "family": family,
                    "baseline": family == "MHA",
                    "flops_per_example": flops,
                    "parameters": width * 100,
                    "examples_per_s": 900.0,
                    "peak_memory_bytes": 3 * 2**20,
                    "wall_seconds": 61.0,
                    **({"reached_step": 1000} if state == TrialState.PRUNED else {}),
                },
            )
        )
    return study


def _colors(figure) -> dict[str, set[str]]:
    """Each family's colours in a figure, by its traces' names (a family's own, its front's, its stopped trials')."""
    found: dict[str, set[str]] = {}
    for trace in figure.data:
        color = (trace.marker.color if trace.marker is not None else None) or (
            trace.line.color if trace.line is not None else None
        )
        name = str(trace.name or "")
        family = next((f for f in sorted(FAMILIES, key=len, reverse=True) if f in name), None)
        if family and isinstance(color, str):
            found.setdefault(family, set()).add(color)
    return found


def test_a_family_has_one_colour_in_every_figure(study: optuna.Study) -> None:
    _, figures = report_html(study, "sqlite:///s.db")
    seen: dict[str, set[str]] = {}
    for name in ("pareto-figure", "pareto-parameters", "knob-effects", "learning-curves", "importances"):
        for family, colors in _colors(figures[name]).items():
            seen.setdefault(family, set()).update(colors)
    assert set(seen) == set(FAMILIES) and all(len(colors) == 1 for colors in seen.values()), seen
    assert seen["MHA"] == {"#d62728"}  # the baseline's red


def test_the_y_axis_covers_the_contest_and_a_stopped_outlier_sits_at_its_edge(study: optuna.Study) -> None:
    _, figures = report_html(study, "sqlite:///s.db")
    figure = figures["pareto-figure"]
    low, high = figure.layout.yaxis.range
    assert 0.50 < low < 0.54 and 0.59 < high < 0.63  # complete trials span 0.54-0.59; 0.20 does not stretch it
    (edge,) = [trace for trace in figure.data if "off the scale" in str(trace.name)]
    assert list(edge.y) == [low] and "20.0%" in edge.hovertext[0] and "stopped early at step 1000" in edge.hovertext[0]


def test_hover_texts_speak_in_units(study: optuna.Study) -> None:
    _, figures = report_html(study, "sqlite:///s.db")
    text = next(trace for trace in figures["pareto-figure"].data if trace.hovertext).hovertext[0]
    assert "3.0 MiB peak memory" in text and "61 s wall time" in text and "%" in text and "bytes" not in text


def test_knob_effects_draw_one_point_per_configuration_and_importances_are_per_family(study: optuna.Study) -> None:
    page, figures = report_html(study, "sqlite:///s.db")
    paper = [t for t in figures["knob-effects"].data if t.name == "DAMCHA (paper)" and t.xaxis == "x"]
    assert sorted(paper[0].y) == pytest.approx([0.55, 0.57])  # (32, 4) twice is one point, their mean; stopped ones aside
    assert {trace.name for trace in figures["importances"].data} <= set(FAMILIES)
    assert not any("attention" in trace.y for trace in figures["importances"].data)  # a family's own knob explains nothing
    settings = page[page.index("<h2>Settings</h2>") : page.index("<h2>Pareto fronts</h2>")]
    assert "{" not in settings and "<th>DAMCHA (cross)</th>" in settings  # tables, not JSON


def test_every_error_bar_of_the_fresh_seeds_lies_within_the_y_axis(smoke_run: dict) -> None:
    """The smoke study's fresh-seed intervals are wide (two seeds on 64 test examples): the axis takes them in
    rather than cutting them off."""
    study = optuna.load_study(study_name=SMOKE_STUDY, storage=smoke_run["url"])
    _, figures = report_html(study, smoke_run["url"])
    figure = figures["pareto-figure"]
    low, high = figure.layout.yaxis.range
    bars = [trace for trace in figure.data if "fresh seeds" in str(trace.name)]
    assert bars, "the smoke study has seed repeats"
    for trace in bars:
        for mean, up, down in zip(trace.y, trace.error_y.array, trace.error_y.arrayminus, strict=True):
            assert low <= mean - down and mean + up <= high, (trace.name, mean, up, down, low, high)
