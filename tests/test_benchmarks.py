"""The benchmarks run end to end at tiny sizes (their figures are not checked here)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
# A two-layer D=32 model on 32 tokens, one timed step: every row of benchmarks.train_step in seconds.
TINY_TRAIN_STEP = ("--lengths", "32", "--d-model", "32", "--heads", "4", "--layers", "2", "--tokens", "64", "--reps", "1")


def run_benchmark(module: str, *args: str, timeout: int) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` from the repository root; fails the test on a non-zero exit."""
    command = [sys.executable, "-m", module, *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=True)


def test_attention_benchmark_prints_a_row_per_variant() -> None:
    result = run_benchmark(
        "benchmarks.attention", "--lengths", "32", "--d-model", "64", "--heads", "4", "--reps", "1", "--tokens", "64", timeout=120
    )
    lines = result.stdout.splitlines()
    table = lines[lines.index("T=32, batch 2") + 2 :]
    assert [line.split()[0] for line in table][:2] == ["mha", "damcha"]
    assert len(table) == 11 + 2 * 5  # MHA, DAMCHA's rows, and each cross-head baseline fused and explicit
    assert table[0].split()[2] == "1.00"  # MHA against itself
    assert "flash_attention_for_cpu" in table[1] and table[-1].endswith("explicit")


def test_attention_benchmark_keeps_only_the_rows_asked_for() -> None:
    result = run_benchmark(
        "benchmarks.attention",
        *("--lengths", "32", "--d-model", "64", "--heads", "4", "--reps", "1", "--tokens", "64", "--only", "tha", "moa"),
        timeout=120,
    )
    lines = result.stdout.splitlines()
    table = lines[lines.index("T=32, batch 2") + 2 :]
    assert [line[:30].strip() for line in table] == ["mha", "tha", "explicit tha", "moa", "explicit moa"]
    assert all("flash_attention_for_cpu" in line for line in (table[1], table[3]))
    assert table[2].endswith("explicit") and table[4].endswith("explicit")


def test_causal_attention_benchmark_compares_chunks_and_states_its_targets() -> None:
    result = run_benchmark(
        "benchmarks.attention",
        "--causal",
        "--lengths",
        "32",
        "--d-model",
        "64",
        "--heads",
        "4",
        "--reps",
        "1",
        "--tokens",
        "64",
        timeout=120,
    )
    lines = result.stdout.splitlines()
    start = lines.index("T=32, batch 2") + 2
    names = [line[:30].strip() for line in lines[start : start + 9]]
    assert names == [
        "mha",
        "damcha r16 g2",
        "damcha r16 g2 mahalanobis",
        "damcha r16 g2 rowsum",
        "damcha full g2 rowsum",
        "damcha r16 g2 chunk 1",
        "damcha r16 g2 rowsum chunk 1",
        "damcha full g2 rowsum chunk 1",
        "explicit damcha r16 g2",
    ]
    baselines = [line[:30].strip() for line in lines[start + 9 : start + 19]]
    assert baselines == [row for name in ("tha", "dcmha", "colmha", "mma", "moa") for row in (name, f"explicit {name}")]
    verdicts = lines[start + 19 :]
    assert len(verdicts) == 3 and all(line.endswith((": met", ": MISSED")) for line in verdicts[:2])
    assert "explicit-score form" in verdicts[2]


def test_train_step_benchmark_runs_the_decoder_rows() -> None:
    from benchmarks.train_step import CAUSAL_VARIANTS, VARIANTS

    result = run_benchmark("benchmarks.train_step", "--causal", *TINY_TRAIN_STEP, timeout=300)
    assert "DecoderLM" in result.stdout.splitlines()[0]
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("T  variant"))
    rows = lines[header + 1 : header + 1 + len(VARIANTS) + len(CAUSAL_VARIANTS)]
    assert [line[8:40].strip() for line in rows] == [*VARIANTS, *CAUSAL_VARIANTS]
    assert all(line.endswith("ok") for line in rows)
    assert any(line.startswith("damcha full g2 stack rowsum: worst step time") for line in lines)


