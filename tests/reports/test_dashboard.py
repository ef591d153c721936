"""optuna-dashboard reads our study, its trials, user attributes and learning curves through its HTTP API."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import SMOKE_STUDY


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


@pytest.fixture
def dashboard(smoke_run: dict):
    port = free_port()
    executable = Path(sys.executable).with_name("optuna-dashboard")
    process = subprocess.Popen(
        [str(executable), smoke_run["url"], "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                get_json(f"{base}/api/studies")
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail(
                        "optuna-dashboard did not answer: "
                        + (process.stderr.read().decode() if process.poll() is not None else "timeout")
                    )
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()  # our own process, by its pid
        process.wait(timeout=10)


def test_dashboard_shows_our_trials_attributes_and_curves(smoke_run: dict, dashboard: str) -> None:
    summaries = get_json(f"{dashboard}/api/studies")["study_summaries"]
    (summary,) = [s for s in summaries if s["study_name"] == SMOKE_STUDY]
    assert any(attribute["key"] == "question" for attribute in summary["user_attrs"])
    study = get_json(f"{dashboard}/api/studies/{summary['study_id']}?after=0")
    assert study["objective_names"] == ["val_accuracy", "flops_per_example"]
    trials = study["trials"]
    assert len(trials) == len(smoke_run["second"])  # the search's: its seed repeats are a study of their own
    complete = [t for t in trials if t["state"] == "Complete"]
    assert complete and all(t["intermediate_values"] for t in complete)
    keys = {attribute["key"] for attribute in complete[0]["user_attrs"]}
    assert {"baseline", "flops_per_example", "examples_per_s", "peak_memory_bytes", "seed", "code_version"} <= keys
