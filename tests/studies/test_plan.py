"""``python -m studies.run STUDY --plan``: the run's plan and cost, with nothing written and no Ray started."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import optuna

from studies.catalogue import LRA_SHARING, get_study
from studies.catalogue.reliability import NOT_MEASURED
from studies.catalogue.schema import choices
from studies.engine.options import RunOptions
from studies.engine.plan import plan
from studies.engine.queue import queued, trials_counted
from studies.engine.study_space import exhaustive_grid, preset_space
from tests.conftest import SMOKE_STUDY, copy_store


def test_a_plan_counts_each_family_s_configurations_and_writes_nothing(tmp_path: Path) -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "studies.run", "lra_sharing", "--preset", "smoke", "--trials", "7", "--plan"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 0, shown.stderr[-3000:]
    preset = LRA_SHARING.preset("smoke")
    grid = exhaustive_grid(LRA_SHARING, preset_space(LRA_SHARING, preset), 1)
    for family in LRA_SHARING.families:
        searched = sum(entry.family == family and entry.point is None for entry in grid)
        assert f"  {family.label}: {searched} configurations" in shown.stdout
    assert "search: 7 trials (7 to run), the families in turn (2 or 3 each)" in shown.stdout  # whole trials, 3 families
    assert "store: sqlite:///runs/optuna.db: new" in shown.stdout
    for family in LRA_SHARING.families:  # each family's extremes measured: a step's time and peak memory
        batch = preset.train.batch_size
        assert re.search(rf"  {re.escape(family.label)} largest \(.*\): .* s a step at batch {batch}", shown.stdout)
    assert re.search(r"estimated wall time here: about \d+ (s|min) in all \(search \d+ (s|min), \d+ seed repeats", shown.stdout)
    assert list(tmp_path.iterdir()) == []  # no store, no data cache, no Ray session, no report


def test_a_plan_of_a_stored_study_says_how_much_is_left(smoke_run: dict, tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    url = copy_store(smoke_run["url"], store)
    before = store.read_bytes()
    stored = optuna.load_study(study_name=SMOKE_STUDY, storage=url)
    counted, waiting = trials_counted(stored), len(queued(stored))
    text = plan(LRA_SHARING, RunOptions(preset="smoke", storage=url, trials=counted + 3)).text
    assert f"resumes {SMOKE_STUDY}: {counted} of {counted + 3} search trials there, {waiting} queued" in text
    assert f"({waiting + 3} to run)" in text
    assert store.read_bytes() == before  # read, never written


def test_a_gpu_preset_s_plan_made_here_gives_device_hours_and_peak_memory(tmp_path: Path, monkeypatch) -> None:
    """recall_heads' full preset (4 CPUs and a GPU a trial: this machine cannot run it, and its plan says so), at a
    batch of 4 and its smallest width and head count: a short test."""
    monkeypatch.chdir(tmp_path)
    study = get_study("recall_heads")
    full = study.preset("full")
    study = replace(study, presets={"full": replace(full, train=replace(full.train, batch_size=4))})
    planned = plan(study, RunOptions(preset="full", fix={"d_model": 64, "num_heads": 2}))
    text = planned.text
    assert planned.wall_seconds is None  # a GPU's wall time is not this CPU's to tell
    assert "this machine cannot run it" in text
    assert re.search(r"device-hours: at least \d+\.\d on NVIDIA H200s", text)
    for family in study.families:
        assert re.search(rf"  {re.escape(family.label)} \(.*\): [\d.]+ (MiB|GiB), ", text)
    assert "s a step" not in text  # this CPU's step times say nothing of a GPU's
    assert list(tmp_path.iterdir()) == []


def test_every_rival_in_cross_head_s_quick_space_has_configurations_at_the_baseline_s_cost(tmp_path: Path) -> None:
    """cross_head's quick space (v5 on): each of the seven families compared with MHA has configurations within the
    verdict's cost band of an MHA one (v4's had none for Talking-Heads, DCMHA and MoA), and the plan says how small
    a gap each comparison detects on the preset's seeds before a run."""
    study = get_study("cross_head")
    text = plan(study, RunOptions(storage=f"sqlite:///{tmp_path / 's.db'}")).text
    for family in study.families[1:]:
        found = re.search(rf"\n  {re.escape(family.label)}: (\d+) configurations.*?, (\d+) within the cost band", text)
        assert found and int(found[2]) > 0, family.label
    assert "none within the cost band" not in text
    assert "  MHA: 4 configurations\n" in text  # the baseline is not compared with itself
    assert (
        "minimum detectable difference of each of the 8 comparisons with MHA (DAMCHA (paper), DAMCHA (cross), "
        "Talking-Heads, DCMHA, Collaborative MHA, Mixed MHA, MoA, authors' configuration), with power 0.8 on 12 fresh "
        "seeds at the paired SD measured on this task (1.6 points): 2.0 points where its Holm-adjusted p is the smallest "
        "of the 8, 1.4 where it is the largest"
    ) in text
    # and how sure that answer will be, as the run will print it, before it is paid for
    assert study.preset("quick").reliability.sentence(32) in text


def test_recall_heads_quick_plan_shows_its_seeds_cannot_decide_as_its_question_says(tmp_path: Path) -> None:
    """recall_heads' quick MQAR recalls or stalls by seed: at the paired SD its v5 run measured, the smallest gap its
    3 fresh seeds detect exceeds the accuracy scale, which is why its question (summary) is which designs recall."""
    study = get_study("recall_heads")
    text = plan(study, RunOptions(storage=f"sqlite:///{tmp_path / 's.db'}")).text
    found = re.search(
        r"on 3 fresh seeds at the paired SD measured on this task \(52 points\): ([\d.]+) points.*?, ([\d.]+) where", text
    )
    assert found and float(found[2]) > 100
    assert "which designs start to recall" in study.summary
    assert NOT_MEASURED in text  # no truth table covers it


def test_a_plan_says_which_families_have_no_configuration_at_the_baseline_s_cost(tmp_path: Path) -> None:
    """At one width (D=64) MoA with two experts a head pays 1.58x MHA's FLOPs: none of its configurations can be
    compared at matched cost, and the plan says so before a run; a preset that measured no paired SD says the
    detectable difference is not known."""
    study = get_study("cross_head")
    quick = study.preset("quick")
    narrowed = replace(quick, domains={**quick.domains, **choices(d_model=(64,), expert_factor=(2,))}, paired_deviation=None)
    text = plan(replace(study, presets={"quick": narrowed}), RunOptions(storage=f"sqlite:///{tmp_path / 's.db'}")).text
    assert "  MoA: 2 configurations, none within the cost band of one of MHA's (1.58-1.58x the nearest's FLOPs)" in text
    assert "  Talking-Heads: 2 configurations, 1 within the cost band of one of MHA's" in text
    assert "MHA (DAMCHA (paper), DAMCHA (cross), Talking-Heads, DCMHA, Collaborative MHA, Mixed MHA, MoA, authors' " in text
    assert "with MHA (DAMCHA (paper), " in text and ": not known (no paired SD measured on this preset's task)" in text