def test_train_step_benchmark_checks_and_times_every_variant() -> None:
    from benchmarks.train_step import VARIANTS

    result = run_benchmark("benchmarks.train_step", *TINY_TRAIN_STEP, timeout=300)  # exit 1: a FlashAttention fallback
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("T  variant"))
    rows = lines[header + 1 : header + 1 + len(VARIANTS)]
    assert [line[8:40].strip() for line in rows] == list(VARIANTS)
    assert rows[0].split()[3] == "1.00" and all(line.endswith("ok") for line in rows)
    assert "worst step time" in lines[header + 1 + len(VARIANTS)]


def test_train_step_benchmark_skips_an_explicit_form_that_cannot_fit() -> None:
    result = run_benchmark(
        "benchmarks.train_step",
        "--lengths",
        "64",
        "--d-model",
        "32",
        "--heads",
        "4",
        "--layers",
        "2",
        "--tokens",
        "64",
        "--reps",
        "1",
        "--explicit-limit-gb",
        "0.00001",
        timeout=300,
    )
    assert "explicit damcha r16 g2 stack" in result.stdout and "skipped: explicit scores need > 1e-05 GiB" in result.stdout


def test_store_scale_benchmark_counts_rates_errors_and_consistency() -> None:
    result = run_benchmark("benchmarks.store_scale", "--workers", "1", "2", "--seconds", "1", "--no-postgres", timeout=300)
    rows = [fields for fields in map(str.split, result.stdout.splitlines()) if fields[:1] == ["sqlite"] and fields[1].isdigit()]
    assert [row[1] for row in rows] == ["1", "2"]
    assert all(float(row[2]) > 0 and row[5] == "True" for row in rows)


def test_infeasible_benchmark_prints_told_and_untold_for_each_sampler() -> None:
    from benchmarks.infeasible import SAMPLERS

    result = run_benchmark("benchmarks.infeasible", "--trials", "16", "--seeds", "1", timeout=120)
    rows = result.stdout.splitlines()[2:]
    assert [row[:24].strip() for row in rows] == [name for name in SAMPLERS for _ in range(2)]
    assert [row.split()[-3] for row in rows] == ["no", "yes"] * len(SAMPLERS)


def test_resolution_reads_a_finished_study_and_states_both_criteria(smoke_run: dict) -> None:
    from tests.conftest import SMOKE_STUDY

    result = run_benchmark("benchmarks.resolution", SMOKE_STUDY, "--storage", smoke_run["url"], timeout=120)
    lines = result.stdout.splitlines()
    assert lines[0].startswith("verdict: ")
    assert any(line.startswith("(a) the verdict's 95% half-width") for line in lines)
    (best,) = [line for line in lines if line.startswith("  best: ")]
    assert re.search(r"\((t-interval over \d+ seeds|Wilson, one run on 64 examples)\)$", best)  # smoke: 64 validation examples
    assert lines[-1].split(":")[0].strip() in ("met", "NOT met")


