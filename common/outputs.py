"""Where this product writes by default, and how it writes a file so that no reader sees half of it.

Every default location is under ``runs/`` in the working directory; each has its own
option or environment variable (docs/guarantees.md and ``--help`` name them). The default
store, ``runs/optuna.db``, is ``storage``'s own (``storage.urls.STORE_FILE``: storage imports
none of our packages). A leaf module: every package but ``storage`` may import it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

RUNS_DIR = Path("runs")
DATA_CACHE_DIR = RUNS_DIR / "data"  # datasets' Arrow caches
COMPILE_CACHE_DIR = RUNS_DIR / "torch-compile-cache"  # torch.compile's cache, kept between runs
TUNE_DIR = RUNS_DIR / "ray"  # Ray Tune's experiment folders (the store, not these, is the record)
REPORTS_DIR = RUNS_DIR / "reports"  # study reports
COMPILE_CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"
# The user's choice of torch.compile's cache, read before torch is imported (``trainers/__init__`` imports this
# module first): importing ``torch._dynamo`` sets the variable to torch's own default when it is unset, so
# read later it would always seem chosen, and trials would compile into that default instead of COMPILE_CACHE_DIR.
CHOSEN_COMPILE_CACHE = os.environ.get(COMPILE_CACHE_VARIABLE) or None


def write_atomically(path: Path, content: str | bytes) -> Path:
    """Write a temporary file beside ``path``, then rename it: a reader never sees half a
    file, and a failed write leaves nothing behind. The file is its owner's alone (0600).

    Args:
        path: The file to write.
        content: Its whole content: text (UTF-8) or bytes (an image).

    Returns:
        ``path``.

    Raises:
        OSError: the folder cannot be created or written (the temporary file is removed); its
            ``filename`` is ``path``, whichever file the system named.
    """
    partial = None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(content.encode("utf-8") if isinstance(content, str) else content)
        os.replace(partial, path)
    except BaseException as error:
        if partial is not None:
            Path(partial).unlink(missing_ok=True)
        if isinstance(error, OSError):  # a full disk names the temporary file, or no file at all
            raise OSError(error.errno, error.strerror, str(path)) from error
        raise
    return path


CLOSED_PIPE_EXIT = 128 + 13  # as a shell reports a command that SIGPIPE ended


def exit_with(main: Callable[[], int | None]) -> NoReturn:
    """Run a command-line entry point and exit with its code; a reader that closed the pipe early
    (``| head -1``) ends the command quietly, as with any Unix tool, instead of in a traceback."""
    try:
        code = main()
        sys.stdout.flush()  # here, where a closed pipe is caught, not in the interpreter's exit
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more reaches the closed pipe
        sys.exit(CLOSED_PIPE_EXIT)
    sys.exit(code)
