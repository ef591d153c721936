"""Two studies' smoke presets end to end (cross_head: eight families on ListOps; recall_heads:
three on MQAR, a causal decoder): every family trains in turn, on its study's task, gets its
fresh seeds, and is named in the one verdict and the report."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from common.outputs import REPORTS_DIR
from reports.files import report_path
from storage.repeats_study import trials_with_repeats
from studies.catalogue import CROSS_HEAD, RECALL_HEADS
from studies.results.frame import trials_frame
from studies.results.verdict import verdict
from studies.run import main


@pytest.fixture(scope="module", params=[CROSS_HEAD, RECALL_HEADS], ids=lambda study: study.name)
def family_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, local_ray) -> dict:
    definition = request.param
    root = tmp_path_factory.mktemp(definition.name)
    url = f"sqlite:///{root / 'store.db'}"
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()) as output:
        patch.chdir(root)
        assert main([definition.name, "--preset", "smoke", "--storage", url, "--data-cache", str(root / "data")]) == 0
    study = optuna.load_study(study_name=definition.store_name("smoke"), storage=url)
    return {
        "definition": definition,
        "root": root,
        "url": url,
        "study": study,
        "trials": trials_with_repeats(study),  # the search's, then its seed repeats
        "output": output.getvalue(),
    }


def test_the_families_take_their_search_trials_in_turn_each_of_its_own_attention(family_run: dict) -> None:
    definition = family_run["definition"]
    searched = [t for t in family_run["trials"] if "repeat_of" not in t.user_attrs]
    rounds = definition.preset("smoke").trials // len(definition.families)
    assert len(searched) == definition.preset("smoke").trials
    assert [t.user_attrs["family"] for t in searched] == [family.label for family in definition.families] * rounds
    for trial, family in zip(searched, definition.families * rounds, strict=True):
        assert trial.state == TrialState.COMPLETE
        assert trial.params["attention"] == family.values["attention"] == trial.user_attrs["model_config"]["attention"]
        task = definition.preset("smoke").task
        assert trial.user_attrs["task"]["task"] == task.name
        assert trial.user_attrs["model_config"]["architecture"] == ("decoder" if task.name == "mqar" else "encoder")


def test_every_family_is_rerun_on_fresh_seeds_and_named_in_the_verdict(family_run: dict) -> None:
    definition = family_run["definition"]
    repeats = [t for t in family_run["trials"] if "repeat_of" in t.user_attrs]
    compared = {c.pairing.label for c in verdict(trials_frame(family_run["study"])).comparisons}
    assert {t.user_attrs["family"] for t in repeats} == {
        family.label for family in definition.families if family.label in compared or family.baseline
    }
    assert all(t.state == TrialState.COMPLETE for t in repeats)
    sentence = family_run["study"].user_attrs["verdict"]
    for family in definition.families[1:]:  # each non-baseline family is answered: compared on fresh test seeds, or why not
        clause = re.search(
            rf"(The best {re.escape(family.label)} at|{re.escape(family.label)}(:| has|'s best)).*?\)?\.", sentence
        )
        assert clause, family.label
        if family.label in compared:
            assert re.search(
                rf"{re.escape(family.label)}.*?test accuracy over 2 fresh seeds; .*?Holm-adjusted p [=<] ", sentence
            ), family.label
    assert "  verdict:\n" in family_run["output"] and f"\n    {sentence}\n" in family_run["output"]  # after its table


def test_report_draws_a_front_per_family(family_run: dict) -> None:
    definition = family_run["definition"]
    page = report_path(definition.store_name("smoke"), family_run["url"], Path(family_run["root"]) / REPORTS_DIR).read_text()
    for family in definition.families:
        assert f'"name":"{family.label} front' in page, family.label
