"""Reading Long Range Arena release files, with errors that name the file and line.

Each reader checks every row and raises ``DataFileError`` at the first bad one: nothing
is dropped or skipped silently. Layouts, relative to the unpacked ``lra_release``
directory (``$LRA_DATA_DIR``, or the ``data_dir`` argument of a loader):

- ListOps: ``listops-1000/basic_{train,val,test}.tsv`` (header ``Source	Target``).
- Text: ``aclImdb/{train,test}/{pos,neg}/*.txt`` (the IMDB reviews LRA reads through TFDS).
- Retrieval: ``tsv_data/new_aan_pairs.{train,eval,test}.tsv`` (no header; label, two ids,
  two documents).
- Image: ``cifar-10-batches-py/{data_batch_1..5,test_batch}`` (CIFAR-10 python pickles).
- Pathfinder: ``pathfinder32/<difficulty>/metadata/*.npy`` (text rows: image directory,
  image file, _, label, ...) and the PNG images they name.
"""

from __future__ import annotations

import math
import os
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

RELEASE_URL = "https://storage.googleapis.com/long-range-arena/lra_release.gz"
IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
DATA_DIR_VARIABLE = "LRA_DATA_DIR"


class DataFileError(ValueError):
    """A data file is missing or malformed, or a data cache cannot be written; the message names the file (and line)."""


def data_root(task: str, data_dir: Path | str | None) -> Path:
    """The directory holding a task's files: ``data_dir``, else ``$LRA_DATA_DIR``.

    Raises:
        DataFileError: neither is set.
    """
    if data_dir is None:
        data_dir = os.environ.get(DATA_DIR_VARIABLE)
    if data_dir is None:
        raise DataFileError(
            f"task {task!r} reads the LRA release files: set {DATA_DIR_VARIABLE} "
            f"to the unpacked lra_release directory (download: {RELEASE_URL})"
        )
    return Path(data_dir)


def release_file(task: str, data_dir: Path | str | None, relative: str, *, source: str = RELEASE_URL, kind: str = "file") -> Path:
    """Locate a file (or directory) of the task's data directory.

    Args:
        task: The task's name, for the message.
        data_dir: The unpacked release directory; ``$LRA_DATA_DIR`` when None.
        relative: The path inside it.
        source: Where the files come from, for the message.
        kind: ``"file"`` or ``"directory"``.

    Returns:
        The existing path.

    Raises:
        DataFileError: no directory was given, or the path is not there.
    """
    root = data_root(task, data_dir)
    path = root / relative
    if not (path.is_dir() if kind == "directory" else path.is_file()):
        raise DataFileError(
            f"task {task!r}: expected {kind} {relative!r} under {root.resolve()} but {path} does not exist; "
            f"it comes from {source}, unpacked into that directory"
        )
    return path


