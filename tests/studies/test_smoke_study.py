"""The smoke preset end to end on a real local Ray and SQLite store, read back with plain Optuna."""

from __future__ import annotations

import re
from dataclasses import fields

from optuna.trial import TrialState

from studies.registry import LRA_SHARING
from tests.conftest import SMOKE_STUDY as NAME
from trainers.config import ModelConfig

PRESET = LRA_SHARING.preset("smoke")
STEPS = PRESET.train.steps
REPORT_STEPS = PRESET.train.report_steps()
ATTRIBUTES = {
    "baseline",
    "parameters",
    "attention_parameters",
    "flops_per_example",
    "examples_per_s",
    "tokens_per_s",
    "peak_memory_bytes",
    "wall_seconds",
    "device",
    "seed",
    "ray_trial_id",
    "preset",
    "code_version",
    "model_config",
    "train_config",
    "task",
    "reached_step",
}


def test_every_trial_is_complete_or_pruned_with_its_record(smoke_run: dict) -> None:
    trials = smoke_run["first"]
    assert len(trials) == PRESET.trials
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert any(t.state == TrialState.COMPLETE for t in trials)
    for trial in trials:
        assert ATTRIBUTES <= set(trial.user_attrs), ATTRIBUTES - set(trial.user_attrs)
        steps = sorted(trial.intermediate_values)
        assert steps == REPORT_STEPS[: len(steps)] and steps  # every report, in order
        assert trial.user_attrs["reached_step"] == steps[-1]
        if trial.state == TrialState.COMPLETE:
            assert steps[-1] == STEPS  # the last report is kept too
            assert trial.values == [trial.intermediate_values[STEPS], trial.user_attrs["flops_per_example"]]
        else:
            assert steps[-1] < STEPS and trial.user_attrs["pruned_at_step"] == steps[-1]
    assert len({t.user_attrs["seed"] for t in trials}) == len(trials)


def test_each_trial_records_its_whole_model_configuration(smoke_run: dict) -> None:
    """Defaults included (metric_chunk, say), so that a trial re-runs the same model after a default changes."""
    for trial in smoke_run["first"]:
        model = trial.user_attrs["model_config"]
        assert set(model) == {f.name for f in fields(ModelConfig)}
        assert ModelConfig(**model).attention == trial.params["attention"]
        assert all(model[name] == value for name, value in trial.params.items() if name in model)


def test_mha_baselines_run_first_at_every_head_count(smoke_run: dict) -> None:
    trials = smoke_run["first"]
    baselines = [t for t in trials if t.user_attrs["baseline"]]
    assert [t.number for t in baselines] == [0, 1]
    assert sorted(t.params["num_heads"] for t in baselines) == [2, 4]
    assert all(t.params == {"attention": "mha", "d_model": 32, "num_heads": t.params["num_heads"]} for t in baselines)
    searched = [t for t in trials if not t.user_attrs["baseline"]]
    assert all(
        t.params["attention"] == "damcha" and {"sharing", "metric_rank", "generator_depth"} <= set(t.params) for t in searched
    )


def test_report_holds_the_pareto_figure_and_works_offline(smoke_run: dict) -> None:
    page = (smoke_run["root"] / "runs" / "reports" / f"{NAME}.html").read_text()
    assert 'id="pareto-figure"' in page and "Pareto front" in page
    assert re.search(r"<script[^>]*\bsrc=", page) is None  # nothing fetched: plotly.js is embedded
    assert "Plotly.newPlot" in page and len(page) > 3_000_000


def test_rerun_resumes_retries_the_dead_trial_and_keeps_everything(smoke_run: dict) -> None:
    first, second = smoke_run["first"], smoke_run["second"]
    assert [(t.number, t.state, t.params, t.values) for t in second[: len(first)]] == [
        (t.number, t.state, t.params, t.values) for t in first
    ]
    dead = second[smoke_run["dead"]]
    assert dead.state == TrialState.FAIL and "interrupted run" in dead.user_attrs["error"]
    new = [t for t in second[smoke_run["dead"] + 1 :] if "repeat_of" not in t.user_attrs]
    assert len(new) == 2 and all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in new)
    assert new[0].user_attrs["retry_of"] == dead.number and new[0].params == dead.params
    originals = [t for t in second if t.user_attrs.get("baseline") and "repeat_of" not in t.user_attrs]
    assert len(originals) == 2  # baselines are not run twice (seed repeats aside)


def test_seed_repeats_rerun_front_and_baselines_to_completion(smoke_run: dict) -> None:
    trials = smoke_run["second"]
    repeats = [t for t in trials if "repeat_of" in t.user_attrs]
    assert repeats and all(t.state == TrialState.COMPLETE for t in repeats)  # no early stopping for repeats
    by_number = {t.number: t for t in trials}
    for repeat in repeats:
        original = by_number[repeat.user_attrs["repeat_of"]]
        assert repeat.params == original.params and repeat.user_attrs["seed"] != original.user_attrs["seed"]
        assert repeat.user_attrs["baseline"] == original.user_attrs["baseline"]
    assert {t.user_attrs["repeat_of"] for t in repeats if t.user_attrs["baseline"]} >= {
        t.number
        for t in trials
        if t.user_attrs.get("baseline") and t.state == TrialState.COMPLETE and "repeat_of" not in t.user_attrs
    }
    page = (smoke_run["root"] / "runs" / "reports" / f"{NAME}.html").read_text()
    assert "bootstrap over" in page or "No DAMCHA configuration completed" in page
