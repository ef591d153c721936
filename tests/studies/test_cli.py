"""Bad input exits with code 2, a message naming the problem, and nothing written."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from storage import single_writer
from studies.catalogue import STUDIES, SUITES, get_study
from studies.run import build_parser, main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def exit_code_and_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return exited.value.code, capsys.readouterr().err


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
    from studies.catalogue.schema import NOT_MEASURED, PLUMBING_CHECK
    from studies.engine.options import RunOptions, check_options
    from studies.engine.records import reliability_line

    study = get_study("lra_sharing")
    measured = reliability_line(check_options(study, RunOptions()))
    assert measured.startswith("How sure: replayed 600 times") and "87% [84%, 89%]" in measured
    assert "did not measure" not in measured
    assert "a budget those replays did not measure" in reliability_line(check_options(study, RunOptions(trials=30)))
    more_seeds = reliability_line(check_options(study, RunOptions(repeat_seeds=8)))
    assert "repeats 8 fresh seeds where the replays repeated 6" in more_seeds
    assert "not measured for this run" in reliability_line(check_options(study, RunOptions(fix={"num_heads": 4})))
    assert reliability_line(check_options(study, RunOptions(preset="smoke"))) == PLUMBING_CHECK
    assert reliability_line(check_options(get_study("cross_head"), RunOptions())) == NOT_MEASURED


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
