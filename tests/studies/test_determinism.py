"""The same command gives the same study, whatever order its trials finish in.

Two smoke runs of the same study and seed, each trial's start delayed by a random amount
(so that trials finish in another order each time), must store the same trials: the same
numbers, knobs, states, values, learning curves and test values, and the same verdict.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import optuna
import pytest
from ray import cloudpickle

from studies import catalogue
from studies.catalogue import LRA_SHARING
from studies.catalogue.tasks import ListOpsTask
from studies.run import main

# Ray's workers unpickle the jittered task without importing this module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

# What a trial records that measures the machine, not the study: timings, throughput, where it ran.
MACHINE_ATTRIBUTES = {
    "wall_seconds",
    "examples_per_s",
    "tokens_per_s",
    "flops_per_s",
    "compile_seconds",
    "peak_memory_bytes",
    "ray_trial_id",
    "driver",
    "device",
    "code_version",
}


@dataclass(frozen=True)
class JitteredListOps(ListOpsTask):
    """The smoke preset's ListOps, loaded after a random pause: each trial starts late by a different amount."""

    def load(self, cache_dir: Path | None = None):
        time.sleep(random.SystemRandom().uniform(0.0, 1.5))
        return super().load(cache_dir)


SMOKE = LRA_SHARING.preset("smoke")
JITTERED = replace(
    LRA_SHARING, name="lra_sharing_jittered", presets={"smoke": replace(SMOKE, task=JitteredListOps(SMOKE.task.spec))}
)


def _record(url: str) -> tuple[list[dict], str]:
    study = optuna.load_study(study_name=f"{JITTERED.name}-smoke-v{JITTERED.version}", storage=url)
    trials = [
        {
            "number": t.number,
            "state": t.state.name,
            "params": t.params,
            "values": t.values,
            "curve": t.intermediate_values,
            "attributes": {k: v for k, v in t.user_attrs.items() if k not in MACHINE_ATTRIBUTES},
        }
        for t in study.get_trials()
    ]
    return trials, study.user_attrs["verdict"]


def test_two_runs_whose_trials_finish_in_another_order_store_the_same_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_ray
) -> None:
    monkeypatch.setitem(catalogue.STUDIES, JITTERED.name, JITTERED)
    monkeypatch.chdir(tmp_path)
    records = []
    for run in ("first", "second"):
        url = f"sqlite:///{tmp_path / run}.db"
        argv = [JITTERED.name, "--preset", "smoke", "--storage", url, "--data-cache", str(tmp_path / "data")]
        assert main([*argv, "--repeat-seeds", "0", "--report", str(tmp_path / f"{run}.html")]) == 0
        records.append(_record(url))
    (first, first_verdict), (second, second_verdict) = records
    assert len(first) == SMOKE.trials
    assert [t["number"] for t in first] == [t["number"] for t in second]
    for a, b in zip(first, second, strict=True):
        assert a == b, f"trial {a['number']} differs"
    assert first_verdict == second_verdict
    ends = [t["attributes"]["ending"]["state"] for t in first]
    assert set(ends) <= {"COMPLETE", "PRUNED"}  # every trial ended, and its ending was told to Optuna
    assert [t["state"] for t in first] == ends
