"""Studies of tasks that read the LRA release files: ``--data-dir`` (or ``$LRA_DATA_DIR``)
reaches every worker, and missing or malformed files exit 2 before anything is written."""

from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from studies import catalogue as registry
from studies.catalogue.tasks import ReleaseTask
from studies.engine.options import RunOptions, check_options
from studies.run import main
from trainers.data.listops import ListOpsSpec, write_release

# lra_sharing's smoke budget on ListOps read from release files (sizes as the smoke preset's data).
FILES_STUDY = replace(
    registry.LRA_SHARING,
    name="lra_listops_files",
    presets={"smoke": replace(registry.LRA_SHARING.preset("smoke"), task=ReleaseTask("lra_listops"))},
    default_preset="smoke",
)
SMOKE_DATA = ListOpsSpec(seed=0, min_length=10, max_length=40, train_size=256, val_size=64, test_size=64)


@pytest.fixture
def files_study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The release-file study registered, the working directory a fresh one, no ``$LRA_DATA_DIR``."""
    monkeypatch.setitem(registry.STUDIES, FILES_STUDY.name, FILES_STUDY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LRA_DATA_DIR", raising=False)
    monkeypatch.delenv("DAMCHA_STORAGE_URL", raising=False)
    return tmp_path


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exited:
        return exited.code


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        (None, r"task 'lra_listops' reads the LRA release files: set LRA_DATA_DIR .* \(or pass --data-dir\)"),
        ("empty", r"expected file 'listops-1000/basic_train.tsv' under .* it comes from https://storage.googleapis.com"),
        ("malformed", r"basic_train.tsv:2: bytes at column 10 are not valid UTF-8"),
    ],
    ids=["no-directory", "missing-file", "malformed-row"],
)
def test_missing_or_malformed_release_files_exit_2_and_write_nothing(
    files_study: Path, layout: str | None, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = files_study / "lra_release"
    argv = [FILES_STUDY.name, "--data-cache", "cache"]
    if layout is not None:
        (data / "listops-1000").mkdir(parents=True)
        argv += ["--data-dir", str(data)]
    if layout == "malformed":
        for split in ("train", "val", "test"):
            (data / "listops-1000" / f"basic_{split}.tsv").write_bytes(b"Source\tTarget\n( [MIN 1 \xff ] )\t1\n")
    before = _tree(files_study)
    assert _exit_code(argv) == 2
    output = capsys.readouterr().err
    assert re.search(message, output), output
    assert "Traceback" not in output
    assert _tree(files_study) == before  # no store, no report, no data cache


def test_data_dir_for_a_generated_task_is_refused(files_study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code(["recall_heads", "--preset", "smoke", "--data-dir", "lra_release"]) == 2
    assert "--data-dir: task 'mqar' reads no files (it is generated); drop --data-dir" in capsys.readouterr().err
    assert not any(files_study.iterdir())


def test_a_study_of_release_files_trains_every_trial_on_them(files_study: Path, local_ray) -> None:
    data = files_study / "somewhere" / "lra_release"
    write_release(SMOKE_DATA, data / "listops-1000")
    url = f"sqlite:///{files_study / 'store.db'}"
    argv = [FILES_STUDY.name, "--storage", url, "--trials", "3", "--repeat-seeds", "0", "--data-dir", os.path.relpath(data)]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    trials = optuna.load_study(study_name=FILES_STUDY.store_name("smoke"), storage=url).get_trials()
    assert len(trials) == 3 and all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    assert all(t.user_attrs["task"] == {"task": "lra_listops", "source": "lra_release", "data_dir": str(data)} for t in trials)


def test_the_files_come_from_lra_data_dir_unless_the_option_names_others(files_study: Path, monkeypatch) -> None:
    """The run's task is what its workers read (the study above shows it reaching every trial)."""
    data, other = files_study / "lra_release", files_study / "other"
    for folder in (data, other):
        write_release(SMOKE_DATA, folder / "listops-1000")
    monkeypatch.setenv("LRA_DATA_DIR", str(data))
    described = check_options(FILES_STUDY, RunOptions(), local_resources=False).preset.task.describe()
    assert described == {"task": "lra_listops", "source": "lra_release", "data_dir": str(data)}
    named = check_options(FILES_STUDY, RunOptions(data_dir=other), local_resources=False).preset.task.describe()
    assert named["data_dir"] == str(other)
