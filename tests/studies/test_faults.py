"""Faults really done: a worker or the driver killed with SIGKILL, a diverging loss, a trial out of memory, a second reader."""

from __future__ import annotations

import contextlib
import html
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from common.outputs import REPORTS_DIR
from reports.files import report_path
from search_space.space import Choice
from storage import record
from studies.catalogue import LRA_SHARING
from studies.catalogue.schema import Family, Study
from studies.engine.options import RunOptions
from studies.engine.queue import queued
from studies.engine.runner import run_study
from studies.results.frame import outcome
from studies.results.names import INFEASIBLE
from studies.show import show_study
from tests.commands import smoke_study_command, with_ctrl_c
from tests.processes import descendants, free_ports, kill_tree, still_runs, wait_for_training_worker

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.drill  # make drills

STUDY = "lra_sharing-smoke-v6-num_layers=6"  # six layers: trials long enough to be caught mid-training
# docs/guarantees.md's bound: Ray's agents wait 60 s to report the raylet's death before they exit (about 80 s seen).
LOCAL_RAY_OUTLIVES_A_KILLED_DRIVER_S = 150


def assert_one_sentence(output: str) -> None:
    """A failure said in one sentence: no traceback, and no library's log of it (Ray Tune's ``ERROR``)."""
    shown = [line for line in output.splitlines() if "Traceback" in line or " ERROR " in line or "Error stopping" in line]
    assert not shown, output[-3000:]


def after_the_first_ending(driver: subprocess.Popen) -> None:
    """Read the driver's output until its first trial completes (others are training then)."""
    for line in driver.stdout:
        if " · complete · " in line:
            return


def fill(path: Path) -> None:
    """Write zeros to ``path`` until its disk is full, the last page included."""
    with contextlib.suppress(OSError), path.open("wb") as filler:
        while True:
            filler.write(b"\0" * 4096)
            filler.flush()


def start_driver(tmp_path: Path, url: str) -> subprocess.Popen:
    command = smoke_study_command(
        "--fix",
        "num_layers=6",
        "--storage",
        url,
        "--data-cache",
        str(tmp_path / "data"),
    )
    return subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def test_killed_driver_resumes_with_nothing_counted_twice(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    driver = start_driver(tmp_path, url)
    wait_for_training_worker(driver)
    time.sleep(1.0)
    kill_tree(driver)  # mid-study, SIGKILL: no chance to clean up
    before = optuna.load_study(study_name=STUDY, storage=url).get_trials()
    running = [t for t in before if t.state == TrialState.RUNNING]
    finished_before = {t.number: t.values for t in before if t.state in (TrialState.COMPLETE, TrialState.PRUNED)}
    assert running, "the kill came after the study ended"

    rerun = start_driver(tmp_path, url)
    output, _ = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, output[-3000:]  # the SQLite writer lock died with the killed driver
    after = optuna.load_study(study_name=STUDY, storage=url).get_trials()
    assert {n: after[n].values for n in finished_before} == finished_before  # completed trials intact
    for trial in running:
        if "ending" in trial.user_attrs:  # it had ended, and its ending was stored: told, not trained again
            assert after[trial.number].state.name == trial.user_attrs["ending"]["state"]
            assert not [t for t in after if t.user_attrs.get("retry_of") == trial.number]
            continue
        assert after[trial.number].state == TrialState.FAIL and "interrupted run" in after[trial.number].user_attrs["error"]
        (retried,) = [t for t in after if t.user_attrs.get("retry_of") == trial.number]
        if "model_config" in trial.user_attrs:  # it trained: the same configuration again
            assert retried.params == trial.params
        else:  # killed while the sampler chose its knobs: what it had chosen, the rest sampled
            assert trial.params.items() <= retried.params.items()
    assert sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in after) == 6


