"""Optuna storage from a URL: SQLite by default, PostgreSQL on a cluster."""

from storage.database_lock import StoreBusyError
from storage.factory import StudyLock, open_storage
from storage.identity import store_tag
from storage.sqlite_files import (
    check_sqlite_store,
    sqlite_path,
    sqlite_read_only_flags,
    store_files,
)
from storage.store_errors import failed_database, full_disk, store_or_disk_failed
from storage.urls import (
    DEFAULT_STORAGE_URL,
    STORAGE_URL_VARIABLE,
    StorageURLError,
    masked_url,
    parse_storage_url,
    resolve_storage_url,
)
from storage.writer_lock import single_writer

__all__ = [
    "DEFAULT_STORAGE_URL",
    "STORAGE_URL_VARIABLE",
    "StorageURLError",
    "StoreBusyError",
    "StudyLock",
    "check_sqlite_store",
    "failed_database",
    "full_disk",
    "masked_url",
    "open_storage",
    "parse_storage_url",
    "resolve_storage_url",
    "single_writer",
    "store_tag",
    "sqlite_path",
    "sqlite_read_only_flags",
    "store_files",
    "store_or_disk_failed",
]
