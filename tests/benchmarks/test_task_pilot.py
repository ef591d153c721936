"""The task pilot: its configurations within the cost band, its rows resumed, its file checked, its summary's power."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import benchmarks.task_pilot as pilot
from studies.catalogue import LRA_SHARING
from studies.results.matching import matched
from studies.results.statistics import paired_power
from trainers.config import ModelConfig
from trainers.costs import model_flops
from trainers.data.cache import CACHE_DIR_VARIABLE


def _flops(candidate: pilot.Candidate, family: str) -> float:
    model = ModelConfig(**pilot.trial_config(candidate, family, 0, Path("unused")).model)
    return float(model_flops(model, model.max_length).forward)


def test_every_configuration_lies_in_the_cost_band_of_mha_on_every_candidate() -> None:
    for candidate in pilot.CANDIDATES:
        baseline = _flops(candidate, pilot.BASELINE)
        for family in pilot.CONFIGURATIONS:
            assert matched(_flops(candidate, family) / baseline), (candidate.name, family)


def test_the_pilot_trains_what_its_file_lacks_and_nothing_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    smoke = LRA_SHARING.preset("smoke")
    tiny = replace(smoke, train=replace(smoke.train, steps=4, eval_every=4, warmup_steps=1))
    monkeypatch.setattr(pilot, "CANDIDATES", (pilot.Candidate("tiny", pilot._on_task(tiny), seeds=2, chance=0.1),))
    monkeypatch.setattr(pilot, "SHAPE", {"d_model": 32, "num_heads": 2, "learning_rate": 1e-3})
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path / "data"))
    path = tmp_path / "pilot.csv"
    rows = pilot.train_missing(path, workers=1)
    assert len(rows) == 2 * len(pilot.CONFIGURATIONS)
    assert sorted(set(rows["seed"])) == [80_000, 80_001]
    assert "8/8: tiny DAMCHA (cross) seed 1" in capsys.readouterr().out  # seed 0's pass before seed 1's
    first = path.read_bytes()
    assert pilot.train_missing(path, workers=1).equals(rows)  # trained nothing
    assert path.read_bytes() == first and capsys.readouterr().out == ""
    path.write_text(pd.read_csv(path).drop(index=3).to_csv(index=False))
    again = pilot.train_missing(path, workers=1)
    assert capsys.readouterr().out.startswith("1/1: tiny DAMCHA (cross) seed 0")
    pd.testing.assert_frame_equal(again.drop(columns=["wall_seconds"]), rows.drop(columns=["wall_seconds"]))  # alike


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"task,family\nlistops,MHA\n", "no column seed_index"),
        (b"\xff\xfe\x00", "not a pilot file"),
        (b"", "not a pilot file"),
    ],
)
def test_a_damaged_pilot_file_is_named_and_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, says: str
) -> None:
    path = tmp_path / "pilot.csv"
    path.write_bytes(content)
    assert pilot.main(["--summary", "--file", str(path)]) == 2
    assert says in capsys.readouterr().err and path.read_bytes() == content


def test_an_accuracy_outside_0_to_1_is_named_by_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    row = {column: 0 for column in pilot.COLUMNS} | {"task": "listops", "family": "MHA", "test_accuracy": 0.5}
    path = tmp_path / "pilot.csv"
    pd.DataFrame([row, row | {"test_accuracy": float("inf")}]).to_csv(path, index=False)
    assert pilot.main(["--summary", "--file", str(path)]) == 2
    assert "line 3: test_accuracy is not an accuracy in [0, 1]" in capsys.readouterr().err


def test_the_summary_gives_each_rival_s_paired_difference_sd_and_power() -> None:
    seeds = range(4)
    mha = [0.50, 0.52, 0.51, 0.53]
    rival = [0.48, 0.51, 0.48, 0.52]  # paired differences -2, -1, -3, -1 points
    rows = pd.DataFrame(
        [
            {"task": "listops", "family": family, "seed_index": i, "test_accuracy": value, "flops_per_example": flops}
            for family, values, flops in (("MHA", mha, 100.0), ("Talking-Heads", rival, 114.0), ("DCMHA", rival, 120.0))
            for i, value in zip(seeds, values, strict=True)
        ]
    )
    text = pilot.summarize(rows)
    deviation = pd.Series([-2.0, -1.0, -3.0, -1.0]).std()
    assert "MHA 51.5% (SD 1.3, 4 seeds): 41.5 points above chance, 48.5 below ceiling" in text
    assert f"Talking-Heads (1.14x MHA's FLOPs): -1.8 points over 4 seeds, paired SD {deviation:.1f}" in text
    assert f"power to detect 2 points on 6 seeds {paired_power(2.0, deviation, 6):.2f}" in text
    assert "DCMHA (1.20x MHA's FLOPs, outside the cost band)" in text
