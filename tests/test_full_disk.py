"""A full file system: every output that does not fit exits 2 with one sentence, and leaves nothing half-written."""

from __future__ import annotations

import contextlib
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


def _exit(command, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = command(argv)
    except SystemExit as stopped:
        code = stopped.code
    return code, capsys.readouterr().err


def test_a_report_on_a_full_disk_exits_2_and_leaves_no_partial_page(
    tmp_path: Path, full_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    study = optuna.create_study(study_name="plain", storage=url)
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=3)
    code, error = _exit(reports, ["plain", "--storage", url, "-o", str(full_disk / "page.html")], capsys)
    assert code == 2 and "No space left on device" in error and "Traceback" not in error
    assert [p.name for p in full_disk.iterdir()] == [FILLER]


def test_a_data_cache_on_a_full_disk_exits_2_after_the_store_and_leaves_no_partial_cache(
    tmp_path: Path, full_disk: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["lra_sharing", "--preset", "smoke", "--storage", f"sqlite:///{tmp_path / 'store.db'}", "--data-cache", str(full_disk)]
    code, error = _exit(run, argv, capsys)
    assert code == 2 and "cannot write the data cache" in error and "No space left on device" in error
    assert "Traceback" not in error
    assert [p.name for p in full_disk.iterdir()] == [FILLER]  # no .partial-<pid> folder
