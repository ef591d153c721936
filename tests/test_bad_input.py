"""Bad input, every command: exit code, one sentence naming the problem, nothing written.

Each case runs a command line in an empty working directory (holding only the files the
case sets up) and compares the directory tree before and after, byte for byte.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
import torch

import reports.__main__ as reports_cli
from storage import store_tag
from studies.run import main as run_main

ROOT = Path(__file__).resolve().parents[1]
SECRET = "Pw-7c4f9e"  # must never appear in any message


def _tree(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` with a digest of its bytes (folders: '/', pipes: '|', never read)."""
    return {
        str(path.relative_to(root)): "/"
        if path.is_dir()
        else "|"
        if path.is_fifo()
        else hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
    }


def _valid_store(root: Path) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.create_study(study_name="plain", storage=f"sqlite:///{root / 'store.db'}")


def _truncated_store(root: Path) -> None:
    _valid_store(root)
    data = (root / "store.db").read_bytes()
    (root / "store.db").write_bytes(data[: len(data) // 3])


def _corrupted_store(root: Path) -> None:
    _valid_store(root)
    data = bytearray((root / "store.db").read_bytes())
    data[4096:8192] = os.urandom(4096)  # the second page: a table's b-tree
    (root / "store.db").write_bytes(bytes(data))


def _not_a_store(root: Path) -> None:
    (root / "store.db").write_text("name,value\nnot,sqlite\n")


def _another_program_s_database(root: Path) -> None:
    with contextlib.closing(sqlite3.connect(root / "store.db")) as connection:
        connection.execute("CREATE TABLE expenses (item TEXT, amount REAL)")
        connection.commit()


def _a_file(name: str) -> Callable[[Path], None]:
    return lambda root: (root / name).write_text("a file\n")


def _a_folder(name: str) -> Callable[[Path], None]:
    return lambda root: (root / name).mkdir()


STORE = "sqlite:///store.db"
CPUS = os.cpu_count() or 1

# (id, command, arguments, set-up in the working directory, exit code, message pattern)
# --fix values that name a study of 225 bytes, within a folder name's 255 with --fresh's 22 more.
LONG_FIX = (
    "generator_width=128",
    "metric_chunk=256",
    "metric_form=bilinear",
    "mlp_width=1024",
    "norm=post",
    "num_layers=4",
    "pooling=mean",
    "weight_decay=0.0123456789",
    "d_model=64",
    "num_heads=4",
    "sharing=stack",
    "metric_rank=16",
    "generator_depth=1",
)

CASES = [
    ("preset-empty", "run", ["lra_sharing", "--preset", ""], None, 2, r"unknown preset ''.*available: full, quick, smoke"),
    ("seed-negative", "run", ["lra_sharing", "--seed", "-1"], None, 2, r"argument --seed: -1 must be >= 0"),
    (
        "memory-nan",
        "run",
        ["lra_sharing", "--trial-memory", "nan"],
        None,
        2,
        r"--trial-memory must be a number of GiB of at least 0.000977 \(1 MiB\), got nan",
    ),
    (
        "memory-inf",
        "run",
        ["lra_sharing", "--trial-memory", "inf"],
        None,
        2,
        r"--trial-memory must be a number of GiB of at least 0.000977 \(1 MiB\), got inf",
    ),
    ("cpus-nan", "run", ["lra_sharing", "--cpus-per-trial", "nan"], None, 2, r"--cpus-per-trial must be a number >= 0.0001"),
    # below Ray's precision a trial's resources would round to nothing, and nothing would limit the trials at once
    ("cpus-below-ray-s-precision", "run", ["lra_sharing", "--cpus-per-trial", "1e-9"], None, 2, r"Ray counts resources to"),
    ("gpus-below-ray-s-precision", "run", ["lra_sharing", "--gpus-per-trial", "1e-5"], None, 2, r"Ray counts resources to"),
    # the seed layout's bounds: a sampler's seed, and trial and repeat seeds that never meet another run's
    # one knob fixed twice: which value would hold is not the user's to guess
    (
        "fix-twice",
        "run",
        ["lra_sharing", "--fix", "num_heads=4", "--fix", "num_heads=2"],
        None,
        2,
        r"each knob once, got num_heads: 4, 2",
    ),
    ("fix-twice-same", "run", ["lra_sharing", "--fix", "d_model=64", "--fix", "d_model=64"], None, 2, r"each knob once"),
    # a combination the model refuses, of fixed values alone: before anything is written
    ("fix-causal-with-cls-pooling", "run", ["lra_sharing", "--fix", "classifier_causal=True"], None, 2, r"needs pooling='mean'"),
    ("seed-past-2-32", "run", ["lra_sharing", "--seed", str(2**32)], None, 2, r"--seed must be in 0\.\.4294967295"),
    ("seed-2-70", "run", ["lra_sharing", "--seed", str(2**70)], None, 2, r"--seed must be in 0\.\.4294967295"),
    ("trials-past-the-seed-layout", "run", ["lra_sharing", "--trials", "10001"], None, 2, r"--trials must be at most 10000"),
    (
        "store-uri-read-only",
        "run",
        ["lra_sharing", "--storage", "sqlite:///file:store.db?mode=ro&uri=true"],
        None,
        2,
        r"opens the store read-only \(mode=ro\): a study writes its trials there",
    ),
    (
        "store-uri-immutable",
        "run",
        ["lra_sharing", "--storage", "sqlite:///file:store.db?immutable=1&uri=true"],
        None,
        2,
        r"opens the store read-only \(immutable=1\)",
    ),
    ("repeats-past-the-seed-layout", "run", ["lra_sharing", "--repeat-seeds", "10000"], None, 2, r"--repeat-seeds must be in"),
    (
        "cpus-more-than-machine",
        "run",
        ["lra_sharing", "--cpus-per-trial", str(CPUS + 2)],
        None,
        2,
        rf"--cpus-per-trial {CPUS + 2} is more than this machine's {CPUS} CPUs",
    ),
    (
        "gpus-more-than-machine",
        "run",
        ["lra_sharing", "--gpus-per-trial", str(torch.cuda.device_count() + 1)],
        None,
        2,
        r"--gpus-per-trial \d+ is more than this machine's \d+ GPUs",
    ),
    (
        "full-preset-beyond-machine",
        "run",
        ["lra_sharing", "--preset", "full"],
        None,
        2,
        r"--(cpus|gpus)-per-trial \d+ is more than this machine's",
    ),
    (
        "port-not-a-number",
        "run",
        ["lra_sharing", "--storage", f"postgresql+psycopg://u:{SECRET}@127.0.0.1:abc/optuna"],
        None,
        2,
        r"storage URL 'postgresql\+psycopg://u:\*\*\*@127.0.0.1:abc/optuna': the port is not a number",
    ),
    (
        "url-without-colon",
        "run",
        ["lra_sharing", "--storage", f"postgresql+psycopg//alice:{SECRET}@db/optuna"],
        None,
        2,
        r"storage URL 'postgresql\+psycopg//alice:\*\*\*@db/optuna' is not a database URL",
    ),
    (
        "password-with-at",
        "run",
        ["lra_sharing", "--storage", f"postgresql+psycopg://alice:{SECRET}@x@127.0.0.1:1/optuna"],
        None,
        2,
        r"'postgresql\+psycopg://alice:\*\*\*@127.0.0.1:1/optuna': the password holds an unencoded '@'; percent-encode it as %40",
    ),
    (
        "password-in-query",
        "run",
        ["lra_sharing", "--storage", f"postgresql+psycopg://alice@127.0.0.1:1/optuna?password={SECRET}"],
        None,
        2,
        r"'postgresql\+psycopg://alice@127.0.0.1:1/optuna\?password=\*\*\*': cannot open the database",
    ),
    (
        "store-truncated",
        "run",
        ["lra_sharing", "--storage", STORE],
        _truncated_store,
        2,
        r"the SQLite store .*store.db is damaged",
    ),
    (
        "store-corrupted",
        "run",
        ["lra_sharing", "--storage", STORE],
        _corrupted_store,
        2,
        r"the SQLite store .*store.db is damaged",
    ),
    ("store-not-sqlite", "run", ["lra_sharing", "--storage", STORE], _not_a_store, 2, r"store.db is not a SQLite database"),
    (
        "store-under-a-file",
        "run",
        ["lra_sharing", "--storage", "sqlite:///blocker/store.db"],
        _a_file("blocker"),
        2,
        r"cannot create the SQLite store .*blocker/store.db: .*blocker is a file, so no folder can be made there",
    ),
    ("report-is-a-folder", "run", ["lra_sharing", "--report", "out"], _a_folder("out"), 2, r"--report out is a folder"),
    (
        "report-under-a-file",
        "run",
        ["lra_sharing", "--report", "blocker/r.html"],
        _a_file("blocker"),
        2,
        r"--report blocker/r.html: .*blocker is a file",
    ),
    (
        "data-cache-is-a-file",
        "run",
        ["lra_sharing", "--data-cache", "blocker"],
        _a_file("blocker"),
        2,
        r"--data-cache blocker is a file, not a folder",
    ),
    (
        "fix-unknown-knob",
        "run",
        ["lra_sharing", "--fix", "metric_rnk=4"],
        None,
        2,
        r"unknown knob 'metric_rnk'.*did you mean 'metric_rank'",
    ),
    # A knob that exists in none of the study's families (lra_sharing trains no MoA, DCMHA or mixed MHA).
    (
        "fix-knob-of-no-family",
        "run",
        ["lra_sharing", "--fix", "expert_factor=4"],
        None,
        2,
        r"knob 'expert_factor' applies to none of study 'lra_sharing''s families .*attention is one of moa; drop it",
    ),
    (
        "fix-knob-of-no-family-among-others",
        "run",
        ["lra_sharing", "--fix", "num_layers=2", "--fix", "router_rank=2"],
        None,
        2,
        r"knob 'router_rank' applies to none of study 'lra_sharing''s families",
    ),
    (
        "fix-unknown-knob-offers-the-study-s-knobs",
        "run",
        ["lra_sharing", "--fix", "expert_factr=4"],
        None,
        2,
        r"unknown knob 'expert_factr': available: attention, classifier_causal, (?!.*expert_factor)",
    ),
    # A study name longer than a folder name may be (Ray Tune names a folder after it), however it grows.
    (
        "name-too-long-by-fix",
        "run",
        ["lra_sharing", *(arg for value in ("classifier_causal=False", *LONG_FIX) for arg in ("--fix", value))],
        None,
        2,
        r"make its name 249 bytes long .*a folder name holds 255 bytes and --fresh adds 22: fix fewer knobs",
    ),
    (
        "name-too-long-by-training",
        "run",
        ["lra_sharing", *(arg for value in LONG_FIX for arg in ("--fix", value)), "--precision", "bf16", "--compile"],
        None,
        2,
        r"make its name 253 bytes long \(lra_sharing-quick-v6-compile=True",
    ),
    # A memory budget too small to be one (Ray divides a node's memory by it).
    *(
        (f"trial-memory-{value}", "run", ["lra_sharing", "--trial-memory", value], None, 2, r"--trial-memory must be .* at least")
        for value in ("1e-10", "0", "-1")
    ),
    # Query arguments a store URL's driver cannot read, or would ignore: refused before any store is written.
    *(
        (f"store-query-{name}", "run", ["lra_sharing", "--storage", url], None, 2, pattern)
        for name, url, pattern in (
            ("bad-timeout", "sqlite:///runs/new.db?timeout=abc", r"query arguments \(timeout\).*could not convert string"),
            ("bad-flag", "sqlite:///runs/new.db?check_same_thread=maybe", r"\(check_same_thread\).*not true/false"),
            ("ignored", "sqlite:///runs/new.db?foo=1", r"\(foo\).*'foo' are not accepted by the pysqlite driver"),
            ("postgresql", "postgresql+psycopg://u:secret@127.0.0.1:1/d?bogus=1", r"u:\*\*\*@.*invalid connection option"),
            (
                "postgresql-timeout",
                "postgresql+psycopg://u:secret@127.0.0.1:1/d?connect_timeout=abc",
                r"\(connect_timeout\).*invalid integer value 'abc' for connection option 'connect_timeout'",
            ),
        )
    ),
    (
        "reports-missing-store",
        "reports",
        ["x", "--storage", "sqlite:///typo/dir/x.db"],
        None,
        2,
        r"there is no SQLite store at .*typo/dir/x.db",
    ),
    # Another program's SQLite database: a run leaves it as it is, never adds Optuna's tables to it.
    (
        "run-on-another-program-s-database",
        "run",
        ["lra_sharing", "--storage", STORE],
        _another_program_s_database,
        2,
        r"store.db holds another program's tables \(expenses\), not an Optuna store; it was left as it is",
    ),
    # Paths no write could finish on: a name past the file system's 255 bytes, bytes that are not UTF-8
    # (the store records paths as text); checked for every path a command takes.
    (
        "run-report-name-too-long",
        "run",
        ["lra_sharing", "--report", "r" * 300 + ".html"],
        None,
        2,
        r"--report: the name r+\.\.\. is 305 bytes",
    ),
    (
        "run-cache-name-too-long",
        "run",
        ["lra_sharing", "--data-cache", "c/" + "c" * 256],
        None,
        2,
        r"--data-cache: the name c+\.\.\. is 256 bytes",
    ),
    (
        "reports-output-name-too-long",
        "reports",
        ["plain", "--storage", STORE, "-o", "o" * 256],
        _valid_store,
        2,
        r"-o: the name o+\.\.\. is 256",
    ),
    (
        "run-cache-not-utf-8",
        "run",
        ["lra_sharing", "--data-cache", "cache\udcff"],
        None,
        2,
        r"--data-cache b'cache\\xff' is not valid UTF-8",
    ),
    (
        "run-report-not-utf-8",
        "run",
        ["lra_sharing", "--report", "r\udcff.html"],
        None,
        2,
        r"--report b'r\\xff.html' is not valid UTF-8",
    ),
    (
        "run-store-not-utf-8",
        "run",
        ["lra_sharing", "--storage", "sqlite:///s\udcff.db"],
        None,
        2,
        r"storage URL .* is not valid UTF-8",
    ),
    ("reports-store-not-utf-8", "reports", ["list", "--storage", "sqlite:///s\udcff.db"], None, 2, r"is not valid UTF-8"),
    # A store the reports cannot use: a database without Optuna's tables, a server that refuses.
    (
        "reports-database-without-a-store",
        "reports",
        ["plain", "--storage", STORE],
        _another_program_s_database,
        2,
        r"store.db': the database holds no Optuna store \(no study tables\)",
    ),
    (
        "reports-postgresql-refusing",
        "reports",
        ["plain", "--storage", "postgresql+psycopg://alice:secret@127.0.0.1:1/optuna"],
        None,
        2,
        r"alice:\*\*\*@127.0.0.1:1/optuna': cannot open the database: .*Connection refused",
    ),
    ("reports-damaged-store", "reports", ["plain", "--storage", STORE], _corrupted_store, 2, r"store.db is damaged"),
    (
        "reports-output-is-a-folder",
        "reports",
        ["plain", "--storage", STORE, "-o", "out"],
        lambda root: (_valid_store(root), _a_folder("out")(root)),
        2,
        r"-o out is a folder",
    ),
    (
        "reports-png-is-a-file",
        "reports",
        ["plain", "--storage", STORE, "--png", "blocker"],
        lambda root: (_valid_store(root), _a_file("blocker")(root)),
        2,
        r"--png blocker is a file, not a folder",
    ),
    # An output that is the store (or one of its files), however its path is spelt, or no regular file.
    (
        "reports-output-is-the-store",
        "reports",
        ["plain", "--storage", STORE, "-o", "store.db"],
        _valid_store,
        2,
        r"-o store.db is the store's file .*store.db: writing there would destroy the store",
    ),
    (
        "reports-output-is-the-store-by-another-path",
        "reports",
        ["plain", "--storage", STORE, "-o", "sub/../store.db"],
        lambda root: (_valid_store(root), _a_folder("sub")(root)),
        2,
        r"is the store's file .*store.db: writing there would destroy the store",
    ),
    (
        "reports-output-is-the-store-s-log",
        "reports",
        ["plain", "--storage", STORE, "-o", "store.db-wal"],
        _valid_store,
        2,
        r"-o store.db-wal is the store's file .*store.db-wal",
    ),
    (
        "reports-output-links-to-the-store",
        "reports",
        ["plain", "--storage", STORE, "-o", "link.html"],
        lambda root: (_valid_store(root), (root / "link.html").symlink_to(root / "store.db")),
        2,
        r"-o link.html is not a regular file",
    ),
    (
        "reports-output-is-a-pipe",
        "reports",
        ["plain", "--storage", STORE, "-o", "pipe"],
        lambda root: (_valid_store(root), os.mkfifo(root / "pipe")),
        2,
        r"-o pipe is not a regular file",
    ),
    (
        "run-report-is-the-store",
        "run",
        ["lra_sharing", "--preset", "smoke", "--storage", STORE, "--report", "./store.db"],
        _valid_store,
        2,
        r"--report store.db is the store's file .*store.db: writing there would destroy the store",
    ),
    (
        "reports-unknown-study",
        "reports",
        ["plian", "--storage", STORE],
        _valid_store,
        2,
        r"unknown study 'plian'.*did you mean 'plain'",
    ),
]


def _run(command: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    entry = run_main if command == "run" else reports_cli.main
    try:
        code = entry(argv)
    except SystemExit as exited:
        code = exited.code
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize(("command", "argv", "setup", "code", "message"), [case[1:] for case in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_with_one_sentence_and_writes_nothing(
    command: str, argv: list[str], setup, code: int, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    if "gpus" in " ".join(argv) or "full" in argv:
        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DAMCHA_STORAGE_URL", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if setup is not None:
        setup(tmp_path)
    before = _tree(tmp_path)

    got, output = _run(command, argv, capsys)

    assert got == code, output
    assert re.search(message, output), output
    assert "Traceback" not in output and SECRET not in output
    assert _tree(tmp_path) == before  # nothing created, nothing changed, no partial file


def test_reports_leave_a_plain_optuna_store_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A read-only command never creates, migrates or reconfigures a store (journal mode included)."""
    monkeypatch.chdir(tmp_path)
    _valid_store(tmp_path)
    study = optuna.load_study(study_name="plain", storage=STORE)
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1) ** 2, n_trials=3)
    before = hashlib.sha256((tmp_path / "store.db").read_bytes()).hexdigest()
    with sqlite3.connect(tmp_path / "store.db") as connection:
        (mode,) = connection.execute("PRAGMA journal_mode").fetchone()

    assert reports_cli.main(["plain", "--storage", STORE, "-o", "r.html"]) == 0

    assert hashlib.sha256((tmp_path / "store.db").read_bytes()).hexdigest() == before
    with sqlite3.connect(tmp_path / "store.db") as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == (mode,) == ("delete",)
    assert not list(tmp_path.glob("store.db-*"))  # no -wal or -shm left beside it


def test_report_names_from_the_store_never_leave_the_output_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    name = "../../escaped/evil"
    optuna.create_study(study_name=name, storage=STORE).optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)

    assert reports_cli.main([name, "--storage", STORE]) == 0

    written = [p for p in tmp_path.rglob("*.html")]
    tag = store_tag(STORE)  # store.db is not the default store: its files carry its tag
    assert [p.relative_to(tmp_path) for p in written] == [Path(f"work/runs/reports/_.._escaped_evil.store-{tag}.html")]
    assert not (tmp_path / "escaped").exists()
    assert oct(written[0].stat().st_mode & 0o777) == "0o600"


def test_reports_show_what_a_plain_optuna_study_has(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A study this product did not create: values, params and curves shown, what is missing said, exit 0."""
    monkeypatch.chdir(tmp_path)

    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", -1, 1)
        for step in range(3):
            trial.report(x * step, step)
        return x**2

    optuna.create_study(study_name="single", storage=STORE).optimize(objective, n_trials=4)
    optuna.create_study(study_name="multi", storage=STORE, directions=["minimize", "maximize"]).optimize(
        lambda t: (t.suggest_int("n", 1, 5), t.suggest_float("y", 0, 1)), n_trials=4
    )
    for name in ("single", "multi"):
        assert reports_cli.main([name, "--storage", STORE, "-o", f"{name}.html"]) == 0, name
        page = (tmp_path / f"{name}.html").read_text()
        assert "not created by DAMCHA Studies" in page
        assert "Traceback" not in capsys.readouterr().err


def _as_nobody(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run a command line as user nobody (root passes every permission check)."""
    environment = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, *argv],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv, to run a command as another user")
    folder = tmp_path_factory.mktemp("unwritable")
    for parent in (folder, *folder.parents):  # user nobody may enter the folders on the way
        if parent == Path(parent.anchor):
            break
        parent.chmod(parent.stat().st_mode | 0o011)
    folder.chmod(0o777)
    return folder


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (
            lambda root: (root / "runs").mkdir() or (root / "runs").chmod(0o755),
            r"cannot create the SQLite store .*runs/optuna.db: .*runs is a folder this user cannot write \(permission denied\)",
        ),
        (
            lambda root: (_valid_store(root), (root / "store.db").chmod(0o644)),
            r"cannot write to the SQLite store .*store.db \(permission denied",
        ),
    ],
    ids=["read-only-runs", "store-not-writable"],
)
def test_stores_this_user_cannot_write_exit_2(setup, message: str, shared_dir: Path) -> None:
    setup(shared_dir)
    storage = STORE if (shared_dir / "store.db").exists() else "sqlite:///runs/optuna.db"
    before = _tree(shared_dir)

    result = _as_nobody(
        [
            "-m",
            "studies.run",
            "lra_sharing",
            "--preset",
            "smoke",
            "--storage",
            storage,
            "--data-cache",
            str(shared_dir / "cache"),
        ],
        shared_dir,
    )

    assert result.returncode == 2, result.stderr
    assert re.search(message, result.stderr) and "Traceback" not in result.stderr, result.stderr
    assert _tree(shared_dir) == before
