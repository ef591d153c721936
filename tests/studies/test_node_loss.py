"""A real two-node Ray cluster on this machine loses its worker node mid-study: the lost trials are failed
and retried on the surviving node, nothing is counted twice, the study finishes, and the report says so."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from common.outputs import REPORTS_DIR
from reports.files import report_path
from tests.commands import smoke_study_command
from tests.conftest import SMOKE_STUDY
from tests.processes import kill_tree, processes_naming, start_ray_node, stop_ray_node

pytestmark = pytest.mark.drill  # make drills

TRIALS = 6
STUDY = f"{SMOKE_STUDY}-num_layers=6"  # six layers: trials long enough to be caught mid-training


def _trial_worker_of(marker: str) -> int | None:
    """A trial's Ray worker running on the node whose raylet has ``marker`` on its command line, if any."""
    for pid in processes_naming(marker):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::ImplicitFunc.train"):
                return pid
        except OSError:
            continue
    return None


@pytest.fixture
def two_nodes(tmp_path: Path):
    """A head and a worker node, one CPU each, in a temporary folder of their own (a worker node on the head's
    machine shares the head's session there); every process of both stopped by its pid at the end."""
    folder = tempfile.mkdtemp(prefix="ray-2-", dir="/tmp")
    try:
        head = start_ray_node(folder, tmp_path / "head.log", cpus=1)
        node = start_ray_node(folder, tmp_path / "node.log", head=head["address"], cpus=1)
        yield {"address": head["address"], "node": node["marker"]}
    finally:
        stop_ray_node(folder)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_study_survives_losing_a_worker_node(two_nodes: dict, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    command = smoke_study_command(
        "--address", two_nodes["address"], "--fix", "num_layers=6", "--storage", url, "--data-cache", str(tmp_path / "data")
    )
    driver = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while (worker := _trial_worker_of(two_nodes["node"])) is None:  # a trial trains on the worker node
            assert time.monotonic() < deadline and driver.poll() is None, "no trial reached the worker node"
            time.sleep(0.2)
        stop_ray_node(two_nodes["node"], at_once=True)  # the machine is lost: every process of that node, SIGKILL
        assert worker not in processes_naming(two_nodes["node"])
        output, _ = driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            kill_tree(driver)
    assert driver.returncode == 0, output[-3000:]
    trials = optuna.load_study(study_name=STUDY, storage=url).get_trials()
    lost = [t for t in trials if t.state == TrialState.FAIL]
    assert lost, "the worker node's trial should have failed"
    assert all(re.search(r"actor .*(died|unavailable)|node", t.user_attrs["error"], re.IGNORECASE) for t in lost)
    retries = {t.user_attrs.get("retry_of"): t for t in trials if "retry_of" in t.user_attrs}
    assert {t.number for t in lost} <= set(retries)  # each retried
    assert all(retries[t.number].state in (TrialState.COMPLETE, TrialState.PRUNED) for t in lost)  # on the survivor
    searched = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(searched) == TRIALS and not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    report = report_path(STUDY, url, tmp_path / REPORTS_DIR).read_text()
    assert f"{len(lost)} fail" in output  # the summary counts the lost trials
    assert f"<th>FAIL</th><td>{len(lost)}</td>" in report and "failed or infeasible" in report  # and so does the report
