"""A lock on a SQLite database file itself, whatever path reaches it (a bind mount of the file, say),
so that two drivers never write one store through two names.

The writer lock beside the file (``factory.single_writer``) is found through the path a driver was
given; a bind mount of the file alone shows it in another folder, beside another lock file. This
lock is the file's: an open file description lock (Linux's ``F_OFD_SETLK``) on byte 0 of the
database, a byte SQLite never locks (its locks lie at 1 GiB, from ``PENDING_BYTE`` on), so the two
never meet. Its descriptors are never closed: closing any descriptor of a file drops every POSIX
lock the process holds on it, SQLite's connections' among them; a released one is kept for the
next lock. The kernel releases the lock when the process dies, even by SIGKILL.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
from collections.abc import Iterator
from pathlib import Path

_FLOCK = "hhqqi4x"  # struct flock: l_type, l_whence, l_start, l_len, l_pid, padding (32 bytes on 64-bit Linux)
_SUPPORTED = hasattr(fcntl, "F_OFD_SETLK")  # Linux; elsewhere only the lock beside the file applies
_idle: dict[tuple[int, int], list[int]] = {}  # (device, inode) -> descriptors holding no lock, kept open
_held: set[tuple[int, int]] = set()  # the database files this process holds the lock of


class StoreBusyError(RuntimeError):
    """Another driver is writing to this SQLite store."""


BUSY = (  # what a driver refused for another's store is told, after who holds it
    "is running a study on the SQLite store {}; SQLite is safe with one writing driver: wait for it, use another "
    "--storage file, or use PostgreSQL for several drivers"
)


class DatabaseHeldError(RuntimeError):
    """Another driver holds the database file's lock, through this path or another."""


def _descriptor(path: Path) -> tuple[tuple[int, int], int]:
    """A descriptor of the database file (created empty when missing: an empty file is an empty
    database) with its (device, inode), reusing an idle one.

    Raises:
        OSError: the file cannot be opened for writing (its errno says why: EROFS, EACCES, ...).
    """
    with contextlib.suppress(FileNotFoundError):
        status = path.stat()
        if spare := _idle.get((status.st_dev, status.st_ino)):
            return (status.st_dev, status.st_ino), spare.pop()
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    status = os.fstat(descriptor)
    return (status.st_dev, status.st_ino), descriptor


def _request(kind: int) -> bytes:
    return struct.pack(_FLOCK, kind, os.SEEK_SET, 0, 1, 0)


def held_elsewhere(path: Path) -> bool:
    """Whether a driver other than this process's holds the lock of the database file at ``path``
    (False for a file that does not exist yet, one this process cannot open for writing, which no
    driver of its user writes either, and where the lock is not supported)."""
    if not _SUPPORTED or not path.exists():
        return False
    try:
        key, descriptor = _descriptor(path)
    except OSError:  # a read-only medium, no permission: the store's own checks say which
        return False
    try:
        answer = fcntl.fcntl(descriptor, fcntl.F_OFD_GETLK, _request(fcntl.F_WRLCK))
    finally:
        _idle.setdefault(key, []).append(descriptor)
    return key not in _held and struct.unpack(_FLOCK, answer)[0] != fcntl.F_UNLCK


@contextlib.contextmanager
def database_lock(path: Path) -> Iterator[None]:
    """Hold the lock of the database file at ``path`` (created empty when missing) for the block.

    Raises:
        DatabaseHeldError: another driver holds it (in this process too).
        OSError: the file cannot be opened for writing.
    """
    if not _SUPPORTED:
        yield
        return
    key, descriptor = _descriptor(path)
    try:
        fcntl.fcntl(descriptor, fcntl.F_OFD_SETLK, _request(fcntl.F_WRLCK))
    except OSError as error:
        _idle.setdefault(key, []).append(descriptor)
        if error.errno in (errno.EAGAIN, errno.EACCES):  # how the kernel says "held"
            raise DatabaseHeldError(str(path)) from error
        raise
    _held.add(key)
    try:
        yield
    finally:
        fcntl.fcntl(descriptor, fcntl.F_OFD_SETLK, _request(fcntl.F_UNLCK))
        _held.discard(key)
        _idle.setdefault(key, []).append(descriptor)
