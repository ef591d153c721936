"""A password given in a storage URL never leaves it: not in output, files, the store or Ray's logs."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
from sqlalchemy.engine import make_url

from studies.catalogue import LRA_SHARING
from studies.engine.options import RunOptions, check_options
from studies.run import main

PASSWORD = "Sekr3t-9d1e"  # in the URL's user part
QUERY_PASSWORD = "Qu3ry-5b7a"  # in a password= query parameter


def _files_holding(root: Path, secrets: tuple[str, ...]) -> list[str]:
    """Every file under ``root`` whose bytes hold one of ``secrets``."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                data = path.read_bytes()
            except OSError:  # a socket or a file that went away
                continue
            found += [f"{path}: {secret}" for secret in secrets if secret.encode() in data]
    return found


def test_a_study_on_a_password_protected_store_writes_the_password_nowhere(
    postgres_url: str, local_ray, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd
) -> None:
    """The password on the command line, the hardest case: ``env:NAME`` resolves to the same URL before the run
    (``test_a_url_from_the_environment_is_the_one_a_run_opens``), and its command records the name alone."""
    # The throw-away server trusts 127.0.0.1, so it accepts any password: what matters is where the URL's travels.
    url = make_url(postgres_url).set(password=PASSWORD, query={"password": QUERY_PASSWORD}).render_as_string(hide_password=False)
    monkeypatch.chdir(tmp_path)
    argv = [
        "lra_sharing",
        "--preset",
        "smoke",
        "--repeat-seeds",
        "0",
        "--fix",
        "num_heads=4",
        "--storage",
        url,
        "--data-cache",
        str(tmp_path / "data"),
    ]

    assert main(argv) == 0

    output = capfd.readouterr()
    secrets = (PASSWORD, QUERY_PASSWORD)
    assert not [s for s in secrets if s in output.out + output.err]
    assert "password=***" in output.out  # the summary names the store, masked
    assert not _files_holding(tmp_path, secrets)  # the report, Ray Tune's experiment state, the data cache
    session = Path(local_ray._private.worker._global_node.get_session_dir_path())
    assert not _files_holding(session, secrets)  # Ray's own logs of the trials
    for summary in optuna.get_all_study_summaries(postgres_url):
        study = optuna.load_study(study_name=summary.study_name, storage=postgres_url)
        recorded = json.dumps([study.user_attrs, [t.user_attrs for t in study.trials]], default=str)
        assert not [s for s in secrets if s in recorded]
    reports = list(tmp_path.glob("runs/reports/*.html"))
    assert reports and all("password=***" in page.read_text() for page in reports)
    loose = [str(path) for path in (tmp_path / "runs").rglob("*") if path.lstat().st_mode & 0o077]
    assert not loose  # reports and Ray Tune's files: their owner's alone


def test_a_url_from_the_environment_is_the_one_a_run_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"postgresql+psycopg://bob:{PASSWORD}@127.0.0.1:5432/optuna?password={QUERY_PASSWORD}"
    monkeypatch.setenv("DAMCHA_SECRET_URL", url)
    options = RunOptions(storage="env:DAMCHA_SECRET_URL")
    assert check_options(LRA_SHARING, options, local_resources=False).url == url
    assert PASSWORD not in options.command_line("lra_sharing") and "env:DAMCHA_SECRET_URL" in options.command_line("lra_sharing")
