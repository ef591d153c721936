"""Reading Long Range Arena release files, with errors that name the file and line."""

from __future__ import annotations

import csv
import os
from pathlib import Path

RELEASE_URL = "https://storage.googleapis.com/long-range-arena/lra_release.gz"
DATA_DIR_VARIABLE = "LRA_DATA_DIR"


class DataFileError(ValueError):
    """A release file is missing or malformed; the message names the file (and line)."""


def release_file(task: str, data_dir: Path | str | None, relative: str) -> Path:
    """Locate a file of the unpacked ``lra_release`` directory.

    Args:
        task: The task's name, for the message.
        data_dir: The unpacked release directory; ``$LRA_DATA_DIR`` when None.
        relative: The file's path inside it.

    Returns:
        The existing file's path.

    Raises:
        DataFileError: no directory was given, or the file is not there.
    """
    if data_dir is None:
        data_dir = os.environ.get(DATA_DIR_VARIABLE)
    if data_dir is None:
        raise DataFileError(
            f"task {task!r} reads the LRA release files: pass --data-dir or set {DATA_DIR_VARIABLE} "
            f"to the unpacked lra_release directory (download: {RELEASE_URL})"
        )
    path = Path(data_dir) / relative
    if not path.is_file():
        raise DataFileError(
            f"task {task!r}: expected file {relative!r} under {Path(data_dir).resolve()} but {path} does not exist; "
            f"the LRA release ({RELEASE_URL}) unpacks to a directory that holds it"
        )
    return path


def _integer(text: str) -> int | None:
    """``"3"`` or ``"3.0"`` (some release files write labels as floats) -> 3; else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() else None


def read_labelled_tsv(path: Path, *, columns: int, label_column: int, num_classes: int) -> list[tuple[list[str], int]]:
    """Read a TSV with a header row, checking every row.

    Args:
        path: The file.
        columns: Columns each row must have.
        label_column: Index of the integer label.
        num_classes: Labels must lie in ``0..num_classes-1``.

    Returns:
        ``(fields, label)`` per data row, in file order.

    Raises:
        DataFileError: naming the file and line of the first bad row (wrong column
            count, non-integer or out-of-range label, undecodable bytes).
    """
    rows = []
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            for line_number, fields in enumerate(csv.reader(handle, delimiter="\t"), start=1):
                if line_number == 1:
                    continue  # header
                if len(fields) != columns:
                    raise DataFileError(f"{path}:{line_number}: expected {columns} tab-separated columns, found {len(fields)}")
                text = fields[label_column].strip()
                label = _integer(text)
                if label is None:
                    raise DataFileError(f"{path}:{line_number}: label {text!r} is not an integer")
                if not 0 <= label < num_classes:
                    raise DataFileError(f"{path}:{line_number}: label {label} is outside 0..{num_classes - 1}")
                rows.append((fields, label))
    except UnicodeDecodeError as error:
        raise DataFileError(f"{path}: bytes at offset {error.start} are not valid UTF-8") from None
    return rows
