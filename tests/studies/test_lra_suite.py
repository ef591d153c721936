"""lra_suite's smoke preset on tiny files in each LRA release format: the tasks' studies in turn,
and one report with a per-task table and the cross-task average; a missing task's files exit 2
before anything is written.

The suite runs on two of its tasks (the pair architecture, and a causal task with the authors'
causal point); the whole five-task command, as a user types it, is a drill (``make drills``).
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState

from common.outputs import REPORTS_DIR
from reports.files import report_path
from storage.repeats_study import trials_with_repeats
from studies.catalogue import LRA_SUITE
from studies.catalogue.lra_suite import LRA_TASKS
from studies.engine.options import RunOptions
from studies.run import main
from studies.show import run_and_show
from tests.studies.test_data_dir import _exit_code, _tree
from tests.trainers.data.release_files import write_lra_release


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(("Text", "Retrieval"), id="two-tasks"),
        pytest.param(tuple(LRA_TASKS), id="the-whole-command", marks=pytest.mark.drill),
    ],
)
def suite_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, local_ray) -> dict:
    titles = request.param
    root = tmp_path_factory.mktemp("lra_suite")
    data = write_lra_release(root / "lra_release", np.random.default_rng(0))
    url = f"sqlite:///{root / 'store.db'}"
    argv = ["lra_suite", "--preset", "smoke", "--storage", url, "--data-dir", str(data), "--data-cache", str(root / "cache")]
    suite = replace(LRA_SUITE, studies={title: LRA_SUITE.studies[title] for title in titles})
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()) as output:
        patch.chdir(root)
        patch.delenv("LRA_DATA_DIR", raising=False)
        if suite == LRA_SUITE:
            assert main(argv) == 0
        else:  # the suite's engine on a part of it
            run_and_show(suite, RunOptions(preset="smoke", storage=url, data_dir=data, cache_dir=root / "cache"), sys.stdout)
    stores = {
        title: optuna.load_study(study_name=study.store_name("smoke"), storage=url) for title, study in suite.studies.items()
    }
    return {
        "root": root,
        "url": url,
        "data": data,
        "stores": stores,
        "output": output.getvalue(),
        "tasks": {t: LRA_TASKS[t] for t in titles},
    }


def test_each_task_is_a_study_of_its_own_with_every_family_searched_and_repeated(suite_run: dict) -> None:
    assert list(suite_run["stores"]) == list(suite_run["tasks"])
    assert list(LRA_TASKS) == ["ListOps", "Text", "Retrieval", "Image", "Pathfinder"]
    for (title, task), store in zip(suite_run["tasks"].items(), suite_run["stores"].values(), strict=True):
        assert store.study_name == f"lra_suite_{task.removeprefix('lra_')}-smoke-v3"
        trials = trials_with_repeats(store)  # the search's, then its seed repeats
        assert all(t.state == TrialState.COMPLETE for t in trials), title
        assert store.user_attrs["command"].startswith("python -m studies.run lra_suite --preset smoke --storage sqlite:///")
        assert store.user_attrs["task"] == {"task": task, "source": "lra_release", "data_dir": str(suite_run["data"])}
        searched = [t.user_attrs["family"] for t in trials if "repeat_of" not in t.user_attrs]
        repeated = {t.user_attrs["family"] for t in trials if "repeat_of" in t.user_attrs}
        assert searched == ["MHA", "DAMCHA (paper)", "DAMCHA (cross)"] and repeated == set(searched), title
        architecture = "pair" if task == "lra_retrieval" else "encoder"
        assert {t.user_attrs["model_config"]["architecture"] for t in trials} == {architecture}
        authors = [t.user_attrs["model_config"] for t in trials if t.user_attrs.get("point") == "authors' configuration"]
        causal = task in ("lra_text", "lra_image")  # the authors' text and image models are causal
        assert authors and all((c["classifier_causal"], c["pooling"]) == (causal, "mean" if causal else "cls") for c in authors)
        assert (
            "over 2 fresh seeds; " in store.user_attrs["verdict"]
            and "paired t-test, Holm-adjusted p" in store.user_attrs["verdict"]
        )


def test_the_suite_report_has_a_row_per_family_a_column_per_task_and_the_average(suite_run: dict) -> None:
    page = report_path("lra_suite-smoke-v1", suite_run["url"], suite_run["root"] / REPORTS_DIR).read_text()
    table = re.search(r"<table[^>]*>.*?</table>", page, re.DOTALL).group(0)
    header = re.findall(r"<th>(.*?)</th>", table.split("</thead>")[0])
    assert header == ["family", *suite_run["tasks"], "average"]
    rows = re.findall(r"<tr>\s*<td>(.*?)</td>(.*?)</tr>", table.split("<tbody>")[1], re.DOTALL)
    assert [family for family, _ in rows] == ["MHA", "DAMCHA (paper)", "DAMCHA (cross)"]
    for family, cells in rows:
        values = re.findall(r"<td>([\d.]+)%", cells)
        assert len(values) == len(suite_run["tasks"]) + 1, family  # every task, and the average
        # each shown value is rounded by up to 0.05, and so is the shown average
        assert float(values[-1]) == pytest.approx(np.mean([float(v) for v in values[:-1]]), abs=0.1), family
    for title, task in suite_run["tasks"].items():  # each verdict, linked to its task's own report
        study = f"lra_suite_{task.removeprefix('lra_')}"
        report = report_path(f"{study}-smoke-v3", suite_run["url"], suite_run["root"] / REPORTS_DIR)
        assert f'<a href="{report.name}">{title}</a>' in page and report.is_file()
    assert "lra_suite-smoke-v1" in suite_run["output"] and "average over the tasks: MHA " in suite_run["output"]


def test_a_missing_task_exits_2_naming_it_before_any_study_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_lra_release(tmp_path / "lra_release", np.random.default_rng(0))
    shutil.rmtree(data / "pathfinder32")  # the last task's files
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DAMCHA_STORAGE_URL", raising=False)
    before = _tree(tmp_path)
    assert _exit_code(["lra_suite", "--preset", "smoke", "--data-dir", str(data), "--data-cache", "cache"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(r"task 'pathfinder': expected directory 'pathfinder32/curv_contour_length_14' under .*lra_release", error)
    written = set(_tree(tmp_path)) - set(before)
    assert all(path.startswith("cache/") for path in written), written  # no store, no report (caches of the tasks read are kept)