def test_resolution_gives_seeds_that_agree_exactly_the_wilson_interval_of_their_validation_set() -> None:
    """A t-interval is undefined when every seed scores the same (recall_heads' MHA: 99.95% three
    times); the validation set's own sampling error is what is left, not an interval of NaNs."""
    from benchmarks.resolution import interval, wilson_interval

    agreeing = pd.Series({"seeds": 3, "mean": 0.9995, "ci_low": float("nan"), "ci_high": float("nan")})
    low, high, how = interval(agreeing, 2000)
    assert (low, high) == wilson_interval(0.9995, 2000) and low < 0.9995 < high
    assert how == "Wilson on 2000 examples: its 3 seeds agree exactly"
    varying = pd.Series({"seeds": 3, "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6})
    assert interval(varying, 2000) == (0.4, 0.6, "t-interval over 3 seeds")


def test_first_trials_trains_a_preset_s_first_trials_family_by_family() -> None:
    arguments = ("lra_sharing", "--preset", "smoke", "--trials", "3", "--steps", "10")
    result = run_benchmark("benchmarks.first_trials", *arguments, timeout=300)
    rows = [line for line in result.stdout.splitlines() if line[:3].strip().isdigit()]
    assert [row.split()[1] for row in rows] == ["MHA", "DAMCHA", "DAMCHA"]  # the families take turns, one report each
    assert all("FAILED" not in row for row in rows)


def test_padded_attention_names_the_kernels_of_each_call() -> None:
    result = run_benchmark("benchmarks.padded_attention", "--lengths", "32", "--tokens", "128", "--reps", "1", timeout=120)
    rows = [line.split() for line in result.stdout.splitlines()[2:]]
    calls = [(profile, call) for profile in ("bucketed", "uneven") for call in ("unpadded", "masked")]
    assert [(row[1], row[3]) for row in rows] == calls
    assert all(row[-1] == "flash_attention_for_cpu,flash_attention_for_cpu_backward" for row in rows)  # no varlen on CPUs


@pytest.mark.parametrize(
    ("module", "argv", "words"),
    [
        ("attention", ["--reps", "0"], "argument --reps: 0 must be >= 1"),
        ("attention", ["--tokens", "-5"], "argument --tokens: -5 must be >= 1"),
        ("padded_attention", ["--lengths", "512", "0"], "argument --lengths: 0 must be >= 1"),
        ("train_step", ["--explicit-limit-gb", "nan"], "argument --explicit-limit-gb: nan must be a number above 0"),
        ("store_scale", ["--seconds", "0"], "argument --seconds: 0.0 must be a number above 0"),
        ("infeasible", ["--seeds", "0"], "argument --seeds: 0 must be >= 1"),
        ("first_trials", ["lra_sharing", "--trials", "0"], "argument --trials: 0 must be >= 1"),
        ("warmup", ["--warmups", "-1"], "argument --warmups: -1 must be >= 0"),
        ("first_trials", ["lra_sharin"], "unknown study 'lra_sharin': did you mean 'lra_sharing'?"),
        ("resolution", ["plain", "--storage", "sqlite:////nonexistent/store.db"], "there is no SQLite store at"),
    ],
)
def test_every_benchmark_checks_its_counts_before_any_work(
    module: str, argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A count of 0 or less, or a duration that is none, is refused by the command line (exit 2), named."""
    import importlib

    with pytest.raises(SystemExit) as exited:
        importlib.import_module(f"benchmarks.{module}").main(argv)
    error = capsys.readouterr().err
    assert exited.value.code == 2 and words in error and f"usage: python -m benchmarks.{module}" in error


def test_the_wall_time_benchmark_reads_the_search_s_and_the_repeats_progress_lines() -> None:
    """The repeats' line ends with its pace after the ETA; an end-anchored pattern once read the search's lines alone."""
    from benchmarks.wall_time import _PROGRESS

    lines = [
        "trials 3/12 done · 2 running · best val acc 0.412 · 01:02 elapsed · ETA 03:10",
        "seed repeats 4/24 done · 2 running · 14:02 elapsed · ETA 12:40 from the search's trial times",
        "seed repeats 9/24 done · 2 running · 19:40 elapsed · ETA 21:05 at 2.4x the search's trial times",
    ]
    assert [_PROGRESS.search(line).groups() for line in lines] == [
        ("01", "02", "03", "10"),
        ("14", "02", "12", "40"),
        ("19", "40", "21", "05"),
    ]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["nosuch"], "unknown study 'nosuch'"),
        (["lra_sharin"], "did you mean 'lra_sharing'?"),
        (["lra_sharing", "--preset", "bogus"], "unknown preset 'bogus'"),
    ],
)
def test_the_wall_time_benchmark_refuses_an_unknown_name_before_any_run(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.wall_time import main

    assert main(argv) == 2  # not 1, its code for a missed target
    assert words in capsys.readouterr().err


@pytest.mark.drill
def test_a_signal_to_the_wall_time_benchmark_stops_its_run_and_waits_for_it() -> None:
    """SIGTERM to the benchmark reaches the run it started, which stops as it would alone; the benchmark waits for it
    before its temporary store goes, and exits with the run's code."""
    from tests.processes import descendants, kill_tree, wait_for_training_worker

    benchmark = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.wall_time", "lra_sharing", "--preset", "smoke"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for_training_worker(benchmark, timeout=180)
        runs = [pid for pid, command in descendants(benchmark.pid) if "studies.run" in command]
        assert len(runs) == 1
        benchmark.send_signal(signal.SIGTERM)
        output, _ = benchmark.communicate(timeout=120)
    finally:
        if benchmark.poll() is None:
            kill_tree(benchmark)
    assert benchmark.returncode == 143, output[-3000:]
    assert "Traceback" not in output and "the run exited 143" in output
    assert not Path(f"/proc/{runs[0]}").exists()  # the run ended before the benchmark did