def test_a_killed_drivers_local_ray_goes_with_it(tmp_path: Path) -> None:
    """SIGKILL to the driver alone: Ray's fate sharing ends its local Ray (workers, raylet, GCS at once; the dashboard
    and runtime-env agents once their 60 s report of the raylet's death to the gone GCS times out), so no
    process of the run outlives it by more than docs/guarantees.md says."""
    driver = start_driver(tmp_path, f"sqlite:///{tmp_path / 'store.db'}")
    survivors: list[tuple[int, str]] = []
    try:
        wait_for_training_worker(driver)
        started = descendants(driver.pid)
        os.kill(driver.pid, signal.SIGKILL)  # no chance to clean up, and nothing else is killed
        driver.wait(timeout=30)
        killed = time.monotonic()
        alive = started
        while alive and time.monotonic() - killed < LOCAL_RAY_OUTLIVES_A_KILLED_DRIVER_S:
            time.sleep(2)
            alive = [(pid, command) for pid, command in alive if still_runs(pid, command)]
        survivors = alive
        assert not survivors, f"alive {LOCAL_RAY_OUTLIVES_A_KILLED_DRIVER_S} s after the driver's SIGKILL: {survivors}"
    finally:
        for pid, _ in survivors or []:  # only the run's own processes, by pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def faulted_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One whole smoke study whose first trial's Ray worker is killed (SIGKILL) while optuna-dashboard reads the
    store as fast as a browser tab polling it would; its folder (store, report, data cache) is then the finished
    study that the signal tests stop a second run of."""
    root = tmp_path_factory.mktemp("faulted")
    url = f"sqlite:///{root / 'store.db'}"
    (port,) = free_ports(1)
    driver = start_driver(root, url)
    dashboard = None
    reads = 0
    try:
        worker = wait_for_training_worker(driver)  # the store exists and trials are being written
        dashboard = subprocess.Popen(
            [str(Path(sys.executable).with_name("optuna-dashboard")), url, "--host", "127.0.0.1", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.kill(worker, signal.SIGKILL)
        while driver.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies/1?after=0", timeout=5) as response:
                    reads += bool(json.load(response)["trials"])
            except OSError:
                pass
            time.sleep(0.1)
        output = driver.stdout.read()
    finally:
        if dashboard is not None:
            dashboard.terminate()
            dashboard.wait(timeout=10)
        if driver.poll() is None:
            kill_tree(driver)
    assert driver.returncode == 0, output[-3000:]
    return {"root": root, "url": url, "reads": reads}


def test_killed_worker_fails_its_trial_and_the_configuration_is_retried(faulted_run: dict) -> None:
    trials = optuna.load_study(study_name=STUDY, storage=faulted_run["url"]).get_trials()
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert len(failed) == 1 and "died" in failed[0].user_attrs["error"].lower()
    (retry,) = [t for t in trials if t.user_attrs.get("retry_of") == failed[0].number]
    assert retry.params == failed[0].params and retry.state in (TrialState.COMPLETE, TrialState.PRUNED)
    assert sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials) == 6  # the requested number finished


def test_dashboard_reading_the_sqlite_store_during_a_run_does_not_break_it(faulted_run: dict) -> None:
    assert faulted_run["reads"] > 10
    trials = optuna.load_study(study_name=STUDY, storage=faulted_run["url"]).get_trials()
    assert len(trials) == 7 and sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials) == 6


def faulty_study() -> Study:
    """The smoke study with an MHA family per (learning rate, MLP width), a diverging rate and an MLP too big to fit.

    (3e-3, 64) trains (the baseline); (1e12, 64) turns NaN at step 2; both 2**22-wide MLPs
    need two 512 MiB weights per layer. A DAMCHA family that trains completes the five.
    """
    smoke = LRA_SHARING.preset("smoke")
    domains = {"learning_rate": Choice((3e-3, 1e12)), "mlp_width": Choice((64, 2**22))}
    knobs = {name: replace(knob, domain=domains.get(name, knob.domain)) for name, knob in LRA_SHARING.space.knobs.items()}
    preset = replace(smoke, fixed={"num_layers": 2}, domains={**smoke.domains, "num_heads": Choice((2,))} | domains, trials=6)
    return replace(
        LRA_SHARING,
        name="faulty",
        space=replace(LRA_SHARING.space, knobs=knobs, searched=(*LRA_SHARING.space.searched, *domains)),
        families=(
            *(
                Family(
                    f"MHA lr={rate:g} mlp={width}",
                    {"attention": "mha", "learning_rate": rate, "mlp_width": width},
                    baseline=(rate, width) == (3e-3, 64),
                )
                for rate in (3e-3, 1e12)
                for width in (64, 2**22)
            ),
            Family("DAMCHA", {"attention": "damcha", "learning_rate": 3e-3, "mlp_width": 64}),
        ),
        presets={"smoke": preset},
        points=(),
        default_preset="smoke",
    )


def test_diverged_and_out_of_memory_trials_fail_with_reasons_and_the_study_goes_on(
    tmp_path: Path, local_ray, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    options = RunOptions(
        storage=url, cache_dir=tmp_path / "data", report=tmp_path / "report.html", trial_memory_gib=0.25, repeat_seeds=0
    )
    finished = run_study(faulty_study(), options, out=io.StringIO())
    report = show_study(finished, io.StringIO(), report=options.report)  # the report, as the command line writes it

    trials = optuna.load_study(study_name=finished.study_name, storage=url).get_trials()
    assert len(trials) == 6  # every planned trial ran: a trial of each family, then the first family's second
    mha = {(t.params["learning_rate"], t.params["mlp_width"]): t for t in trials if t.params["attention"] == "mha"}
    assert mha[3e-3, 64].state in (TrialState.COMPLETE, TrialState.PRUNED)
    diverged = mha[1e12, 64]
    assert outcome(diverged) == INFEASIBLE and diverged.user_attrs["diverged_at_step"] == 2
    assert diverged.user_attrs[record.INFEASIBLE] == "diverged"
    assert "training loss is nan at step 2 of 60; search lower learning rates" in diverged.user_attrs["error"]
    for learning_rate in (3e-3, 1e12):
        oversized = mha[learning_rate, 2**22]
        assert outcome(oversized) == INFEASIBLE and oversized.user_attrs[record.INFEASIBLE] == "out of memory"
        assert "budget of 0.25 GiB was not enough" in oversized.user_attrs["error"]
        assert "raise --trial-memory or search smaller models" in oversized.user_attrs["error"]
    assert not any("retry_of" in t.user_attrs for t in trials)  # a configuration that cannot train is not retried
    assert all(t.user_attrs["memory_budget_bytes"] == 2**28 for t in trials)
    assert not [t for t in trials if t.state == TrialState.FAIL]  # ...each was told to the sampler (test_sampler.py)
    assert finished.counts[INFEASIBLE] == sum(record.INFEASIBLE in t.user_attrs for t in trials) >= 3
    page = report.read_text()
    for reason in ("diverged", "out of memory"):  # the report says how many could not train, and why
        count = sum(t.user_attrs.get(record.INFEASIBLE) == reason for t in trials)
        assert f"<th>{html.escape(reason)}</th><td>{count}</td>" in page  # provenance: could not train, by reason


INTERRUPTED_BUDGET = 40  # far more trials than run in the second before Ctrl-C: some are always running then


@pytest.mark.parametrize(
    ("stop", "code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGUSR1, 128 + signal.SIGUSR1)],
    ids=["ctrl-c", "sigterm", "sigusr1"],  # SIGUSR1: Ray Tune's own stop signal, which ended a run with exit 0
)
def test_a_stopping_signal_fails_the_stopped_trials_and_keeps_the_finished_report(
    tmp_path: Path, stop: signal.Signals, code: int, faulted_run: dict
) -> None:
    """The class of signals that stop a run (Ctrl-C; timeout, systemd, Slurm, Kubernetes; a closed terminal:
    SIGHUP takes SIGTERM's handler, ``test_sighup_takes_the_same_path_as_sigterm``; Ray Tune's SIGUSR1)."""
    shutil.copytree(faulted_run["root"], tmp_path, dirs_exist_ok=True)  # a finished study, its report and its data
    url = f"sqlite:///{tmp_path / 'store.db'}"
    report = report_path(STUDY, url, tmp_path / REPORTS_DIR)  # the copied store's own name: named after its file
    report_path(STUDY, faulted_run["url"], tmp_path / REPORTS_DIR).rename(report)
    page = report.read_bytes()

    command = with_ctrl_c(
        smoke_study_command(
            "--fix", "num_layers=6", "--storage", url, "--data-cache", str(tmp_path / "data"), "--trials", str(INTERRUPTED_BUDGET)
        )
    )
    driver = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        wait_for_training_worker(driver)
        time.sleep(1.0)
        driver.send_signal(stop)  # as Ctrl-C, or a process manager, reaches the driver
        output, _ = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            kill_tree(driver)

    assert driver.returncode == code, output[-3000:]
    assert "interrupted" in output and "Traceback" not in output
    trials = optuna.load_study(study_name=STUDY, storage=url).get_trials()
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    stopped = [t for t in trials if t.user_attrs.get("interrupted")]
    cause = "Ctrl-C" if stop == signal.SIGINT else stop.name
    assert stopped and all(t.state == TrialState.FAIL and f"({cause})" in t.user_attrs["error"] for t in stopped)
    assert report.read_bytes() == page  # the finished study's report was not replaced by a partial one
    assert not list(report.parent.glob("*.partial"))

    # The store's queue holds their retries, for whichever run comes next.
    assert {t.user_attrs.get("retry_of") for t in queued(optuna.load_study(study_name=STUDY, storage=url))} >= {
        t.number for t in stopped
    }


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_sighup_takes_the_same_path_as_sigterm(stop: signal.Signals) -> None:
    """In a process of its own: the signal raises KeyboardInterrupt in the main thread (Ctrl-C's path, which the
    real runs above follow to the end), names itself, sets the exit code, and a second one during clean-up is ignored."""
    script = (
        "import os, signal, sys, time; from studies.engine.signals import exit_code, stop_cause, stop_on_signals\n"
        "stop_on_signals()\n"
        "try:\n"
        f"    os.kill(os.getpid(), {int(stop)}); time.sleep(10); print('not stopped')\n"
        "except KeyboardInterrupt:\n"
        f"    os.kill(os.getpid(), {int(stop)}); print(stop_cause()); sys.exit(exit_code())\n"
    )
    stopped = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert (stopped.returncode, stopped.stdout.strip()) == (128 + stop, stop.name), stopped.stderr


def test_a_store_whose_disk_fills_mid_run_exits_2_and_the_same_command_finishes_the_study_once_freed(
    tmp_path: Path,
) -> None:
    """The store's disk fills while trials train (SQLite's "database or disk is full" inside a Ray Tune callback):
    one sentence, exit 2; freed, the same command retries what was running and counts nothing twice."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("this machine lets this user mount nothing (a tmpfs needs root)")
    url = f"sqlite:///{disk / 'store.db'}"
    filler = disk / "filler"
    try:
        driver = start_driver(tmp_path, url)
        after_the_first_ending(driver)
        fill(filler)
        output = driver.stdout.read()
        assert driver.wait(timeout=300) == 2, output[-3000:]
        assert "no space left on the disk of the store" in output, output[-3000:]
        assert_one_sentence(output)
        filler.unlink()
        rerun = start_driver(tmp_path, url)
        output, _ = rerun.communicate(timeout=300)
        assert rerun.returncode == 0, output[-3000:]
        trials = optuna.load_study(study_name=STUDY, storage=url).get_trials()
        assert not [t for t in trials if t.state == TrialState.RUNNING]
        assert sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials) == 6
        for failed in (t for t in trials if t.state == TrialState.FAIL):  # what was running: retried once
            assert len([t for t in trials if t.user_attrs.get("retry_of") == failed.number]) == 1
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=True)


