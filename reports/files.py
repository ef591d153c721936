"""What a study's views are named: its report and table files, apart for each store (the checks of a path before
anything is written are ``common.outputs``')."""

from __future__ import annotations

from pathlib import Path

from common.outputs import REPORTS_DIR, safe_file_name
from storage import store_tag


def study_file_stem(study_name: str, url: str) -> str:
    """What a study's default files are named after: its safe name (``safe_file_name``), and for a
    store other than the default one ``.store-<tag>`` (``storage.store_tag``), so that studies of one
    name in two stores never write the same file.

    Raises:
        StorageURLError: see ``storage.parse_storage_url``.
    """
    tag = store_tag(url)
    return safe_file_name(study_name) + ("" if tag is None else f".store-{tag}")


def report_path(study_name: str, url: str, directory: Path = REPORTS_DIR) -> Path:
    """The default report file of a study of the store at ``url``: ``<directory>/<study_file_stem>.html``."""
    return directory / f"{study_file_stem(study_name, url)}.html"
