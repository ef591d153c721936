"""What a store's failure says, read from the exception a run met: a full disk under it, or a database
that stopped answering (a server shut down, a lost connection). Mid-run, either ends the run in one
sentence (``studies.run``); the finished trials stay in the store."""

from __future__ import annotations

import errno
import sqlite3

import psycopg
import sqlalchemy

from storage.urls import masked_url, scrubbed

# The errors a database raises when it, not the data sent, failed: SQLAlchemy's wrappers and the drivers'
# own (an error inside Optuna's StorageInternalError, or raised outside its sessions).
_DATABASE_FAILURES = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
    sqlite3.OperationalError,
)


def causes(error: BaseException) -> list[BaseException]:
    """An exception and those it was raised from or while handling, outermost first."""
    chain: list[BaseException] = []
    cause: BaseException | None = error
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    return chain


def first_line(error: BaseException, url: str) -> str:
    """An error's first line, without the URL's secrets."""
    text = str(error).strip()
    return scrubbed(text.splitlines()[0] if text else type(error).__name__, url)


def full_disk(error: BaseException, url: str) -> str | None:
    """What ran out of space, when an exception (or one in its chain of causes) says a disk is full.

    Args:
        error: An exception a run raised: Optuna's ``StorageInternalError`` wraps the database's.
        url: The run's storage URL.

    Returns:
        ``the store <url, masked>`` for SQLite's SQLITE_FULL ("database or disk is full") or
        PostgreSQL's ``disk_full`` (its server's disk); the file an ``ENOSPC`` OSError names, ``""``
        for one that names none; None when no disk is full.
    """
    full = [c for c in causes(error) if _full(c)]
    if not full:
        return None
    if not all(isinstance(c, OSError) for c in full):  # the database said it
        return f"the store {masked_url(url)}"
    named = [str(c.filename) for c in full if c.filename]
    return named[0] if named else ""


def store_or_disk_failed(error: BaseException) -> bool:
    """True when an exception's chain says a disk filled up (``full_disk``) or a database failed
    (``failed_database``): what stops a run, rather than a bug."""
    return any(_full(c) or isinstance(c, _DATABASE_FAILURES) for c in causes(error))


def _full(error: BaseException) -> bool:
    """True for one exception that says a disk is full: SQLite's SQLITE_FULL, PostgreSQL's ``disk_full``, ENOSPC."""
    return (
        isinstance(error, psycopg.errors.DiskFull)
        or getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
        or (isinstance(error, OSError) and error.errno == errno.ENOSPC)
    )


def failed_database(error: BaseException, url: str) -> str | None:
    """The database's own words, when an exception's chain says the database failed rather than the data
    sent to it (a server shut down or restarted, a connection lost or refused, SQLite's I/O error).

    Args:
        error: An exception a run raised.
        url: The run's storage URL, whose secrets the words never show.

    Returns:
        The innermost such error's first line, or None when no database failed.
    """
    failures = [c for c in causes(error) if isinstance(c, _DATABASE_FAILURES)]
    return first_line(failures[-1], url) if failures else None
