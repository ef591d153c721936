"""The smoke preset end to end on a real local Ray and SQLite store, read back with plain Optuna."""

from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import fields
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from common.outputs import REPORTS_DIR
from reports.files import report_path
from storage import record
from storage.repeats_study import linked_repeats
from studies.catalogue import LRA_SHARING
from studies.catalogue.families import AUTHORS
from studies.catalogue.reliability import PLUMBING_CHECK
from studies.engine.queue import enqueue, trials_counted
from studies.engine.repeats import repeats_due
from studies.results.frame import search_runs, trials_frame
from studies.results.matching import pairings
from studies.run import main
from tests.conftest import SMOKE_STUDY as NAME
from tests.conftest import copy_store
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


def test_the_families_share_the_budget_each_searched_over_its_knobs(smoke_run: dict) -> None:
    trials = smoke_run["first"]
    families = {family.label: family for family in LRA_SHARING.families}
    labels = list(families)
    assert [t.user_attrs["family"] for t in trials] == labels * 2  # in turn, an equal share each
    for trial in trials:
        family = families[trial.user_attrs["family"]]
        assert trial.user_attrs["baseline"] == family.baseline
        assert all(trial.params[name] == value for name, value in family.values.items())
        if family.baseline:  # MHA is searched over the shared knobs and its learning rate, and has no DAMCHA knob
            assert set(trial.params) == {"attention", "d_model", "num_heads", "learning_rate"}
        elif "point" in trial.user_attrs:  # a named point: its own knobs (its recipe too) are not searched (below)
            assert {"d_model", "num_heads"} <= set(trial.params) and "learning_rate" not in trial.params
        else:
            assert {"d_model", "num_heads", "sharing", "metric_rank", "generator_depth", "learning_rate"} <= set(trial.params)
        assert trial.user_attrs["train_config"]["learning_rate"] == trial.params.get("learning_rate", 3e-4)


def test_report_holds_the_pareto_figure_and_works_offline(smoke_run: dict) -> None:
    page = report_path(NAME, smoke_run["url"], smoke_run["root"] / REPORTS_DIR).read_text()
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
    assert new[1].user_attrs["family"] == "MHA"  # the family with the fewest trials (the retry is DAMCHA (cross)'s)


def test_seed_repeats_rerun_what_the_verdict_compares_to_completion_and_are_judged_on_test_data(smoke_run: dict) -> None:
    trials, repeats = smoke_run["second"], smoke_run["repeats"]
    assert repeats and all("repeat_of" in t.user_attrs for t in repeats)
    assert repeats and all(t.state == TrialState.COMPLETE for t in repeats)  # no early stopping for repeats
    by_number = {t.number: t for t in trials}
    for repeat in repeats:
        original = by_number[repeat.user_attrs["repeat_of"]]
        assert repeat.params == original.params and repeat.user_attrs["seed"] != original.user_attrs["seed"]
        assert repeat.user_attrs["family"] == original.user_attrs["family"]
    fresh: dict[str, set[int]] = {}  # configuration -> its fresh seeds
    for repeat in repeats:  # repeat k of every configuration trains on one shared seed: the families compare in pairs
        assert repeat.user_attrs["seed"] == 90_000 + repeat.user_attrs["repeat_index"]
        assert 0 <= repeat.user_attrs["test_accuracy"] <= 1 and repeat.user_attrs["test_count"] == PRESET.task.spec.test_size
        fresh.setdefault(str(sorted(repeat.params.items())), set()).add(repeat.user_attrs["repeat_index"])
    frame = trials_frame(optuna.load_study(study_name=NAME, storage=smoke_run["url"]))
    compared = [n for pairing in pairings(frame, frame.attrs["families"]) for n in pairing.numbers]
    assert compared and all(fresh[str(sorted(by_number[n].params.items()))] == {1, 2} for n in compared)  # two seeds each
    sentence = optuna.load_study(study_name=NAME, storage=smoke_run["url"]).user_attrs["verdict"]
    for family in ("DAMCHA (paper)", "DAMCHA (cross)", "authors' configuration"):  # every family, and the named point
        assert family in sentence, sentence
    for clause in re.findall(r"over 2 fresh seeds; .*?\)\.", sentence):  # each comparison: its test, Holm's p
        assert "test accuracy" in sentence and re.search(r"paired t-test, Holm-adjusted p (= \d\.\d{3}|< 0\.001)", clause), clause


