"""The cross_head study's smoke preset end to end: every family trains, gets its fresh
seeds, and is named in the one verdict and the report."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from studies.registry import CROSS_HEAD
from studies.run import main

PRESET = CROSS_HEAD.preset("smoke")
NAME = CROSS_HEAD.store_name("smoke")


@pytest.fixture(scope="module")
def cross_head_run(tmp_path_factory: pytest.TempPathFactory, local_ray) -> dict:
    root = tmp_path_factory.mktemp("cross_head")
    url = f"sqlite:///{root / 'store.db'}"
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()) as output:
        patch.chdir(root)
        assert main(["cross_head", "--preset", "smoke", "--storage", url, "--data-cache", str(root / "data")]) == 0
    study = optuna.load_study(study_name=NAME, storage=url)
    return {"root": root, "study": study, "trials": study.get_trials(), "output": output.getvalue()}


def test_each_family_gets_one_search_trial_of_its_own_attention(cross_head_run: dict) -> None:
    searched = [t for t in cross_head_run["trials"] if "repeat_of" not in t.user_attrs]
    assert len(searched) == PRESET.trials == len(CROSS_HEAD.families)
    assert [t.user_attrs["family"] for t in searched] == [family.label for family in CROSS_HEAD.families]
    for trial, family in zip(searched, CROSS_HEAD.families, strict=True):
        assert trial.state == TrialState.COMPLETE
        assert trial.params["attention"] == family.values["attention"] == trial.user_attrs["model_config"]["attention"]
        assert trial.user_attrs["model_config"]["architecture"] == "decoder"
        assert trial.user_attrs["task"]["task"] == "mqar"


def test_every_family_is_rerun_on_fresh_seeds_and_named_in_the_verdict(cross_head_run: dict) -> None:
    repeats = [t for t in cross_head_run["trials"] if "repeat_of" in t.user_attrs]
    assert {t.user_attrs["family"] for t in repeats} == {family.label for family in CROSS_HEAD.families}
    assert all(t.state == TrialState.COMPLETE for t in repeats)
    sentence = cross_head_run["study"].user_attrs["verdict"]
    for family in CROSS_HEAD.families[1:]:  # each non-baseline family, compared on fresh seeds with its test
        clause = re.search(
            rf"(The best {re.escape(family.label)} at|No {re.escape(family.label)} configuration).*?\)\.", sentence
        )
        assert clause, family.label
        assert "on fresh seeds;" in clause.group(0) and "paired t-test over 2 fresh seeds both trained on" in clause.group(0)
    assert f"  verdict: {sentence}\n" in cross_head_run["output"]


def test_report_draws_a_front_per_family(cross_head_run: dict) -> None:
    page = (Path(cross_head_run["root"]) / "runs" / "reports" / f"{NAME}.html").read_text()
    for family in CROSS_HEAD.families:
        assert f'"name":"{family.label} front' in page, family.label
