"""One factory from a URL to an Optuna storage.

The default is a SQLite file under the working directory, set up for one writing
driver and other readers (optuna-dashboard, reports): write-ahead logging, so readers
don't block the writer, and a generous lock timeout. Any other SQLAlchemy URL that
Optuna supports (PostgreSQL on a cluster) is passed through. What a URL is and how it is
shown: ``storage.urls``; a SQLite store's files and checks: ``storage.sqlite_files``; its
one writer: ``storage.writer_lock``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sqlite3
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import optuna
import sqlalchemy

from common.outputs import on_read_only_medium
from storage.sqlite_files import SQLITE_TIMEOUT_S, check_sqlite_store, reading_uri, sqlite_path
from storage.store_errors import first_line
from storage.urls import StorageURLError, masked_url, parse_storage_url, resolve_storage_url

CONNECT_TIMEOUT_S = 10
SCHEMA_LOCK_NAME = "\0optuna tables"  # the ``StudyLock`` held while Optuna creates a store's tables (no study has a NUL)


def open_storage(url: str | None = None, *, read_only: bool = False, **heartbeat: Any) -> optuna.storages.RDBStorage:
    """An Optuna storage for a URL (``resolve_storage_url(None)`` when None).

    For writing, a SQLite file's folder is created if missing (user-only) and the file is
    switched to write-ahead logging (a setting stored in the file). ``read_only`` (reports,
    browsing) creates, migrates and reconfigures nothing: the store must exist.
    ``heartbeat``: ``RDBStorage``'s heartbeat arguments (``heartbeat_interval``,
    ``grace_period``, ``heartbeat_stale_trial_callback``), for a driver.

    Raises:
        StorageURLError: see ``parse_storage_url`` and ``check_sqlite_store``; or the
            database cannot be reached.
    """
    url = url or resolve_storage_url(None)
    parsed = parse_storage_url(url)
    engine_kwargs = {}
    connect = url
    if parsed.get_backend_name() == "sqlite":
        path = sqlite_path(url)
        check_sqlite_store(path, writing=not read_only)
        if read_only and on_read_only_medium(path.parent):  # read as an immutable file: see _reading_uri
            connect = f"sqlite:///{reading_uri(path)}&uri=true"
        if not read_only:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # A store describes its studies: its owner's alone (SQLite gives its -wal file the same mode).
            with contextlib.suppress(FileExistsError):  # an existing store: only SQLite may open it (check_sqlite_store)
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # an empty file is an empty database
            with contextlib.closing(sqlite3.connect(path, timeout=SQLITE_TIMEOUT_S)) as connection:
                connection.execute("PRAGMA journal_mode=WAL")
        engine_kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}}
    elif parsed.get_backend_name() == "postgresql":
        engine_kwargs = {"pool_pre_ping": True, "connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}
    else:
        engine_kwargs = {"pool_pre_ping": True}
    try:
        # Optuna creates a new database's tables unguarded: two drivers starting at once on an empty PostgreSQL
        # database would both issue CREATE TABLE, and the second fail ("relation ... already exists").
        schema_lock = contextlib.nullcontext() if read_only else StudyLock(url, SCHEMA_LOCK_NAME).held()
        with schema_lock, warnings.catch_warnings():  # Optuna marks its heartbeat experimental
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            storage = optuna.storages.RDBStorage(connect, engine_kwargs=engine_kwargs, skip_table_creation=read_only, **heartbeat)
        if read_only:  # nothing was read yet (no tables created): read once, so that a store it cannot use fails here
            storage.get_all_studies()
        return storage
    except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.DatabaseError, ModuleNotFoundError, ImportError) as error:
        raise StorageURLError(f"storage URL {masked_url(url)!r}: cannot open the database: {first_line(error, url)}") from None
    except optuna.exceptions.StorageInternalError as error:  # Optuna 5 wraps the driver's error
        cause = error.__cause__ or error
        if re.search(r"no such table|relation .* does not exist", str(cause)):
            raise StorageURLError(
                f"storage URL {masked_url(url)!r}: the database holds no Optuna store (no study tables); "
                "pass the --storage of a store a study wrote"
            ) from None
        raise StorageURLError(f"storage URL {masked_url(url)!r}: cannot open the database: {first_line(cause, url)}") from None


class StudyLock:
    """A lock shared by every driver of one study on a PostgreSQL store (an advisory lock);
    on SQLite, where ``single_writer`` admits one driver, it does nothing.

    Drivers hold it while they count the study's trials and ask for the next one, so that
    together they never start more trials than the budget; and, named ``SCHEMA_LOCK_NAME``,
    while Optuna creates the store's tables (``open_storage``).
    """

    def __init__(self, url: str, study_name: str, on_wait: Callable[[], None] | None = None) -> None:
        self._url = url if parse_storage_url(url).get_backend_name() == "postgresql" else None
        self._key = int.from_bytes(hashlib.sha256(study_name.encode()).digest()[:8], "big", signed=True)
        self._engine = None
        self._on_wait = on_wait  # called once each time the lock is found held, before waiting for it

    def __getstate__(self) -> dict:  # engines don't pickle (Ray Tune pickles the searcher)
        return {"_url": self._url, "_key": self._key, "_engine": None, "_on_wait": None}

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lock for the block: at once when it is free, else after saying so (``on_wait``) and waiting
        for the driver that holds it."""
        if self._url is None:
            yield
            return
        if self._engine is None:
            self._engine = sqlalchemy.create_engine(
                self._url, poolclass=sqlalchemy.pool.NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}
            )
        with self._engine.connect() as connection:
            free = connection.execute(sqlalchemy.text("SELECT pg_try_advisory_lock(:key)"), {"key": self._key}).scalar()
            if not free:
                if self._on_wait is not None:
                    self._on_wait()
                connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": self._key})
            try:
                yield
            finally:
                connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": self._key})