def test_summary_report_and_store_give_one_verdict(smoke_run: dict) -> None:
    import html

    study = optuna.load_study(study_name=NAME, storage=smoke_run["url"])
    sentence, rows = study.user_attrs[record.VERDICT], study.user_attrs[record.VERDICT_TABLE]
    # The verdict opens with its table, a row per comparison with its answer in words, then the sentence.
    compared = [row["compared"] for row in rows]
    assert compared == ["DAMCHA (paper) = authors' configuration", "DAMCHA (cross)"]
    assert all(
        row["answer"].split(":")[0] in ("better", "worse", "undetermined") or row["answer"].startswith("the same within ±")
        for row in rows
    )
    assert all(row["judged on"] == "test accuracy, 2 fresh seeds each" for row in rows)
    output = smoke_run["output"]
    header, *lines = output[output.index("  verdict:\n") :].splitlines()[1 : 2 + len(rows)]
    assert header.split()[:2] == ["compared", "FLOPs"]
    for line, row in zip(lines, rows, strict=True):
        assert line.strip().startswith(row["compared"]) and row["answer"] in line
    assert f"    {sentence}\n" in output
    page = report_path(NAME, smoke_run["url"], smoke_run["root"] / REPORTS_DIR).read_text()
    assert page.index("<h2>Verdict</h2>") < page.index(f'<p class="headline">{html.escape(sentence)}</p>')
    assert all(html.escape(row["answer"]) in page for row in rows)
    # beside the verdict, how sure it is: the smoke preset has no replays of a truth table, and says so
    assert f"  {PLUMBING_CHECK}\n" in smoke_run["output"] and html.escape(PLUMBING_CHECK) in page


def test_the_authors_configuration_is_trained_as_a_named_point_of_its_family(smoke_run: dict) -> None:
    """The first DAMCHA (paper) trial is the authors' configuration, at a width and head count the
    sampler chose; its own values are no sampler parameters, and its seed repeats keep them."""
    (point,) = [t for t in smoke_run["first"] if t.user_attrs.get("point") == AUTHORS.label]
    paper = [t for t in smoke_run["first"] if t.user_attrs["family"] == "DAMCHA (paper)"]
    assert point.number == paper[0].number and point.user_attrs["family"] == AUTHORS.family
    assert set(point.params) == {"attention", "metric_mode", "d_model", "num_heads"}  # the sampler's part
    assert point.user_attrs["train_config"]["learning_rate"] == 3e-4 and point.user_attrs["train_config"]["weight_decay"] == 0
    model = point.user_attrs["model_config"]
    assert model["metric_mode"] == "rowsum" and model["metric_rank"] == "full" and model["norm"] == "post"
    assert model["sharing"] == "stack" and model["generator_depth"] == 2 and list(model["generator_width"]) == [256, 512]
    frame = trials_frame(optuna.load_study(study_name=NAME, storage=smoke_run["url"]))
    row = frame[search_runs(frame)].set_index("number").loc[point.number]  # a repeat's number counts in its own study
    assert row["metric_rank"] == "full" and row["norm"] == "post" and row["point"] == AUTHORS.label
    repeats = [t for t in smoke_run["repeats"] if t.user_attrs.get("repeat_of") == point.number]
    assert repeats  # the verdict answers it on its own line, on fresh seeds
    for repeat in repeats:  # the same configuration, trained as they specify
        assert repeat.user_attrs["point"] == AUTHORS.label and repeat.user_attrs["model_config"]["metric_rank"] == "full"


def test_a_run_builds_its_trial_frame_once_for_its_results(smoke_run: dict) -> None:
    """The resumed run (search, then seed repeats) reads its store into a frame once after the search, to
    choose what the repeats measure, and once at the end, for its results, which the stored verdict, the
    report and the summary share (each built its own frame before); and, for its ETA, once each time a
    search trial ends (the seed repeats the selection so far would take), never per progress line."""
    searched = [
        trial for trial in smoke_run["second"] if trial.number >= len(smoke_run["first"]) and "repeat_of" not in trial.user_attrs
    ]
    assert len(searched) >= 2  # the run's two more trials (and the dead trial's retry)
    assert smoke_run["frames"] == [NAME] * (len(searched) + 2)


