"""Bad input exits with code 2, a message naming the problem, and nothing written."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from studies.catalogue import STUDIES, SUITES, get_study
from studies.run import build_parser, main
from tests.commands import exit_code_and_error

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lra_sharng"], "unknown study 'lra_sharng'.*did you mean 'lra_sharing'"),
        (["lra_sharing", "--preset", "smok"], "unknown preset 'smok'.*did you mean 'smoke'"),
        (["lra_sharing", "--trials", "0"], "argument --trials: 0 must be >= 1"),
        (["lra_sharing", "--preset", "smoke", "--trials", "1"], "--trials 1 leaves some of the study's 3 families"),
        (["lra_sharing", "--fix", "metric_rnk=4"], "unknown knob 'metric_rnk'.*did you mean 'metric_rank'"),
        (["lra_sharing", "--fix", "metric_rank"], "'metric_rank' is not KNOB=VALUE"),
        (
            ["lra_sharing", "--preset", "smoke", "--fix", "metric_rank=16"],
            r"knob metric_rank=16 is outside the smoke preset's domain: one of 4, 8",
        ),
        (
            ["lra_sharing", "--fix", "metric_form=mahalanobis"],  # the DAMCHA (paper) family is rowsum
            "forbidden combination: metric_form='mahalanobis' is not allowed with metric_mode='rowsum'",
        ),
        (["lra_sharing", "--fix", "attention=mha"], "knob 'attention' is set by study 'lra_sharing' itself"),
        (
            ["lra_sharing", "--fix", "metric_mode=cross"],
            r"'metric_mode' is set .* \(DAMCHA \(paper\): 'rowsum', DAMCHA \(cross\)",
        ),
        (["lra_sharing", "--storage", "not a url"], "storage URL 'not a url' is not a database URL"),
        (["lra_sharing", "--storage", "sqlite://"], "SQLite needs a file"),
        (["lra_sharing", "--cpus-per-trial", "0"], "--cpus-per-trial must be a number >= 0.0001"),
        (["lra_sharing", "--trial-memory", "0"], "--trial-memory must be a number of GiB of at least"),
        (["lra_sharing", "--trial-memory", "1e6"], r"--trial-memory 1000000.0 GiB is more than this machine has \(\d+"),
        ([], "the study name is required"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(argv: list[str], message: str, capsys, tmp_path: Path) -> None:
    code, error = exit_code_and_error(argv, capsys)
    assert code == 2
    assert re.search(message, error), error
    assert list(tmp_path.iterdir()) == []  # no store, no report, no half-written study


def test_list_shows_each_study_and_suite_on_one_line(capsys) -> None:
    assert main(["--list"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == len(STUDIES) + len(SUITES)
    assert [line.split()[0] for line in lines] == ["lra_sharing", "cross_head", "recall_heads", "lm_rank", "lra_suite"]


def test_help_explains_every_option_with_its_default() -> None:
    parser = build_parser()
    text = parser.format_help()
    for action in parser._actions:
        if action.option_strings and action.dest not in ("help", "list"):
            assert action.help and "default" in action.help, action.dest
    for option in (
        "--preset",
        "--trials",
        "--storage",
        "--address",
        "--cpus-per-trial",
        "--gpus-per-trial",
        "--seed",
        "--report",
        "--fresh",
    ):
        assert option in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lra_sharing", "--address", "127.0.0.1:1"], r"cannot reach the Ray cluster at --address 127.0.0.1:1"),
        (["lra_sharing", "--address", "ray://127.0.0.1:1"], r"cannot reach the Ray cluster at --address ray://127.0.0.1:1"),
        # what is no Ray address is refused as such, before anything is written
        (["lra_sharing", "--address", "http://127.0.0.1:8265"], r"is not a Ray address.*a dashboard's, which `ray job submit`"),
        (["lra_sharing", "--address", "not an address"], r"--address not an address is not a Ray address"),
        (["lra_sharing", "--address", ":6379"], r"is not a Ray address"),
        (
            ["lra_sharing", "--storage", "postgresql+psycopg://bob:s3cret@127.0.0.1:1/optuna"],
            r"storage URL 'postgresql\+psycopg://bob:\*\*\*@127.0.0.1:1/optuna': cannot open the database",
        ),
        (["lra_sharing", "--storage", "env:DAMCHA_TEST_UNSET"], "environment variable DAMCHA_TEST_UNSET is not set"),
    ],
)
def test_unreachable_servers_fail_fast_naming_what_was_tried(argv: list[str], message: str, capsys, tmp_path: Path) -> None:
    started = time.monotonic()
    code, error = exit_code_and_error(argv, capsys)
    assert code == 2 and re.search(message, error), error
    assert "s3cret" not in error
    assert time.monotonic() - started < 10
    assert list(tmp_path.iterdir()) == []


def test_precision_and_compile_flags_reach_every_trial_and_name_their_own_study() -> None:
    from studies.engine.options import RunOptions, check_options

    run = check_options(get_study("lra_sharing"), RunOptions(preset="smoke", precision="bf16", compile=True))
    assert run.preset.train.precision == "bf16" and run.preset.train.compile is True
    assert run.train_overrides == {"precision": "bf16", "compile": True}
    same = check_options(get_study("lra_sharing"), RunOptions(preset="smoke", precision="fp32", compile=False))
    assert same.train_overrides == {}  # the preset's own settings: the same study
    assert "--compile, --no-compile" in build_parser().format_help()


def test_another_seed_is_another_study_never_a_resumed_one() -> None:
    """``--seed 1`` on a store holding the seed-0 run must not resume it (its trials trained on other seeds)."""
    from studies.engine.options import RunOptions, check_options

    study = get_study("lra_sharing")
    assert check_options(study, RunOptions(preset="smoke")).study_name == "lra_sharing-smoke-v6"
    assert check_options(study, RunOptions(preset="smoke", seed=0)).study_name == "lra_sharing-smoke-v6"
    assert check_options(study, RunOptions(preset="smoke", seed=1)).study_name == "lra_sharing-smoke-v6-seed=1"
    fixed = check_options(study, RunOptions(preset="smoke", seed=7, fix={"num_heads": 4}))
    assert fixed.study_name == "lra_sharing-smoke-v6-num_heads=4-seed=7"


def test_a_run_says_how_often_its_preset_reaches_the_truth_or_that_it_is_not_measured() -> None:
    from studies.catalogue.reliability import NOT_MEASURED, PLUMBING_CHECK
    from studies.engine.options import RunOptions, check_options
    from studies.engine.optuna_study import reliability_line

    study = get_study("lra_sharing")
    measured = reliability_line(check_options(study, RunOptions()))
    reliability = study.preset("quick").reliability
    right = "{:.0%} [{:.0%}, {:.0%}]".format(*reliability.right)
    assert measured.startswith(f"How sure: replayed {reliability.replays} times") and right in measured
    assert f"skill over no search {reliability.skill[0]:+.2f}" in measured and "always abstaining is right in none" in measured
    assert f"It cannot tell {reliability.cannot_tell}" in measured
    assert "did not measure" not in measured
    assert "a budget those replays did not measure" in reliability_line(check_options(study, RunOptions(trials=30)))
    more_seeds = reliability_line(check_options(study, RunOptions(repeat_seeds=8)))
    assert "repeats 8 fresh seeds where the replays repeated 6" in more_seeds
    assert "not measured for this run" in reliability_line(check_options(study, RunOptions(fix={"num_heads": 4})))
    assert reliability_line(check_options(study, RunOptions(preset="smoke"))) == PLUMBING_CHECK
    assert reliability_line(check_options(get_study("recall_heads"), RunOptions())) == NOT_MEASURED  # no table


def test_a_trial_without_a_gpu_trains_on_the_cpu() -> None:
    from studies.engine.trainable import trial_device

    assert trial_device([], {"CPU": 1.0}).device == "cpu"  # even where CUDA is visible
    assert trial_device([], {"CPU": 2.0, "GPU": 0.0}).cpus == 2
    shared = trial_device(["0"], {"CPU": 4.0, "GPU": 0.5})
    assert (shared.device, shared.gpu_share, shared.cpus) == ("cuda", 0.5, 4)


@pytest.mark.parametrize("recorded", [None, "127.0.0.1:1"], ids=["no-cluster-recorded", "recorded-cluster-gone"])
@pytest.mark.parametrize("how", ["--address", "RAY_ADDRESS"])
def test_address_auto_without_a_live_cluster_fails_within_seconds(
    recorded: str | None, how: str, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``auto`` is the cluster this machine's ``ray start`` recorded: none, or one that no longer answers, fails
    before anything is written (Ray itself would try for minutes)."""
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    if recorded is not None:
        (tmp_path / "ray").mkdir()
        (tmp_path / "ray" / "ray_current_cluster").write_text(recorded)
    argv = ["lra_sharing", "--storage", f"sqlite:///{tmp_path / 'store.db'}"]
    if how == "--address":
        argv += ["--address", "auto"]
    else:
        monkeypatch.setenv("RAY_ADDRESS", "auto")
    started = time.monotonic()
    code, error = exit_code_and_error(argv, capsys)
    assert code == 2 and time.monotonic() - started < 10
    expected = (
        "no Ray cluster was started on this machine" if recorded is None else "cannot reach the Ray cluster at --address auto"
    )
    assert expected in error
    assert not (tmp_path / "store.db").exists()


