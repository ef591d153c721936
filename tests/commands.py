"""Command lines the tests run as a user would."""

from __future__ import annotations

import sys

import pytest


def smoke_study_command(*options: str) -> list[str]:
    """``python -m studies.run lra_sharing --preset smoke --repeat-seeds 0`` with ``options``, in this interpreter.

    No seed repeats: the tests that run it are about the search (``smoke_run`` covers repeats).
    """
    return [sys.executable, "-m", "studies.run", "lra_sharing", "--preset", "smoke", "--repeat-seeds", "0", *options]


# Run ``python -m MODULE ...`` with Ctrl-C's default handling, as in a terminal: a command
# started in the background of a non-interactive shell (a CI script, say) inherits SIGINT
# ignored, and Python then never raises KeyboardInterrupt.
_WITH_CTRL_C = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv = sys.argv[1:]; runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)


def with_ctrl_c(command: list[str]) -> list[str]:
    """``command`` (``[python, "-m", MODULE, *args]``) with SIGINT raising KeyboardInterrupt whatever it inherited."""
    python, flag, *rest = command
    if flag != "-m":
        raise ValueError(f"expected a 'python -m MODULE' command, got {command[:3]}")
    return [python, "-c", _WITH_CTRL_C, *rest]


def exit_code_and_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``python -m studies.run ARGV`` in this process, for a run that exits: its exit code and what it wrote to stderr."""
    from studies.run import main  # the command, imported when a test runs it

    with pytest.raises(SystemExit) as exited:
        main(argv)
    return exited.value.code, capsys.readouterr().err
