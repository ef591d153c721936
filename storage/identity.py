"""Which store a URL names, as a short tag, so that files written for one store never take another's names."""

from __future__ import annotations

import hashlib

from storage.sqlite_files import sqlite_path
from storage.urls import STORE_FILE, masked_url

TAG_LENGTH = 8  # hex digits: two stores' tags coincide once in about 4e9 pairs


def store_tag(url: str) -> str | None:
    """A store's short tag: None for the default store (``runs/optuna.db`` under the working directory),
    else the first hex digits of a SHA-256 of its identity: a SQLite store's database file (links
    resolved, however the URL names it), another database's URL without its credentials.

    Raises:
        StorageURLError: see ``storage.urls.parse_storage_url``.
    """
    database = sqlite_path(url)
    if database is not None and database == STORE_FILE.resolve():
        return None
    identity = str(database) if database is not None else masked_url(url)
    return hashlib.sha256(identity.encode()).hexdigest()[:TAG_LENGTH]