def test_a_postgresql_server_that_stops_mid_run_ends_it_in_one_sentence_and_the_same_command_finishes_once_it_is_back(
    tmp_path: Path,
) -> None:
    """The server shuts down (an administrator's fast shutdown) while trials train: one sentence naming the store
    (no password), exit 2, no library's traceback; started again, the same command recovers what was running
    (at once: its driver ran on this host) and finishes the budget, counting nothing twice."""
    from common.postgres_server import postgres_binaries, throwaway_postgres_server

    if (bin_dir := postgres_binaries()) is None:
        pytest.skip("needs Debian's postgresql package and root (apt-get install postgresql)")
    with throwaway_postgres_server(bin_dir) as server:
        driver = start_driver(tmp_path, server.url)
        after_the_first_ending(driver)
        server.stop("fast")
        output = driver.stdout.read()
        assert driver.wait(timeout=300) == 2, output[-3000:]
        assert f"the store {server.url} failed during the run (" in output, output[-3000:]
        assert "once it answers again, run the same command again" in output
        assert_one_sentence(output)
        server.start()
        rerun = start_driver(tmp_path, server.url)
        output, _ = rerun.communicate(timeout=300)
        assert rerun.returncode == 0, output[-3000:]
        trials = optuna.load_study(study_name=STUDY, storage=server.url).get_trials()
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    assert sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials) == 6
    for failed in (t for t in trials if t.state == TrialState.FAIL):  # what was running: retried once
        assert len([t for t in trials if t.user_attrs.get("retry_of") == failed.number]) == 1


