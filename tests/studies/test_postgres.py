"""The smoke study against a real PostgreSQL server: the cluster store, read back with plain Optuna."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from studies.engine.study_space import preset_space
from studies.run import main
from tests.commands import smoke_study_command
from tests.conftest import SMOKE_STUDY


def test_smoke_study_on_postgresql(postgres_url: str, local_ray, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAMCHA_PG_URL", postgres_url)
    argv = ["lra_sharing", "--preset", "smoke", "--repeat-seeds", "0", "--storage", "env:DAMCHA_PG_URL"]
    assert main([*argv, "--data-cache", str(tmp_path / "data")]) == 0
    trials = optuna.load_study(study_name=SMOKE_STUDY, storage=postgres_url).get_trials()
    assert len(trials) == 6 and {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert sum(bool(t.user_attrs["baseline"]) for t in trials) == 2  # MHA's share of six trials over three families
    assert all(t.intermediate_values and "flops_per_example" in t.user_attrs for t in trials)
    assert not list(tmp_path.glob("runs/*.writer-lock"))  # PostgreSQL needs no single-writer lock


@pytest.mark.drill  # make drills: two drivers, each with its own Ray, share one study (a cluster's case)
def test_two_drivers_share_one_postgresql_study(postgres_url: str, tmp_path: Path) -> None:
    import subprocess

    command = smoke_study_command(
        "--fix",
        "num_heads=2",
        "--storage",
        postgres_url,
        "--data-cache",
        str(tmp_path / "data"),
        "--trials",
        "6",
    )
    drivers = [
        subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)
    ]
    outputs = [driver.communicate(timeout=600)[0] for driver in drivers]
    assert [driver.returncode for driver in drivers] == [0, 0], outputs
    trials = optuna.load_study(study_name=f"{SMOKE_STUDY}-num_heads=2", storage=postgres_url).get_trials()
    assert len({t.number for t in trials}) == len(trials)  # no duplicated numbers
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.FAIL)]  # no trial failed or lost
    assert len(trials) == 6  # the two drivers together respect --trials
    assert len({t.user_attrs["driver"] for t in trials}) == 2  # both drivers worked on it


@pytest.mark.drill  # make drills
def test_a_killed_driver_s_trials_are_retried_at_once_by_the_next_run(postgres_url: str, tmp_path: Path) -> None:
    """Kill -9 a PostgreSQL study's driver and run the same command again at once: the dead driver's running
    trials do not wait out Optuna's heartbeat grace (180 s, longer than the run); they are failed and retried."""
    import signal
    import subprocess

    from tests.processes import kill_tree, wait_for_training_worker

    command = smoke_study_command(
        "--fix", "num_layers=6", "--storage", postgres_url, "--data-cache", str(tmp_path / "data"), "--trials", "4"
    )
    name = f"{SMOKE_STUDY}-num_layers=6"
    first = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        wait_for_training_worker(first)
        first.send_signal(signal.SIGKILL)  # no clean-up at all: its trials stay RUNNING in the store
        first.wait(timeout=60)
    finally:
        kill_tree(first)  # its Ray processes, which SIGKILL left behind
    left = [t.number for t in optuna.load_study(study_name=name, storage=postgres_url).get_trials(states=(TrialState.RUNNING,))]
    assert left  # the case: trials a dead driver left RUNNING
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    trials = optuna.load_study(study_name=name, storage=postgres_url).get_trials()
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    failed = {t.number: t for t in trials if t.number in left}
    assert all(t.state == TrialState.FAIL and "driver's process has exited" in t.user_attrs["error"] for t in failed.values())
    retried = {t.user_attrs.get("retry_of") for t in trials}
    assert set(left) <= retried and all(t.state != TrialState.WAITING for t in trials)  # each retried in this run


def test_a_driver_waiting_for_another_s_study_lock_says_so_and_goes_on_when_it_is_free(postgres_url: str) -> None:
    """The class of item 7's silent wait: a driver that finds the study's lock held (another driver asking, or
    paused while asking) says so before it waits, then takes the lock once it is let go."""
    import threading

    from storage import StudyLock

    said: list[str] = []
    holder, waiter = (
        StudyLock(postgres_url, "locked-study"),
        StudyLock(postgres_url, "locked-study", on_wait=lambda: said.append("wait")),
    )
    other = StudyLock(postgres_url, "another-study", on_wait=lambda: said.append("other"))
    taken = threading.Event()

    def take() -> None:
        with waiter.held():
            taken.set()

    with holder.held():
        with other.held():  # another study's lock is another lock: free
            pass
        thread = threading.Thread(target=take)
        thread.start()
        assert not taken.wait(2.0) and said == ["wait"]  # it said so, and waits
    thread.join(timeout=30)
    assert taken.is_set() and said == ["wait"]  # let go: it took the lock, once


