"""One factory from a URL to an Optuna storage.

The default is a SQLite file under the working directory, set up for one writing
driver and other readers (optuna-dashboard, reports): write-ahead logging, so readers
don't block the writer, and a generous lock timeout. Any other SQLAlchemy URL that
Optuna supports (PostgreSQL on a cluster) is passed through.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import optuna
import sqlalchemy
from sqlalchemy.engine import URL, make_url

DEFAULT_STORAGE_URL = "sqlite:///runs/optuna.db"
STORAGE_URL_VARIABLE = "DAMCHA_STORAGE_URL"
CONNECT_TIMEOUT_S = 10
SUPPORTED_DIALECTS = ("sqlite", "postgresql", "mysql")
EXAMPLES = "sqlite:///runs/optuna.db or postgresql+psycopg://USER@HOST:PORT/DATABASE"
SQLITE_TIMEOUT_S = 60


class StorageURLError(ValueError):
    """A storage URL that cannot be used; the message names it and shows valid forms."""


def resolve_storage_url(value: str | None) -> str:
    """The URL to use: ``value``; ``env:NAME`` reads variable NAME; None reads ``$DAMCHA_STORAGE_URL``, else the default.

    Reading the URL from the environment keeps passwords off command lines and out of
    process lists.

    Raises:
        StorageURLError: ``env:NAME`` names a variable that is not set.
    """
    if value is None:
        return os.environ.get(STORAGE_URL_VARIABLE) or DEFAULT_STORAGE_URL
    if value.startswith("env:"):
        name = value.removeprefix("env:")
        if not os.environ.get(name):
            raise StorageURLError(f"--storage {value}: environment variable {name} is not set (or empty)")
        return os.environ[name]
    return value


def parse_storage_url(url: str) -> URL:
    """Check a storage URL without touching any database.

    Raises:
        StorageURLError: not a SQLAlchemy URL, an unsupported database, or a SQLite
            URL without a file path.
    """
    try:
        parsed = make_url(url)
    except sqlalchemy.exc.ArgumentError:
        raise StorageURLError(f"storage URL {masked_url(url)!r} is not a database URL; use e.g. {EXAMPLES}") from None
    if parsed.get_backend_name() not in SUPPORTED_DIALECTS:
        raise StorageURLError(
            f"storage URL {masked_url(url)!r}: database {parsed.get_backend_name()!r} is not supported by Optuna's RDB storage; "
            f"use one of {', '.join(SUPPORTED_DIALECTS)}, e.g. {EXAMPLES}"
        )
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise StorageURLError(f"storage URL {url!r}: SQLite needs a file, e.g. sqlite:///runs/optuna.db (an in-memory store would be lost)")
    return parsed


def masked_url(url: str) -> str:
    """The URL with any password replaced by ``***``, for messages, reports and logs."""
    try:
        parsed = make_url(url)
    except sqlalchemy.exc.ArgumentError:
        return re.sub(r"(://[^/@]*?:)[^/@]*@", r"\1***@", url)  # not a URL, but maybe still a password
    return parsed.render_as_string(hide_password=True)


class StoreBusyError(RuntimeError):
    """Another driver is writing to this SQLite store."""


@contextlib.contextmanager
def single_writer(url: str) -> Iterator[None]:
    """Hold the store's writer lock for a run: SQLite is safe with one writing driver only.

    A lock file next to the database (``<file>.writer-lock``, an advisory ``flock`` that
    the operating system releases when the process dies, even by SIGKILL). Other
    databases need no lock: several drivers may share a PostgreSQL store.

    Raises:
        StoreBusyError: another process holds the lock; names its pid and the fix.
    """
    parsed = parse_storage_url(url)
    if parsed.get_backend_name() != "sqlite":
        yield
        return
    path = Path(parsed.database).with_name(Path(parsed.database).name + ".writer-lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise StoreBusyError(
                f"another driver (pid {holder}) is running a study on the SQLite store {masked_url(url)}; SQLite is safe "
                "with one writing driver: wait for it, use another --storage file, or use PostgreSQL for several drivers"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def open_storage(url: str | None = None) -> optuna.storages.RDBStorage:
    """An Optuna storage for a URL (``resolve_storage_url(None)`` when None).

    A SQLite file's folder is created if missing and the file is switched to
    write-ahead logging (a setting stored in the file).

    Raises:
        StorageURLError: see ``parse_storage_url``; or the database cannot be reached.
    """
    url = url or resolve_storage_url(None)
    parsed = parse_storage_url(url)
    engine_kwargs = {}
    if parsed.get_backend_name() == "sqlite":
        path = Path(parsed.database)
        path.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(path, timeout=SQLITE_TIMEOUT_S) as connection:
            connection.execute("PRAGMA journal_mode=WAL")
        engine_kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}}
    elif parsed.get_backend_name() == "postgresql":
        engine_kwargs = {"pool_pre_ping": True, "connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}
    else:
        engine_kwargs = {"pool_pre_ping": True}
    try:
        return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)
    except (sqlalchemy.exc.OperationalError, ModuleNotFoundError, ImportError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise StorageURLError(f"storage URL {masked_url(url)!r}: cannot open the database: {first_line}") from None


class StudyLock:
    """A lock shared by every driver of one study on a PostgreSQL store (an advisory lock);
    on SQLite, where ``single_writer`` admits one driver, it does nothing.

    Drivers hold it while they count the study's trials and ask for the next one, so that
    together they never start more trials than the budget.
    """

    def __init__(self, url: str, study_name: str) -> None:
        self._url = url if parse_storage_url(url).get_backend_name() == "postgresql" else None
        self._key = int.from_bytes(hashlib.sha256(study_name.encode()).digest()[:8], "big", signed=True)
        self._engine = None

    def __getstate__(self) -> dict:
        return {"_url": self._url, "_key": self._key, "_engine": None}  # engines don't pickle (Ray Tune pickles the searcher)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lock for the block (waits for other drivers)."""
        if self._url is None:
            yield
            return
        if self._engine is None:
            self._engine = sqlalchemy.create_engine(self._url, poolclass=sqlalchemy.pool.NullPool,
                                                    connect_args={"connect_timeout": CONNECT_TIMEOUT_S})  # fmt: skip
        with self._engine.connect() as connection:
            connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": self._key})
            try:
                yield
            finally:
                connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": self._key})