def _integer(text: str) -> int | None:
    """``"3"`` or ``"3.0"`` (the AAN files write labels as floats) -> 3; else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() else None


def checked_label(text: str, num_classes: int, where: str) -> int:
    """An integer label in ``0..num_classes-1``.

    Raises:
        DataFileError: prefixed with ``where`` (file and line).
    """
    label = _integer(text.strip())
    if label is None:
        raise DataFileError(f"{where}: label {text.strip()!r} is not an integer")
    if not 0 <= label < num_classes:
        raise DataFileError(f"{where}: label {label} is outside 0..{num_classes - 1}")
    return label


LINE_BYTES = 4 * 2**20  # the longest line a release TSV may have (AAN's documents are tens of KiB)


def _decoded_lines(path: Path, max_line_bytes: int = LINE_BYTES) -> Iterator[tuple[int, str]]:
    """``(line number, text without its newline)``; bad UTF-8 names the line, and so does a line longer
    than ``max_line_bytes``, refused before it is read whole."""
    with path.open("rb") as handle:
        line_number = 0
        while raw := handle.readline(max_line_bytes + 1):
            line_number += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                raise DataFileError(
                    f"{path}:{line_number}: the line is longer than {max_line_bytes:,} bytes, more than this task's "
                    "release files hold; this file is not in the release format"
                )
            try:
                yield line_number, raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as error:
                raise DataFileError(f"{path}:{line_number}: bytes at column {error.start + 1} are not valid UTF-8") from None


LISTOPS_HEADER = "Source\tTarget"


def read_labelled_tsv(
    path: Path,
    *,
    columns: int,
    label_column: int,
    num_classes: int,
    header: str | None = LISTOPS_HEADER,
    max_line_bytes: int = LINE_BYTES,
) -> list[tuple[list[str], int]]:
    """Read a TSV, checking every row. Fields are split on tabs only (no quoting), as LRA does.

    Args:
        path: The file.
        columns: Columns each row must have.
        label_column: Index of the integer label.
        num_classes: Labels must lie in ``0..num_classes-1``.
        header: The first line, exactly (a file without it would lose a row), or None
            when the file has no header.
        max_line_bytes: The longest line the format has; a longer one is refused before it is read.

    Returns:
        ``(fields, label)`` per data row, in file order.

    Raises:
        DataFileError: naming the file and line of the first bad row (a missing header,
            wrong column count, an empty field, a non-integer or out-of-range label,
            undecodable bytes, a line too long), or a file without data rows.
    """
    rows = []
    for line_number, line in _decoded_lines(path, max_line_bytes):
        if header is not None and line_number == 1:
            if line != header:
                shown = header.replace("\t", "<TAB>")
                raise DataFileError(
                    f"{path}:1: expected the header {shown!r}, found {line[:60]!r}; this file is not in the release format"
                )
            continue
        fields = line.split("\t")
        if len(fields) != columns:
            raise DataFileError(f"{path}:{line_number}: expected {columns} tab-separated columns, found {len(fields)}")
        if empty := [index + 1 for index, field in enumerate(fields) if not field.strip()]:
            raise DataFileError(f"{path}:{line_number}: column {empty[0]} is empty (an example needs a sequence and a label)")
        rows.append((fields, checked_label(fields[label_column], num_classes, f"{path}:{line_number}")))
    if not rows:
        raise DataFileError(
            f"{path}: no data rows{' after the header' if header is not None else ''}; the file is empty or truncated"
        )
    return rows


def read_imdb_split(directory: Path) -> tuple[list[bytes], list[int]]:
    """Reviews of one ``aclImdb`` split (``neg`` = 0, ``pos`` = 1), in sorted file order.

    Raises:
        DataFileError: a ``pos`` or ``neg`` folder is missing or empty.
    """
    texts, labels = [], []
    for label, sentiment in enumerate(("neg", "pos")):
        files = sorted((directory / sentiment).glob("*.txt"))
        if not files:
            raise DataFileError(f"{directory / sentiment}: no review files (*.txt); the aclImdb release ({IMDB_URL}) has them")
        for file in files:
            texts.append(file.read_bytes())
            if not texts[-1].strip():
                raise DataFileError(f"{file}: the review is empty; an example needs a sequence")
        labels += [label] * len(files)
    return texts, labels


# What a CIFAR-10 python batch may reconstruct: numpy arrays and dtypes, nothing else. Pickle runs
# any callable a file names, so a crafted "batch" could run code: every other name is refused.
_CIFAR_GLOBALS = {
    (module, name) for module in ("numpy.core.multiarray", "numpy._core.multiarray") for name in ("_reconstruct", "scalar")
} | {("numpy", "ndarray"), ("numpy", "dtype")}


CIFAR_BATCH_BYTES = 10_000 * 3 * 32 * 32  # a batch's images: 10,000 of 3,072 bytes
CIFAR_FILE_BYTES = CIFAR_BATCH_BYTES + 2**20  # its pickle: the images, the labels, file names and framing


class _ArraysOnly(pickle.Unpickler):
    """An unpickler that builds dicts, lists, bytes, numbers and numpy arrays no larger than a CIFAR-10
    batch's images, and refuses any other callable."""

    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in _CIFAR_GLOBALS:
            raise pickle.UnpicklingError(f"refused to load {module}.{name}: a data file may hold arrays, never code")
        found = super().find_class(module, name)
        return _bounded(found) if name == "_reconstruct" else found


