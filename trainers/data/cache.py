"""Arrow caches of generated or loaded splits, through the ``datasets`` library.

A cache lives in ``<cache dir>/<task>-<key digest>/`` with a manifest holding the full
key (task, parameters, seed, format version) and a checksum of every data file. A cache
whose key or contents don't match is rebuilt, never trusted. Reloads are memory-mapped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets

from common.outputs import DATA_CACHE_DIR
from trainers.data.lra_files import DataFileError

FORMAT_VERSION = 1
CACHE_DIR_VARIABLE = "DAMCHA_DATA_CACHE"
MANIFEST = "damcha_manifest.json"


def default_cache_dir() -> Path:
    """``$DAMCHA_DATA_CACHE``, else ``runs/data`` under the working directory."""
    return Path(os.environ.get(CACHE_DIR_VARIABLE) or DATA_CACHE_DIR)


def _checksums(directory: Path) -> dict[str, str]:
    sums = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and path.name != MANIFEST:
            with path.open("rb") as handle:
                sums[str(path.relative_to(directory))] = hashlib.file_digest(handle, "sha256").hexdigest()
    return sums


def _is_valid(directory: Path, key: dict[str, Any]) -> bool:
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("key") == key and manifest.get("checksums") == _checksums(directory)


def cached_splits(
    task: str,
    params: dict[str, Any],
    build: Callable[[], dict[str, dict[str, list]]],
    *,
    features: datasets.Features,
    cache_dir: Path | None = None,
) -> datasets.DatasetDict:
    """Load a task's splits from the cache, building and storing them when needed.

    Args:
        task: The task's name.
        params: Everything that determines the data (parameters, seed, source files'
            identity); must be JSON-serialisable.
        build: Returns ``{split: {column: values}}``; called only on a cache miss.
        features: The columns' types.
        cache_dir: Where caches live; ``default_cache_dir()`` when None.

    Returns:
        The splits, memory-mapped from the cache's Arrow files.

    Raises:
        DataFileError: the cache cannot be written (no space left, say); nothing of it is left behind.
    """
    key = {"task": task, "params": params, "format_version": FORMAT_VERSION}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    directory = (cache_dir or default_cache_dir()) / f"{task}-{digest}"
    if not _is_valid(directory, key):
        # Each process builds under its own name: two drivers may build the same cache at once.
        partial = directory.with_name(f"{directory.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        splits = datasets.DatasetDict(
            {split: datasets.Dataset.from_dict(columns, features=features) for split, columns in build().items()}
        )
        bars = datasets.is_progress_bar_enabled()
        datasets.disable_progress_bars()
        try:
            splits.save_to_disk(str(partial))
            (partial / MANIFEST).write_text(json.dumps({"key": key, "checksums": _checksums(partial)}, indent=1))
        except OSError as error:  # a full disk, say: no half-written cache is left
            shutil.rmtree(partial, ignore_errors=True)
            raise DataFileError(
                f"cannot write the data cache {directory}: {error.strerror or error}; free space there, "
                "or pass another --data-cache"
            ) from None
        finally:
            if bars:
                datasets.enable_progress_bars()
        try:
            partial.rename(directory)  # a half-written cache never carries the final name
        except OSError:  # the name is taken: by another process's finished build, or by a bad cache
            if _is_valid(directory, key):
                shutil.rmtree(partial)
            else:
                shutil.rmtree(directory, ignore_errors=True)
                partial.rename(directory)
    return datasets.load_from_disk(str(directory))