@pytest.mark.parametrize("form", ["host:port", "ray://host:port"])
def test_an_address_where_something_answers_but_no_driver_joins_fails_within_the_join_check(
    form: str, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The class of a port that answers and then never lets the driver in (another program's server, a head on
    loopback alone, a cluster refusing the token: the drill in ``test_cluster.py``). Ray itself retries such an
    address for minutes; the run is refused, naming it, before its store is written."""
    import socket
    import threading

    from studies.engine import ray_address

    monkeypatch.setattr(ray_address, "JOIN_CHECK_S", 8)  # the check's own bound, shortened for the test
    server = socket.create_server(("", 0))  # every interface: Ray turns 127.0.0.1 into this machine's address
    held: list[socket.socket] = []  # accepted and never answered, as a server of another protocol would

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    port = server.getsockname()[1]
    address = f"127.0.0.1:{port}" if form == "host:port" else f"ray://127.0.0.1:{port}"
    store = tmp_path / "store.db"
    try:
        started = time.monotonic()
        code, error = exit_code_and_error(["lra_sharing", "--address", address, "--storage", f"sqlite:///{store}"], capsys)
    finally:
        server.close()
        for connection in held:
            connection.close()
    assert code == 2 and time.monotonic() - started < 8 + 20  # the check's bound, and Python and Ray starting
    assert re.search(rf"(something answers at|cannot join the Ray cluster at) --address {re.escape(address)}", error), error
    assert "Traceback" not in error and not store.exists()


def test_help_imports_neither_torch_nor_ray_nor_datasets_and_lists_the_exit_codes() -> None:
    """``--help`` answers in about a second: the libraries that take seconds to import wait until the arguments
    are read (it took 6-8 s when the study catalogue came first)."""
    script = (
        "import sys\nfrom studies.run import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as stop:\n    code = stop.code\n"
        "print(sorted(m for m in ('torch', 'ray', 'datasets') if m in sys.modules), code, file=sys.stderr)\n"
    )
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert shown.stderr.strip().splitlines()[-1] == "[] 0", shown.stderr
    codes = shown.stdout[shown.stdout.index("exit codes:") :]
    assert all(re.search(rf"^\s+{code}\s", codes, re.MULTILINE) for code in (0, 1, 2, 3, 130)), codes


def test_a_run_s_report_path_is_given_as_the_reports_tool_takes_it_too() -> None:
    """``-o`` names the page in both tools (``--report`` stays the run's long name)."""
    assert build_parser().parse_args(["lra_sharing", "-o", "page.html"]).report == Path("page.html")
    assert build_parser().parse_args(["lra_sharing", "--report", "page.html"]).report == Path("page.html")
