"""The SQLite store a run opens: the URL it reads, the one writer its file lets in whatever name leads to
it, and the files and media it refuses, each with exit 2 (or 3: another driver) and nothing written."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from storage import single_writer
from studies.run import main
from tests.commands import exit_code_and_error


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_storage_url_comes_from_the_environment(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAMCHA_STORAGE_URL", "oracle://scott:tiger@db/orcl")
    code, error = exit_code_and_error(["lra_sharing"], capsys)
    assert code == 2 and "oracle://scott:***@db/orcl" in error and "tiger" not in error


def test_a_second_driver_on_one_sqlite_store_is_refused(capsys, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with single_writer(url):  # as a running driver holds it
        assert main(["lra_sharing", "--preset", "smoke", "--storage", url]) == 3
    error = capsys.readouterr().err
    assert f"another driver (pid {os.getpid()})" in error and "use PostgreSQL for several drivers" in error
    assert (tmp_path / "store.db").stat().st_size == 0  # the holder's lock made it empty; no half-created study


@pytest.mark.parametrize("link", ["folder", "file"])
def test_a_second_driver_through_a_symbolic_link_is_refused(link: str, capsys, tmp_path: Path) -> None:
    """The lock is the database file's, whichever path leads to it."""
    real = tmp_path / "real"
    real.mkdir()
    if link == "folder":
        (tmp_path / "alias").symlink_to(real)
        other = tmp_path / "alias" / "store.db"
    else:
        (real / "store.db").touch()
        (tmp_path / "alias.db").symlink_to(real / "store.db")
        other = tmp_path / "alias.db"
    with single_writer(f"sqlite:///{real / 'store.db'}"):
        assert main(["lra_sharing", "--preset", "smoke", "--storage", f"sqlite:///{other}"]) == 3
    assert "another driver" in capsys.readouterr().err
    assert sorted(p.name for p in real.iterdir()) == ["store.db", "store.db.writer-lock"]  # the holder's, nothing more
    assert (real / "store.db").stat().st_size == 0


@pytest.mark.parametrize("form", ["uri-absolute", "uri-triple-slash", "uri-relative", "uri-with-arguments"])
def test_a_second_driver_naming_the_file_as_a_sqlite_uri_is_refused(
    form: str, capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The class of URLs that name one database file in another form: the lock is the file's."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    other = {
        "uri-absolute": f"sqlite:///file:{tmp_path}/runs/store.db?uri=true",
        "uri-triple-slash": f"sqlite:///file://{tmp_path}/runs/store.db?uri=true",
        "uri-relative": "sqlite:///file:runs/store.db?uri=true",
        "uri-with-arguments": "sqlite:///file:runs/./store.db?mode=rwc&uri=true",
    }[form]
    with single_writer("sqlite:///runs/store.db"):  # as a first driver, on the plain path, holds it
        assert main(["lra_sharing", "--preset", "smoke", "--storage", other]) == 3
    assert "another driver" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["store.db", "store.db.writer-lock"]  # the holder's alone
    assert (tmp_path / "runs" / "store.db").stat().st_size == 0


@contextlib.contextmanager
def bind_mount(source: Path, target: Path, *, read_only: bool = False) -> Iterator[Path]:
    """``source`` shown at ``target`` (a folder or a file) for the block, read-only if asked; skips the test
    where this user may mount nothing (a bind mount needs root)."""
    if subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True).returncode != 0:
        pytest.skip("this machine lets this user mount nothing (a bind mount needs root)")
    try:
        if read_only:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True)
        yield target
    finally:  # lazily: this process keeps its descriptors of a store there (``storage.database_lock``)
        subprocess.run(["umount", "--lazy", str(target)], check=True)


def test_a_second_driver_through_another_mount_of_the_folder_is_refused(capsys, tmp_path: Path) -> None:
    """A bind mount shows the store's folder under another path; the lock beside the file is the same file."""
    real, mounted = tmp_path / "real", tmp_path / "mounted"
    real.mkdir()
    mounted.mkdir()
    with bind_mount(real, mounted), single_writer(f"sqlite:///{real / 'store.db'}"):
        assert main(["lra_sharing", "--preset", "smoke", "--storage", f"sqlite:///{mounted / 'store.db'}"]) == 3
    assert "another driver" in capsys.readouterr().err


def test_a_second_driver_through_a_bind_mount_of_the_file_alone_is_refused(capsys, tmp_path: Path) -> None:
    """A bind mount of the database file shows it in another folder, beside no lock file: the lock is the file's own."""
    real, elsewhere = tmp_path / "real", tmp_path / "elsewhere"
    real.mkdir()
    elsewhere.mkdir()
    optuna.create_study(study_name="first", storage=f"sqlite:///{real / 'store.db'}")
    (elsewhere / "store.db").touch()
    mounted = contextlib.ExitStack()
    mounted.enter_context(bind_mount(real / "store.db", elsewhere / "store.db"))
    holder = subprocess.Popen(  # the first driver, a process of its own, holding the store as a run does
        [
            sys.executable,
            "-c",
            "import sys; from storage import single_writer\n"
            f"with single_writer('sqlite:///{real / 'store.db'}'):\n    print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["lra_sharing", "--preset", "smoke", "--storage", f"sqlite:///{elsewhere / 'store.db'}"]) == 3
        error = capsys.readouterr().err
        assert "another driver" in error and "use PostgreSQL for several drivers" in error
        assert sorted(p.name for p in elsewhere.iterdir()) == ["store.db"]  # no log, no lock beside the other name
        assert [s.study_name for s in optuna.get_all_study_summaries(f"sqlite:///{real / 'store.db'}")] == ["first"]
    finally:
        holder.communicate("")
        mounted.close()
    assert holder.returncode == 0


def test_a_new_store_on_a_read_only_file_system_is_refused_in_those_words(capsys, tmp_path: Path) -> None:
    """The system tells a read-only medium from a permission: the message names the cause it told (EROFS)."""
    source, mounted = tmp_path / "source", tmp_path / "mounted"
    source.mkdir()
    mounted.mkdir()
    with bind_mount(source, mounted, read_only=True):
        code, error = exit_code_and_error(
            ["lra_sharing", "--preset", "smoke", "--storage", f"sqlite:///{mounted / 'new' / 'store.db'}"], capsys
        )
    assert code == 2 and f"{mounted} is on a read-only file system" in error and "cannot write" not in error


def test_a_store_with_another_hard_link_is_refused_for_writing(capsys, tmp_path: Path) -> None:
    """A hard link is another name the writer lock cannot see (and SQLite would log it apart)."""
    optuna.create_study(storage=f"sqlite:///{tmp_path / 'store.db'}")
    os.link(tmp_path / "store.db", tmp_path / "other.db")
    code, error = exit_code_and_error(
        ["lra_sharing", "--preset", "smoke", "--storage", f"sqlite:///{tmp_path / 'other.db'}"], capsys
    )
    assert code == 2 and "has 2 hard links" in error and "keep one name" in error


def test_an_in_memory_sqlite_uri_is_refused(capsys) -> None:
    for url in ("sqlite:///file::memory:?uri=true", "sqlite:///file:x?mode=memory&uri=true"):
        code, error = exit_code_and_error(["lra_sharing", "--storage", url], capsys)
        assert code == 2 and "SQLite needs a file" in error, url
