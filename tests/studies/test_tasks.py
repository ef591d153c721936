"""The task registry: every study names a registered task, whose metric leads its objectives."""

from __future__ import annotations

from dataclasses import replace

import pytest

from studies.catalogue import LRA_SHARING, STUDIES
from studies.catalogue.tasks import RELEASES, TASKS, Objective, ReleaseTask
from trainers.config import ModelConfig


def test_every_study_trains_on_one_registered_task_whose_metric_it_optimises_first() -> None:
    for study in STUDIES.values():
        assert study.task in TASKS
        task = study.preset(None).task
        assert study.objectives[0] == task.objective
        ModelConfig(**task.model_fields())  # the fields a task fixes make a model


def test_release_tasks_fix_their_model_fields_and_say_where_their_files_are(tmp_path) -> None:
    for name in RELEASES:
        task = TASKS[name](tmp_path)
        assert task.reads_files and task.describe() == {"task": name, "source": "lra_release", "data_dir": str(tmp_path)}
        ModelConfig(**task.model_fields())
    assert TASKS["lra_retrieval"]().model_fields()["architecture"] == "pair"
    with pytest.raises(ValueError, match="unknown LRA release task 'lra_txt'; allowed: lra_listops, lra_text"):
        ReleaseTask("lra_txt")


def test_a_study_must_optimise_its_task_s_metric_and_share_one_task() -> None:
    with pytest.raises(ValueError, match="its first objective must be its task's metric"):
        replace(LRA_SHARING, objectives=(Objective("flops_per_example", "minimize"),))
    smoke, quick = LRA_SHARING.preset("smoke"), LRA_SHARING.preset("quick")
    with pytest.raises(ValueError, match=r"its presets must share one task of .*, not \['listops', 'lra_listops'\]"):
        replace(LRA_SHARING, presets={"smoke": smoke, "quick": replace(quick, task=ReleaseTask("lra_listops"))})


def test_each_study_s_typical_length_lies_within_its_model_s_longest_input() -> None:
    """What the plan times a step at: fixed-length tasks at their length, ListOps at its trees' mean."""
    for study in STUDIES.values():
        for preset in study.presets.values():
            longest = preset.task.model_fields()["max_length"]
            assert 1 <= preset.task.typical_length() <= longest, (study.name, preset.name)
    quick = LRA_SHARING.preset("quick").task
    assert quick.typical_length() < quick.model_fields()["max_length"] / 2
