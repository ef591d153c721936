"""A SQLite store's files: the database a URL names, the files beside it, and the checks a store passes
before a study opens it (a damaged file, another program's tables, a read-only medium, another
driver through another name)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import urllib.parse
from pathlib import Path

from common.outputs import on_read_only_medium
from storage.database_lock import BUSY, StoreBusyError, held_elsewhere
from storage.urls import StorageURLError, is_true, masked_url, parse_storage_url

SQLITE_SIDECARS = ("-journal", "-wal", "-shm")  # files SQLite keeps beside a database
WRITER_LOCK_SUFFIX = ".writer-lock"  # ``writer_lock.single_writer``'s lock file, beside the database
SQLITE_TIMEOUT_S = 60


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL, every symbolic link resolved; None for other databases.

    A URL may name the file as a path (``sqlite:///runs/s.db``) or, with ``?uri=true``, as a SQLite
    URI (``sqlite:///file:runs/s.db?uri=true``, ``sqlite:///file:///abs/s.db?uri=true``): both give
    the same file, and so the same writer lock and output checks.

    Raises:
        StorageURLError: see ``parse_storage_url``.
    """
    parsed = parse_storage_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    return _sqlite_file(parsed.database, is_true(parsed.query.get("uri"))).resolve()


def sqlite_read_only_flags(url: str) -> list[str]:
    """The flags of a SQLite URI URL (``?uri=true``) that open its file read-only: ``mode=ro``, ``immutable=1``.

    Raises:
        StorageURLError: see ``parse_storage_url``.
    """
    parsed = parse_storage_url(url)
    if parsed.get_backend_name() != "sqlite" or not is_true(parsed.query.get("uri")):
        return []
    flags = []
    if str(parsed.query.get("mode", "")).lower() == "ro":
        flags.append("mode=ro")
    if "immutable" in parsed.query and is_true(parsed.query["immutable"]):
        flags.append("immutable=1")
    return flags


def _sqlite_file(database: str, uri: bool) -> Path:
    """The file a SQLite URL's database part names: a path, or (``uri``) a ``file:`` URI's path."""
    if uri and database.startswith("file:"):
        return Path(urllib.parse.unquote(urllib.parse.urlsplit(database).path))
    return Path(database)


def store_files(url: str) -> list[Path]:
    """The files that make up a SQLite store, every symbolic link resolved: the database, its rollback
    journal, write-ahead log and shared memory, and the writer lock (none for other databases).

    Raises:
        StorageURLError: see ``parse_storage_url``.
    """
    database = sqlite_path(url)
    if database is None:
        return []
    return [database, *(database.with_name(database.name + suffix) for suffix in (*SQLITE_SIDECARS, WRITER_LOCK_SUFFIX))]


OPTUNA_TABLE = "studies"  # a table every Optuna store has


def check_sqlite_store(path: Path, *, writing: bool) -> None:
    """Check a SQLite store's file before anything opens it: it is one, it is whole, and
    (``writing``) it is empty or an Optuna store, and it, its folder or the nearest folder that
    exists can be written.

    Nothing is created or changed: the check only reads (SQLite's ``quick_check``).

    Raises:
        StorageURLError: one sentence naming the file, the fault and the fix.
    """
    try:
        exists = path.exists()
    except OSError as error:  # a folder on the way that this user may not enter
        raise StorageURLError(
            f"cannot reach the SQLite store {path}: {error.strerror}; fix the folders' permissions, "
            "or pass another --storage file"
        ) from None
    if not exists:
        if not writing:
            raise StorageURLError(f"there is no SQLite store at {path}: run a study first, or pass --storage")
        existing = next(folder for folder in path.parents if folder.exists())
        cause = (  # each cause in its own words: the system tells them apart (ENOTDIR, EROFS, EACCES)
            "is a file, so no folder can be made there"
            if not existing.is_dir()
            else "is on a read-only file system"
            if on_read_only_medium(existing)
            else "is a folder this user cannot write (permission denied)"
            if not os.access(existing, os.W_OK | os.X_OK)
            else None
        )
        if cause:
            raise StorageURLError(f"cannot create the SQLite store {path}: {existing} {cause}; pass another --storage file")
        return
    if not path.is_file():
        raise StorageURLError(f"the SQLite store {path} is not a file")
    if writing and (links := path.stat().st_nlink) > 1:  # other names of the file: other logs, another lock
        raise StorageURLError(
            f"the SQLite store {path} has {links} hard links: through another name SQLite would keep another "
            "write-ahead log (and corrupt the store), and a second driver would not meet this one's writer lock; "
            "keep one name (remove the other links), or pass another --storage file"
        )
    if on_read_only_medium(path.parent):
        if writing:
            raise StorageURLError(
                f"the SQLite store {path} is on a read-only file system: a study writes its trials there; copy it to "
                "a writable folder, or pass another --storage file (python -m reports reads it where it is)"
            )
    if writing and held_elsewhere(path):  # before SQLite opens it here, beside another path's logs
        raise StoreBusyError(f"another driver {BUSY.format(masked_url(f'sqlite:///{path}'))}")
    # Only SQLite opens the file: closing any other descriptor of it would drop the locks this
    # process's SQLite connections hold there (POSIX locks), and another process could then
    # checkpoint and delete the write-ahead log under them.
    try:
        # mode=rw never creates the file, and reads a write-ahead log as writers see it (a
        # read-only connection may not, and then reports a healthy store as malformed). On a
        # read-only medium nothing can write: the file is read as it is (``immutable``).
        with contextlib.closing(sqlite3.connect(reading_uri(path), uri=True, timeout=SQLITE_TIMEOUT_S)) as connection:
            (verdict,) = connection.execute("PRAGMA quick_check(1)").fetchone()
            tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as error:
        verdict, tables = str(error), set()
    if verdict == "file is not a database":
        raise StorageURLError(f"{path} is not a SQLite database; pass another --storage file")
    if verdict != "ok":
        raise StorageURLError(
            f"the SQLite store {path} is damaged ({verdict}); it was left as it is: restore it from a backup, "
            "or pass another --storage file"
        )
    if writing and tables and OPTUNA_TABLE not in tables:  # another program's database: its data stays its own
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise StorageURLError(
            f"the SQLite file {path} holds another program's tables ({shown}), not an Optuna store; it was left as it "
            "is: pass a new file, or a store a study wrote"
        )
    if writing and not (os.access(path, os.R_OK | os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)):
        raise StorageURLError(
            f"cannot write to the SQLite store {path} (permission denied on the file or its folder {path.parent}); "
            "fix the permissions, or pass another --storage file"
        )


def reading_uri(path: Path) -> str:
    """A SQLite URI that reads ``path`` without creating it: as writers see it. On a read-only medium,
    where SQLite cannot create a write-ahead log's index: read-only with the log and index that are
    there, or, when the store was closed cleanly (no log left), as an immutable file."""
    quoted = urllib.parse.quote(str(path))
    if not on_read_only_medium(path.parent):
        return f"file:{quoted}?mode=rw"
    return f"file:{quoted}?mode=ro" if Path(f"{path}-wal").exists() else f"file:{quoted}?mode=ro&immutable=1"
