"""Optuna storage from a URL: SQLite by default, PostgreSQL on a cluster."""

from storage.factory import (
    DEFAULT_STORAGE_URL,
    STORAGE_URL_VARIABLE,
    StorageURLError,
    StoreBusyError,
    StudyLock,
    masked_url,
    open_storage,
    parse_storage_url,
    resolve_storage_url,
    single_writer,
)

__all__ = [
    "DEFAULT_STORAGE_URL",
    "STORAGE_URL_VARIABLE",
    "StorageURLError",
    "StoreBusyError",
    "StudyLock",
    "masked_url",
    "open_storage",
    "parse_storage_url",
    "resolve_storage_url",
    "single_writer",
]
