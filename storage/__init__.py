"""Optuna storage from a URL: SQLite by default, PostgreSQL on a cluster."""

from storage.factory import DEFAULT_STORAGE_URL, StorageURLError, masked_url, open_storage, parse_storage_url

__all__ = ["DEFAULT_STORAGE_URL", "StorageURLError", "masked_url", "open_storage", "parse_storage_url"]
