"""Where this product writes by default, whether a path can be written (checked before work starts), and how a
file is written so that no reader sees half of it.

Every default location is under ``runs/`` in the working directory; each has its own
option or environment variable (docs/guarantees.md and ``--help`` name them). The default
store, ``runs/optuna.db``, is ``storage``'s own (``storage.urls.STORE_FILE``). A leaf module:
every package may import it.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
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


class OutputPathError(ValueError):
    """A path where nothing can be written; the message names it, the fault and the fix."""


def safe_file_name(name: str) -> str:
    """A file name made from data (a study name): letters, digits, ``. _ = + -`` kept,
    anything else (``/``, ``..`` at the start, spaces) replaced, so it never leaves its folder.
    """
    cleaned = re.sub(r"[^A-Za-z0-9._=+-]", "_", name).lstrip(".")
    return cleaned or "study"


def on_read_only_medium(folder: Path) -> bool:
    """Whether the file system holding ``folder`` is mounted read-only (where a write-ahead log cannot be read as usual,
    and where no permission lets anything be written)."""
    return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)


def _nearest_existing(path: Path) -> Path:
    return next(candidate for candidate in (path, *path.parents) if candidate.exists())


NAME_MAX_BYTES = 255  # a file name's limit (NAME_MAX) on Linux's file systems (ext4, XFS, Btrfs, tmpfs) and macOS


def check_path_text(path: Path, option: str) -> None:
    """Check that ``path`` is text the store and the pages can hold (valid UTF-8) and that each of its
    names fits a file system's limit, so that no write fails on it half-way.

    Raises:
        OutputPathError: naming the option, the fault and the fix.
    """
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise OutputPathError(
            f"{option} {text.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8 (runs record their paths as text): "
            "rename it, or give another path"
        ) from None
    for name in path.parts:
        if len(name.encode()) > NAME_MAX_BYTES:
            raise OutputPathError(
                f"{option}: the name {name[:24]}... is {len(name.encode())} bytes, more than a file name may be "
                f"({NAME_MAX_BYTES}); give a shorter one"
            )


def check_writable_file(path: Path, option: str, keep: Iterable[Path] = ()) -> None:
    """Check that ``path`` can be written (created, with its folders, or replaced), changing nothing,
    and that writing it destroys nothing: it is none of the ``keep`` files (a store's, however
    the path names it: links, ``..``, relative or absolute) and nothing but a regular file.

    Raises:
        OutputPathError: it is a folder, a link, a device or other non-regular file, one of the
            ``keep`` files, or its nearest existing folder is not one this user can write
            (named with ``option``).
    """
    check_path_text(path, option)
    if path.is_dir():
        raise OutputPathError(f"{option} {path} is a folder: give a file path")
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise OutputPathError(
            f"{option} {path} is not a regular file (a link, a device or a pipe): give the path of a new or regular file"
        )
    target = path.resolve()
    for kept in keep:
        if target == kept.resolve() or (path.exists() and kept.exists() and os.path.samefile(path, kept)):
            raise OutputPathError(
                f"{option} {path} is the store's file {kept}: writing there would destroy the store; give another path"
            )
    _check_folder(path.parent, option, path)


def check_writable_dir(path: Path, option: str) -> None:
    """Check that folder ``path`` exists and can be written, or can be created; changes nothing.

    Raises:
        OutputPathError: it is a file, or it (or its nearest existing parent) cannot be written.
    """
    check_path_text(path, option)
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{option} {path} is a file, not a folder")
    _check_folder(path, option, path)


def _check_folder(folder: Path, option: str, named: Path) -> None:
    existing = _nearest_existing(folder.absolute())
    if not existing.is_dir():
        raise OutputPathError(f"{option} {named}: {existing} is a file, so no folder can be made there")
    if on_read_only_medium(existing):  # even for root, whom permissions do not stop
        raise OutputPathError(f"{option} {named}: {existing} is on a read-only file system; choose another path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(f"{option} {named}: this user cannot write in {existing}; choose another path")


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