def _open_after(barrier, url: str) -> str:
    """``open_storage`` once every process is ready; an error's text, or '' when it opened."""
    from storage import StorageURLError, open_storage

    barrier.wait(timeout=60)
    try:
        open_storage(url)
    except StorageURLError as error:
        return str(error)
    return ""


def test_drivers_opening_an_empty_database_at_once_all_open_it(postgres_url: str) -> None:
    """The drill's race, alone: Optuna creates a new store's tables unguarded, so drivers that start at once on an
    empty database both issued CREATE TABLE and all but one failed ("relation ... already exists")."""
    import concurrent.futures
    import multiprocessing

    import sqlalchemy

    server = sqlalchemy.create_engine(postgres_url, isolation_level="AUTOCOMMIT", poolclass=sqlalchemy.pool.NullPool)
    context = multiprocessing.get_context("fork")  # the test module is imported already
    for round_ in range(3):  # the race was lost about once in three drills of two drivers: six drivers, three times
        database = f"empty_{round_}"
        with server.connect() as connection:
            connection.execute(sqlalchemy.text(f"DROP DATABASE IF EXISTS {database}"))
            connection.execute(sqlalchemy.text(f"CREATE DATABASE {database}"))
        url = sqlalchemy.make_url(postgres_url).set(database=database).render_as_string(hide_password=False)
        with context.Manager() as manager, concurrent.futures.ProcessPoolExecutor(6, mp_context=context) as pool:
            barrier = manager.Barrier(6)
            errors = list(pool.map(_open_after, [barrier] * 6, [url] * 6))
        assert errors == [""] * 6, errors
        assert optuna.storages.RDBStorage(url).get_all_studies() == []  # one store, usable


@pytest.mark.drill  # make drills: another driver's trial still running when a driver ends
def test_a_driver_that_ends_while_another_s_trial_runs_stores_a_provisional_verdict_and_plans_no_repeats(
    postgres_url: str, local_ray, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A search trial of another driver may change what the verdict compares: the driver that ends first plans no
    seed repeats and marks its verdict provisional (console, report, store, list); the one that ends last, final."""
    import os
    import socket

    from reports.__main__ import main as reports_main
    from storage import record
    from studies.catalogue import LRA_SHARING

    monkeypatch.chdir(tmp_path)
    argv = ["lra_sharing", "--preset", "smoke", "--storage", postgres_url, "--data-cache", str(tmp_path / "data")]
    assert main([*argv, "--repeat-seeds", "0"]) == 0
    study = optuna.load_study(study_name=SMOKE_STUDY, storage=postgres_url)
    done = len(study.trials)
    study.enqueue_trial({"attention": "mha", "d_model": 32, "num_heads": 2}, user_attrs={"family": "MHA", "baseline": True})
    elsewhere = study.ask()  # another driver's trial, training: its driver a live process on this host
    preset_space(LRA_SHARING, LRA_SHARING.preset("smoke")).suggest(elsewhere)
    elsewhere.set_user_attr(record.DRIVER, f"{socket.gethostname()}:{os.getppid()}")
    capsys.readouterr()

    assert main([*argv, "--trials", str(done + 1)]) == 0  # its budget is met: the other driver's trial is in it
    said = capsys.readouterr().out
    assert "1 search trials still run under other drivers: the seed repeats are left" in said
    assert "Provisional: 1 trial of the study is still running" in said
    study = optuna.load_study(study_name=SMOKE_STUDY, storage=postgres_url)
    assert study.user_attrs[record.VERDICT_PROVISIONAL].startswith("Provisional: 1 trial")
    repeats = [s for s in optuna.get_all_study_summaries(postgres_url) if s.study_name == f"{SMOKE_STUDY}:repeats"]
    assert not repeats or repeats[0].n_trials == 0  # no seed repeat planned on a search still running
    assert reports_main(["list", "--storage", postgres_url]) == 0
    assert "    Provisional: 1 trial" in capsys.readouterr().out

    study.tell(elsewhere, state=TrialState.FAIL)  # the other driver's trial ends: the last driver's verdict is final
    assert main([*argv, "--trials", str(done + 1)]) == 0
    study = optuna.load_study(study_name=SMOKE_STUDY, storage=postgres_url)
    assert study.user_attrs[record.VERDICT_PROVISIONAL] == "" and "Provisional" not in capsys.readouterr().out