def test_optunas_own_front_holds_search_trials_alone(smoke_run: dict) -> None:
    """The seed repeats live in a study of their own, linked both ways: Optuna's ``best_trials``, its CLI's
    ``best-trials`` (and so optuna-dashboard's front) read the search's trials only, while the report, the verdict
    and ``reports list`` read both studies."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    search = optuna.load_study(study_name=NAME, storage=smoke_run["url"])
    assert not any("repeat_of" in t.user_attrs for t in search.get_trials())
    assert search.user_attrs[record.REPEATS_STUDY] == f"{NAME}:repeats"
    repeats = optuna.load_study(study_name=f"{NAME}:repeats", storage=smoke_run["url"])
    assert repeats.user_attrs[record.SEARCH_STUDY] == NAME and repeats.directions == search.directions
    searched = {t.number for t in search.get_trials() if t.state == TrialState.COMPLETE}
    assert search.best_trials and {t.number for t in search.best_trials} <= searched
    assert all("repeat_of" not in t.user_attrs for t in search.best_trials)
    cli = Path(sys.executable).with_name("optuna")
    shown = subprocess.run(
        [str(cli), "best-trials", "--study-name", NAME, "--storage", smoke_run["url"], "-f", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert sorted(row["number"] for row in json.loads(shown.stdout)) == sorted(t.number for t in search.best_trials)
    frame = trials_frame(search)  # the results read the repeats through the link
    assert frame["repeat_of"].notna().sum() == len(smoke_run["repeats"])


def test_repeats_a_stopped_run_left_queued_run_when_none_is_due_anew(
    smoke_run: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped after queueing seed repeats leaves them in the study of repeats, where the search's queue
    never shows them: the next run runs them although its look finds nothing new due."""
    url = copy_store(smoke_run["url"], tmp_path / "store.db")
    search = optuna.load_study(study_name=NAME, storage=url)
    due = repeats_due(search, 3)  # each compared configuration's third fresh seed
    assert due and {planned.repeat_index for planned in due} == {3}
    for planned in due:
        enqueue(linked_repeats(search), planned)
    monkeypatch.chdir(tmp_path)
    argv = ["lra_sharing", "--preset", "smoke", "--storage", url, "--data-cache", str(smoke_run["root"] / "data")]
    with contextlib.redirect_stdout(io.StringIO()) as output:
        assert main([*argv, "--trials", str(trials_counted(search)), "--repeat-seeds", "3"]) == 0
    said = output.getvalue()
    assert "repeating" not in said and f"{len(due)} seed repeats queued earlier (a stopped run's" in said  # none anew
    third = [t for t in linked_repeats(search).get_trials() if t.user_attrs["repeat_index"] == 3]
    assert len(third) == len(due) and all(t.state == TrialState.COMPLETE for t in third)


def test_the_report_shows_one_split_per_axis_and_no_raw_float(smoke_run: dict) -> None:
    """The Pareto figures' value axis names the search runs' validation split and the diamonds' test split (the
    diamonds once sat on a "validation accuracy" axis); the settings say a family's share in whole trials."""
    from reports.figures import pareto_figure
    from studies.results import StudyResults

    results = StudyResults.read(optuna.load_study(study_name=NAME, storage=smoke_run["url"]))
    searched = results.frame[search_runs(results.frame)]
    axis = pareto_figure(searched, record.FLOPS, "t", results.configurations).layout.yaxis.title.text
    assert axis == "validation accuracy (search runs) · test accuracy (diamonds: fresh seeds)"
    assert pareto_figure(searched, record.FLOPS, "t").layout.yaxis.title.text == "validation accuracy"  # no diamonds
    page = report_path(NAME, smoke_run["url"], smoke_run["root"] / REPORTS_DIR).read_text()
    settings = page[page.index("<h2>Settings</h2>") : page.index("<h2>Pareto fronts</h2>")]
    assert "<th>trials_per_family</th><td>2 or 3</td>" in settings  # the fixture's 8 trials over 3 families
    assert not re.search(r"\d\.\d{5,}", settings), re.findall(r"\d\.\d{5,}", settings)


SUMMARY = Path(__file__).with_name("smoke_summary.txt")  # the resumed smoke run's closing summary, as committed


def _closing_summary(output: str, root: Path) -> str:
    """The run's closing summary (from the Optuna study's name on): its folder named ``<root>`` and its store's tag
    ``<tag>`` (both differ from run to run), its time taken left out."""
    block = output[output.rindex(f"\n{NAME}\n") :]
    kept = [line.replace(str(root), "<root>") for line in block.splitlines() if not line.startswith("  took:")]
    return re.sub(r"\.store-[0-9a-f]+\.html", ".store-<tag>.html", "\n".join(kept).strip() + "\n")


def test_the_smoke_summary_is_the_committed_one(smoke_run: dict) -> None:
    """What a resumed smoke run concludes, word for word (trials, verdict, compared configurations and their figures):
    a change of the engine's structure changes none of it. A change that should alters smoke_summary.txt with it
    (``DAMCHA_WRITE_SUMMARY=1`` writes the file instead of comparing)."""
    summary = _closing_summary(smoke_run["output"], smoke_run["root"])
    if os.environ.get("DAMCHA_WRITE_SUMMARY"):
        SUMMARY.write_text(summary)
    assert summary == SUMMARY.read_text()
