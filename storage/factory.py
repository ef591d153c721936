"""One factory from a URL to an Optuna storage.

The default is a SQLite file under the working directory, set up for one writing
driver and other readers (optuna-dashboard, reports): write-ahead logging, so readers
don't block the writer, and a generous lock timeout. Any other SQLAlchemy URL that
Optuna supports (PostgreSQL on a cluster) is passed through.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import optuna
import sqlalchemy
from sqlalchemy.engine import URL, make_url

DEFAULT_STORAGE_URL = "sqlite:///runs/optuna.db"
SUPPORTED_DIALECTS = ("sqlite", "postgresql", "mysql")
EXAMPLES = "sqlite:///runs/optuna.db or postgresql+psycopg://USER@HOST:PORT/DATABASE"
SQLITE_TIMEOUT_S = 60


class StorageURLError(ValueError):
    """A storage URL that cannot be used; the message names it and shows valid forms."""


def parse_storage_url(url: str) -> URL:
    """Check a storage URL without touching any database.

    Raises:
        StorageURLError: not a SQLAlchemy URL, an unsupported database, or a SQLite
            URL without a file path.
    """
    try:
        parsed = make_url(url)
    except sqlalchemy.exc.ArgumentError:
        raise StorageURLError(f"storage URL {url!r} is not a database URL; use e.g. {EXAMPLES}") from None
    if parsed.get_backend_name() not in SUPPORTED_DIALECTS:
        raise StorageURLError(
            f"storage URL {url!r}: database {parsed.get_backend_name()!r} is not supported by Optuna's RDB storage; "
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
        return url
    return parsed.render_as_string(hide_password=True)


def open_storage(url: str | None = None) -> optuna.storages.RDBStorage:
    """An Optuna storage for a URL (``DEFAULT_STORAGE_URL`` when None).

    A SQLite file's folder is created if missing and the file is switched to
    write-ahead logging (a setting stored in the file).

    Raises:
        StorageURLError: see ``parse_storage_url``; or the database cannot be reached.
    """
    url = url or DEFAULT_STORAGE_URL
    parsed = parse_storage_url(url)
    engine_kwargs = {}
    if parsed.get_backend_name() == "sqlite":
        path = Path(parsed.database)
        path.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(path, timeout=SQLITE_TIMEOUT_S) as connection:
            connection.execute("PRAGMA journal_mode=WAL")
        engine_kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}}
    else:
        engine_kwargs = {"pool_pre_ping": True}
    try:
        return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)
    except (sqlalchemy.exc.OperationalError, ModuleNotFoundError, ImportError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise StorageURLError(f"storage URL {masked_url(url)!r}: cannot open the database: {first_line}") from None
