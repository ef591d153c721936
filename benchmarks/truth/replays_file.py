"""The replays file of a truth table (``<table>-replays.csv``): where it lies, the table state its rows name, its one
checked reader, and the lock a run holds while it rewrites it (``benchmarks.truth.compare`` writes it)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
from filelock import FileLock, Timeout

from benchmarks.truth.table import TableError, read_csv_checked


def replays_path(table: Path) -> Path:
    """Where a table's replays are kept: ``<table>-replays.csv`` beside it."""
    return table.with_name(f"{table.stem}-replays.csv")


def table_version(table: Path) -> str:
    """The table's content hash, which each replay row records (``table``)."""
    return hashlib.sha256(table.read_bytes()).hexdigest()[:12]


KEYS = ("strategy", "trials", "repeat_seeds", "seed", "table")  # what names a row: its budget, study seed and table


def read_replays(path: Path, columns: tuple[str, ...] = KEYS) -> pd.DataFrame:
    """A replays file, checked before any figure is read from it.

    Args:
        path: The file (``replays_path``).
        columns: The columns the reader needs.

    Raises:
        TableError: no file, not a CSV, a column missing, a budget or seed that is not a whole number from 0, or a
            number that is not finite; named by the file and, for a cell, its line.
    """
    fix = "restore it with git checkout, or delete it to replay anew"
    if not path.is_file():
        raise TableError(f"{path}: no replays file; python -m benchmarks.truth.compare writes it")
    frame = read_csv_checked(path, (*KEYS, *columns), "a replays file", fix)
    for column in ("trials", "repeat_seeds", "seed"):
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = ~(values.between(0, math.inf, inclusive="left") & (values == values.round()))
        if bad.any():
            line = int(bad.idxmax()) + 2  # the header is line 1
            value = frame[column][bad].iloc[0]
            raise TableError(f"{path}, line {line}: {column} = {value} is not a whole number from 0; {fix}")
    for line, cell in enumerate(frame.get("hypervolume", pd.Series(dtype=object)), start=2):
        if isinstance(cell, str) and not _is_curve(cell):
            raise TableError(f"{path}, line {line}: hypervolume is no list of [device-hours, share] pairs; {fix}")
    numbers = frame.select_dtypes("number")
    infinite = numbers.isin([math.inf, -math.inf])
    if infinite.any().any():
        column = infinite.any().idxmax()
        line = int(infinite[column].idxmax()) + 2
        raise TableError(f"{path}, line {line}: {column} is not finite; {fix}")
    return frame


def _is_curve(cell: str) -> bool:
    """Whether a replays file's ``hypervolume`` cell is a JSON list of finite ``[device-hours, share]`` pairs."""
    try:
        curve = json.loads(cell)
    except ValueError:
        return False
    return isinstance(curve, list) and all(
        isinstance(point, list) and len(point) == 2 and all(isinstance(v, (int, float)) and math.isfinite(v) for v in point)
        for point in curve
    )


class ReplaysBusyError(RuntimeError):
    """Another run is replaying into the same replays file."""


@contextmanager
def alone(path: Path) -> Iterator[None]:
    """Hold ``path``'s lock file (``<path>.lock``) while the body runs: each run rewrites the whole file
    from the rows it holds, so a second run at once would drop the first's new rows.

    Raises:
        ReplaysBusyError: another run holds it.
    """
    lock = FileLock(f"{path}.lock", timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise ReplaysBusyError(
            f"another run is replaying into {path}: wait for it to end (it keeps each replay as it ends), then run this again"
        ) from None
    try:
        yield
    finally:
        lock.release()
