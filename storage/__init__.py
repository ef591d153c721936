"""Optuna storage from a URL: SQLite by default, PostgreSQL on a cluster."""

from storage.factory import (
    DEFAULT_STORAGE_URL,
    STORAGE_URL_VARIABLE,
    StorageURLError,
    StoreBusyError,
    StudyLock,
    check_sqlite_store,
    full_disk,
    masked_url,
    on_read_only_medium,
    open_storage,
    parse_storage_url,
    resolve_storage_url,
    single_writer,
    sqlite_path,
    sqlite_read_only_flags,
    store_files,
)

__all__ = [
    "DEFAULT_STORAGE_URL",
    "STORAGE_URL_VARIABLE",
    "StorageURLError",
    "StoreBusyError",
    "StudyLock",
    "check_sqlite_store",
    "full_disk",
    "masked_url",
    "on_read_only_medium",
    "open_storage",
    "parse_storage_url",
    "resolve_storage_url",
    "single_writer",
    "sqlite_path",
    "sqlite_read_only_flags",
    "store_files",
]