def test_ray_tune_s_folder_on_a_full_disk_ends_the_run_in_one_sentence(tmp_path: Path) -> None:
    """Ray Tune's folder (``runs/ray`` under the working folder) fills while trials train, the store elsewhere:
    Tune's failed saves are not shown, the run ends in one sentence naming the folder, exit 2, and the store
    keeps what finished."""
    runs = tmp_path / "runs"
    runs.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(runs)], capture_output=True).returncode:
        pytest.skip("this machine lets this user mount nothing (a tmpfs needs root)")
    store = tmp_path / "store" / "store.db"
    url = f"sqlite:///{store}"
    try:
        driver = start_driver(tmp_path, url)
        after_the_first_ending(driver)
        fill(runs / "filler")
        output = driver.stdout.read()
        assert driver.wait(timeout=300) == 2, output[-3000:]
        assert "no space left on the disk of a folder this run writes (Ray Tune's runs/ray" in output, output[-3000:]
        assert_one_sentence(output)
        trials = optuna.load_study(study_name=STUDY, storage=url).get_trials()
        assert any(t.state == TrialState.COMPLETE for t in trials)
        assert not [t for t in trials if t.state == TrialState.RUNNING]  # the store could be written: failed, queued
    finally:
        subprocess.run(["umount", "--lazy", str(runs)], check=True)
