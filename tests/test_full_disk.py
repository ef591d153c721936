"""A full file system: every output that does not fit exits 2 with one sentence, and leaves nothing half-written."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from reports.__main__ import main as reports
from studies.run import main as run

FILLER = "filler"


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB file system (tmpfs) filled to the last byte by ``FILLER``, mounted for the test and unmounted after it."""
    folder = tmp_path / "full"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("this machine lets this user mount nothing (a tmpfs needs root)")
    try:
        with contextlib.suppress(OSError), (folder / FILLER).open("wb") as filler:
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


def _exit(command, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The command's exit code, standard error and standard output."""
    try:
        code = command(argv)
    except SystemExit as stopped:
        code = stopped.code
    captured = capsys.readouterr()
    return code, captured.err, captured.out


def test_a_report_on_a_full_disk_exits_2_and_leaves_no_partial_page(
    tmp_path: Path, full_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    study = optuna.create_study(study_name="plain", storage=url)
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=3)
    code, error, _ = _exit(reports, ["plain", "--storage", url, "-o", str(full_disk / "page.html")], capsys)
    assert code == 2 and "No space left on device" in error and "Traceback" not in error
    assert [p.name for p in full_disk.iterdir()] == [FILLER]


def test_a_data_cache_on_a_full_disk_exits_2_after_the_store_and_leaves_no_partial_cache(
    tmp_path: Path, full_disk: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["lra_sharing", "--preset", "smoke", "--storage", f"sqlite:///{tmp_path / 'store.db'}", "--data-cache", str(full_disk)]
    code, error, _ = _exit(run, argv, capsys)
    assert code == 2 and "cannot write the data cache" in error and "No space left on device" in error
    assert "Traceback" not in error
    assert [p.name for p in full_disk.iterdir()] == [FILLER]  # no .partial-<pid> folder


@pytest.fixture
def finished_store(tmp_path: Path) -> str:
    """A SQLite store holding one finished plain Optuna study, ``plain``, outside the full disk."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    study = optuna.create_study(study_name="plain", storage=url)
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=3)
    return url


@pytest.mark.parametrize("option", ["--csv", "--markdown", "--png"])
def test_a_report_s_extra_files_on_a_full_disk_exit_2_naming_the_file_and_leave_no_partial_one(
    option: str, tmp_path: Path, finished_store: str, full_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The class of a report's outputs besides its page: each names itself, not the page (written elsewhere)."""
    if option == "--png":
        pytest.importorskip("kaleido")
    target = full_disk / ("tables.md" if option == "--markdown" else "files")
    page = tmp_path / "page.html"
    code, error, out = _exit(reports, ["plain", "--storage", finished_store, "-o", str(page), option, str(target)], capsys)
    if option == "--png" and "--png needs Chrome or Chromium" in error:
        pytest.skip("kaleido finds no Chrome or Chromium here (refused before anything was written)")
    assert code == 2 and "No space left on device" in error and "Traceback" not in error, error
    assert f"cannot write {target}" in error and str(page) not in error
    partial = [p for p in full_disk.rglob("*") if p.is_file() and p.name != FILLER]
    assert not partial  # not one byte of a table or an image (a PNG was left empty, at 0 bytes)


@pytest.mark.parametrize("room", [0, 4096], ids=["no room for its lock", "room for its lock alone"])
def test_a_run_whose_store_is_on_a_full_disk_exits_2_in_one_sentence(
    room: int, tmp_path: Path, full_disk: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The class of a run that meets a full disk under its store: the lock that records its driver (an OSError),
    or the database (SQLite's "database or disk is full", inside Optuna's StorageInternalError). One sentence
    naming what is full, exit 2, and no study in the store."""
    monkeypatch.chdir(tmp_path)
    filler = full_disk / FILLER
    os.truncate(filler, filler.stat().st_size - room)  # a page for the lock's pid, none for the database
    store = full_disk / "store.db"
    argv = ["lra_sharing", "--preset", "smoke", "--storage", f"sqlite:///{store}", "--data-cache", str(tmp_path / "data")]
    code, error, _ = _exit(run, argv, capsys)
    assert code == 2 and "Traceback" not in error, error
    full = store.with_name("store.db.writer-lock") if room == 0 else f"the store sqlite:///{store}"
    assert f"no space left on the disk of {full}" in error, error
    assert "run the same command again" in error
    assert not store.exists() or store.stat().st_size == 0, store.stat().st_size  # no page of a study
