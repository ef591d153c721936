"""One writing driver per SQLite store: the writer lock beside the database file, and the lock of the
file itself (``storage.database_lock``) that every other name of it meets."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from storage.database_lock import BUSY, DatabaseHeldError, StoreBusyError, database_lock
from storage.sqlite_files import WRITER_LOCK_SUFFIX, sqlite_path
from storage.urls import StorageURLError, masked_url


@contextlib.contextmanager
def single_writer(url: str) -> Iterator[None]:
    """Hold the store's writer lock for a run: SQLite is safe with one writing driver only.

    A lock file next to the database's real file (``<file>.writer-lock``, symbolic links
    resolved; an advisory ``flock`` that the operating system releases when the process
    dies, even by SIGKILL). Other
    databases need no lock: several drivers may share a PostgreSQL store.

    Raises:
        StoreBusyError: another process holds the lock; names its pid and the fix.
        StorageURLError: the lock file cannot be created.
    """
    database = sqlite_path(url)
    if database is None:
        yield
        return
    # Next to the database's real file: every path to it (symbolic links too) meets the same lock.
    path = database.with_name(database.name + WRITER_LOCK_SUFFIX)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle = open(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+")  # noqa: SIM115 (closed below)
    except OSError as error:
        raise StorageURLError(
            f"cannot create the SQLite store's lock file {path}: {error.strerror}; "
            "fix the folder's permissions, or pass another --storage file"
        ) from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise StoreBusyError(f"another driver (pid {holder}) {BUSY.format(masked_url(url))}") from None
        try:
            try:  # unbuffered: nothing is left to flush (and fail again) when the file closes
                os.ftruncate(handle.fileno(), 0)
                os.pwrite(handle.fileno(), str(os.getpid()).encode(), 0)
            except OSError as error:  # a full disk: the pid needs a block
                raise OSError(error.errno, error.strerror, str(path)) from error
            with _database_file_lock(database, url):
                yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _database_file_lock(database: Path, url: str) -> Iterator[None]:
    """The lock of the database file itself (``storage.database_lock``): a driver given another path to
    the same file (a bind mount of it) meets it, where it finds no lock file beside its path.

    Raises:
        StoreBusyError: another driver holds it.
        StorageURLError: the file cannot be opened for writing (the system's reason).
    """
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(database_lock(database))
        except DatabaseHeldError:
            through = "another driver, through another path to the same file,"
            raise StoreBusyError(f"{through} {BUSY.format(masked_url(url))}") from None
        except OSError as error:
            raise StorageURLError(
                f"cannot open the SQLite store {database} for writing: {error.strerror}; pass another --storage file"
            ) from None
        yield
