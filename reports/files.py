"""Files the product writes: safe names, paths checked before work starts, atomic writes."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from common.outputs import REPORTS_DIR
from storage import on_read_only_medium, store_tag


class OutputPathError(ValueError):
    """A path where nothing can be written; the message names it, the fault and the fix."""


def safe_file_name(name: str) -> str:
    """A file name made from data (a study name): letters, digits, ``. _ = + -`` kept,
    anything else (``/``, ``..`` at the start, spaces) replaced, so it never leaves its folder.
    """
    cleaned = re.sub(r"[^A-Za-z0-9._=+-]", "_", name).lstrip(".")
    return cleaned or "study"


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


def _nearest_existing(path: Path) -> Path:
    return next(candidate for candidate in (path, *path.parents) if candidate.exists())


NAME_MAX_BYTES = 255  # a file name's limit (NAME_MAX) on Linux's file systems (ext4, XFS, Btrfs, tmpfs) and macOS


def check_path_text(path: Path, option: str) -> None:
    """Check that ``path`` is text the store and the pages can hold (valid UTF-8) and that each of its
    names fits a file system's limit, so that no write fails on it half-way.

    Raises:
        OutputPathError: naming the option, the fault and the fix.
    """
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise OutputPathError(
            f"{option} {text.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8 (runs record their paths as text): "
            "rename it, or give another path"
        ) from None
    for name in path.parts:
        if len(name.encode()) > NAME_MAX_BYTES:
            raise OutputPathError(
                f"{option}: the name {name[:24]}... is {len(name.encode())} bytes, more than a file name may be "
                f"({NAME_MAX_BYTES}); give a shorter one"
            )


def check_writable_file(path: Path, option: str, keep: Iterable[Path] = ()) -> None:
    """Check that ``path`` can be written (created, with its folders, or replaced), changing nothing,
    and that writing it destroys nothing: it is none of the ``keep`` files (a store's, however
    the path names it: links, ``..``, relative or absolute) and nothing but a regular file.

    Raises:
        OutputPathError: it is a folder, a link, a device or other non-regular file, one of the
            ``keep`` files, or its nearest existing folder is not one this user can write
            (named with ``option``).
    """
    check_path_text(path, option)
    if path.is_dir():
        raise OutputPathError(f"{option} {path} is a folder: give a file path")
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise OutputPathError(
            f"{option} {path} is not a regular file (a link, a device or a pipe): give the path of a new or regular file"
        )
    target = path.resolve()
    for kept in keep:
        if target == kept.resolve() or (path.exists() and kept.exists() and os.path.samefile(path, kept)):
            raise OutputPathError(
                f"{option} {path} is the store's file {kept}: writing there would destroy the store; give another path"
            )
    _check_folder(path.parent, option, path)


def check_writable_dir(path: Path, option: str) -> None:
    """Check that folder ``path`` exists and can be written, or can be created; changes nothing.

    Raises:
        OutputPathError: it is a file, or it (or its nearest existing parent) cannot be written.
    """
    check_path_text(path, option)
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{option} {path} is a file, not a folder")
    _check_folder(path, option, path)


def _check_folder(folder: Path, option: str, named: Path) -> None:
    existing = _nearest_existing(folder.absolute())
    if not existing.is_dir():
        raise OutputPathError(f"{option} {named}: {existing} is a file, so no folder can be made there")
    if on_read_only_medium(existing):  # even for root, whom permissions do not stop
        raise OutputPathError(f"{option} {named}: {existing} is on a read-only file system; choose another path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(f"{option} {named}: this user cannot write in {existing}; choose another path")