def _bounded(reconstruct: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """numpy's array constructor for pickles, refusing an array larger than a CIFAR-10 batch's images
    before it allocates one (a crafted file may ask for any shape in a few bytes)."""

    def build(subtype: type, shape: object, dtype: object) -> np.ndarray:
        try:
            size = math.prod(int(n) for n in (shape if isinstance(shape, tuple | list) else (shape,))) * np.dtype(dtype).itemsize
        except (TypeError, ValueError) as error:
            raise pickle.UnpicklingError(f"an array of shape {shape!r} and type {dtype!r}: {error}") from None
        if not 0 <= size <= CIFAR_BATCH_BYTES:
            raise pickle.UnpicklingError(
                f"an array of {size:,} bytes; a CIFAR-10 batch holds at most {CIFAR_BATCH_BYTES:,} (10,000 images of 3,072)"
            )
        return reconstruct(subtype, shape, dtype)

    return build


def read_cifar10_batch(path: Path) -> tuple[np.ndarray, list[int]]:
    """One CIFAR-10 python batch.

    Returns:
        ``(images, labels)``: images (N, 3, 32, 32) uint8 (RGB planes), labels in 0..9.

    Raises:
        DataFileError: not a CIFAR-10 pickle, a file or an array larger than a batch (refused before
            it is allocated), wrong image size, bad label (example named).
    """
    if (size := path.stat().st_size) > CIFAR_FILE_BYTES:
        raise DataFileError(f"{path}: {size:,} bytes, more than a CIFAR-10 python batch's {CIFAR_FILE_BYTES:,}; not a batch")
    try:
        with path.open("rb") as handle:
            batch = _ArraysOnly(handle, encoding="bytes").load()
        data, labels = np.asarray(batch[b"data"]), list(batch[b"labels"])
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError) as error:
        raise DataFileError(f"{path}: not a CIFAR-10 python batch (a dict with b'data' and b'labels'): {error!r}") from None
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise DataFileError(f"{path}: b'data' must be uint8 rows of 3072 values, found {data.dtype} {data.shape}")
    if len(labels) != len(data):
        raise DataFileError(f"{path}: {len(data)} images but {len(labels)} labels")
    checked = [checked_label(str(label), 10, f"{path}: example {index}") for index, label in enumerate(labels)]
    return data.reshape(-1, 3, 32, 32), checked


def grayscale(images: np.ndarray) -> np.ndarray:
    """RGB (N, 3, H, W) uint8 -> luma (N, H, W) uint8 with TensorFlow's weights, as LRA."""
    weights = np.array([0.2989, 0.5870, 0.1140], dtype=np.float32)
    luma = np.einsum("nchw,c->nhw", images.astype(np.float32), weights)  # (N, H, W)
    return np.clip(np.rint(luma), 0, 255).astype(np.uint8)


def read_pathfinder_metadata(path: Path, images_root: Path) -> list[tuple[Path, int]]:
    """Rows of one Pathfinder metadata file: ``(image path, label)``.

    Raises:
        DataFileError: a row with fewer than 4 fields, a label other than 0/1, or an
            image that is not there (file and line named).
    """
    rows = []
    for line_number, line in _decoded_lines(path):
        if not line.strip():
            continue
        fields = line.split()
        where = f"{path}:{line_number}"
        if len(fields) < 4:
            raise DataFileError(f"{where}: expected at least 4 space-separated fields (dir, file, _, label), found {len(fields)}")
        image = images_root / fields[0] / fields[1]
        if not image.is_file():
            raise DataFileError(f"{where}: image {image} does not exist")
        rows.append((image, checked_label(fields[3], 2, where)))
    return rows


def read_gray_image(path: Path, size: int) -> np.ndarray:
    """A ``size``×``size`` grayscale image as (size, size) uint8.

    Raises:
        DataFileError: unreadable, or another size.
    """
    from PIL import Image, UnidentifiedImageError  # only the Pathfinder task needs Pillow

    try:
        with Image.open(path) as image:
            pixels = np.asarray(image.convert("L"))
    except (UnidentifiedImageError, OSError) as error:
        raise DataFileError(f"{path}: not a readable image: {error}") from None
    if pixels.shape != (size, size):
        raise DataFileError(f"{path}: expected a {size}x{size} image, found {pixels.shape[1]}x{pixels.shape[0]}")
    return pixels
