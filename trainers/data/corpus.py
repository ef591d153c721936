"""Byte-level language-modelling corpora: which text, split how, cut into next-byte examples.

A corpus is one of three sources:

- ``stdlib``: the Python standard library's own ``.py`` files, which every Python
  installation carries (real text, offline). ``site-packages`` is left out: it differs
  between machines.
- a directory: every regular, non-hidden file under it (text files: a file with a NUL
  byte in its first 8 KiB, git's test for binary files, is refused, named).
- ``hf:NAME`` or ``hf:NAME:CONFIG``: a data set that ``datasets.load_dataset`` resolves
  (online, or a local data set directory), its ``text`` column.

Files are split into train and validation by file, deterministically: a file is held out
when the hash of its path relative to the corpus root falls in the ``val_share`` of the
hash range (adding a file moves no other file). Each split's files are read in a seeded
order until it has enough bytes, and the byte stream is cut into ``seq_len + 1``-byte
windows: the model reads the first ``seq_len`` bytes and predicts each next one.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from trainers.data.lra_files import DataFileError
from trainers.data.tokenize import VALUE_OFFSET

STDLIB = "stdlib"
HUB_PREFIX = "hf:"
TEXT_SOURCES = "a directory of text files, hf:NAME[:CONFIG] (a data set `datasets` resolves), or the default: stdlib"
_LEFT_OUT = {"site-packages", "dist-packages", "__pycache__"}
BINARY_PROBE = 8192  # bytes read from each file to refuse binary ones, as git does


@dataclass(frozen=True)
class CorpusSpec:
    """How much of a corpus a task uses, and how.

    Attributes:
        seq_len: Bytes a model reads per example (each window holds one more: its last target).
        train_examples, val_examples, test_examples: Windows per split.
        seed: Seeds the order in which each split's files are read.
        val_share, test_share: The shares of files held out for validation and for test.
    """

    seq_len: int = 256
    train_examples: int = 4000
    val_examples: int = 500
    test_examples: int = 500
    seed: int = 0
    val_share: float = 0.1
    test_share: float = 0.1

    def __post_init__(self) -> None:
        if min(self.seq_len, self.train_examples, self.val_examples, self.test_examples) < 1:
            raise ValueError(f"seq_len and the examples of each split must be >= 1, got {self}")
        if not (0 < self.val_share and 0 < self.test_share and self.val_share + self.test_share < 1):
            raise ValueError(f"val_share={self.val_share} and test_share={self.test_share} must be > 0 and sum to < 1")


def stdlib_root() -> Path:
    """The standard library's directory of the running Python (the base installation's, in a venv)."""
    return Path(sysconfig.get_paths()["stdlib"]).resolve()


def corpus_files(root: Path, *, python_only: bool) -> list[Path]:
    """The corpus's files under ``root``, sorted by relative path.

    Args:
        root: The corpus directory.
        python_only: Only ``*.py`` files (the standard library), else every file.

    Raises:
        DataFileError: ``root`` is no directory, holds no file, or holds a binary one.
    """
    if not root.is_dir():
        raise DataFileError(f"task 'bytes_lm': corpus directory {root} does not exist; give {TEXT_SOURCES}")
    files = sorted(
        path
        for path in root.rglob("*.py" if python_only else "*")
        if path.is_file() and not any(part.startswith(".") or part in _LEFT_OUT for part in path.relative_to(root).parts)
    )
    if not files:
        raise DataFileError(f"task 'bytes_lm': corpus directory {root} holds no files; give {TEXT_SOURCES}")
    for path in files:
        _check_name(path, root)
        with path.open("rb") as handle:
            _check_text(handle.read(BINARY_PROBE), path)
    return files


def _check_name(path: Path, root: Path) -> None:
    """Refuse a file whose name (or a folder's on its way) is not UTF-8: the task records names as text.

    Raises:
        DataFileError: naming the file as its bytes read.
    """
    try:
        path.relative_to(root).as_posix().encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", errors="backslashreplace")
        raise DataFileError(
            f"task 'bytes_lm': the file name {shown} is not valid UTF-8; rename it or remove it from the corpus"
        ) from None


def _check_text(data: bytes, path: Path) -> None:
    """Refuse a file holding NUL bytes (no text file does).

    Raises:
        DataFileError: naming the file.
    """
    if b"\0" in data:
        raise DataFileError(f"task 'bytes_lm': {path} holds NUL bytes: it is not a text file; remove it from the corpus")


def files_digest(root: Path, files: Iterable[Path]) -> str:
    """A digest of a file list (relative paths and sizes): two machines with the same digest read the same files."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.relative_to(root).as_posix()}\0{path.stat().st_size}\n".encode())
    return digest.hexdigest()[:16]


def _hash_share(relative: str) -> float:
    """Where a relative path falls in [0, 1): a stable, uniform hash."""
    return int.from_bytes(hashlib.sha256(relative.encode()).digest()[:8], "big") / 2**64


def split_by_file(root: Path, files: list[Path], val_share: float, test_share: float) -> dict[str, list[Path]]:
    """Train, validation and test files: a file validates when its path's hash is below ``val_share``,
    tests when it lies between that and ``val_share + test_share``, and trains otherwise.

    Each split gets at least one file: with few files, the file of the lowest hash
    validates, the next tests and that of the highest trains.

    Raises:
        DataFileError: fewer than three files.
    """
    if len(files) < 3:
        raise DataFileError(
            f"task 'bytes_lm': corpus {root} has {len(files)} file(s); train, validation and test need a file each"
        )
    shares = {path: _hash_share(path.relative_to(root).as_posix()) for path in files}
    ranked = sorted(files, key=shares.__getitem__)
    validating = max(1, min(len(files) - 2, sum(share < val_share for share in shares.values())))
    held_out = max(validating + 1, min(len(files) - 1, sum(share < val_share + test_share for share in shares.values())))
    return {"train": sorted(ranked[held_out:]), "val": sorted(ranked[:validating]), "test": sorted(ranked[validating:held_out])}


def read_until(files: list[Path], needed: int, seed: int, where: str) -> bytes:
    """The files' bytes, in a seeded order, until there are ``needed`` of them.

    Raises:
        DataFileError: the files hold fewer bytes (named with ``where``).
    """
    order = list(files)
    random.Random(seed).shuffle(order)
    parts, total = [], 0
    for path in order:
        if total >= needed:
            break
        parts.append(data := path.read_bytes())
        _check_text(data, path)
        total += len(data)
    if total < needed:
        raise DataFileError(
            f"task 'bytes_lm': {where} holds {total} bytes but the preset needs {needed}; "
            f"give a larger corpus or a smaller preset ({TEXT_SOURCES})"
        )
    return b"".join(parts)


def windows(stream: bytes, seq_len: int, count: int) -> tuple[list[list[int]], list[list[int]]]:
    """``count`` next-byte examples from the start of a byte stream, as byte token ids.

    Window ``i`` is ``stream[i * seq_len : (i + 1) * seq_len + 1]``: consecutive windows
    share one byte, so every byte after the first is a target exactly once.

    Returns:
        ``tokens`` (count lists of ``seq_len`` ids) and ``labels`` (the next byte of each).
    """
    ids = [byte + VALUE_OFFSET for byte in stream[: count * seq_len + 1]]
    tokens = [ids[i * seq_len : (i + 1) * seq_len] for i in range(count)]
    labels = [ids[i * seq_len + 1 : (i + 1) * seq_len + 1] for i in range(count)]
    return tokens, labels


def hub_text(source: str, needed: dict[str, int]) -> dict[str, bytes]:
    """Train, validation and test byte streams of ``hf:NAME[:CONFIG]`` through ``datasets.load_dataset``.

    Its ``train``, ``validation`` and ``test`` splits; rows of the ``text`` column are
    joined in their order, each followed by a newline.

    Raises:
        DataFileError: the data set does not load (offline, unknown name), lacks a split or
            the ``text`` column, or is too small.
    """
    import datasets

    name, _, config = source.removeprefix(HUB_PREFIX).partition(":")
    try:
        loaded = datasets.load_dataset(name, config or None)
    except Exception as error:  # datasets raises many kinds (offline, unknown name, bad config)
        raise DataFileError(
            f"task 'bytes_lm': datasets.load_dataset({name!r}, {config or None!r}) failed ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''}); offline, give a directory of text files or the default, stdlib"
        ) from None
    splits = {"train": "train", "val": "validation", "test": "test"}
    streams = {}
    for split, found in splits.items():
        if found not in loaded:
            raise DataFileError(
                f"task 'bytes_lm': data set {name!r} has splits {list(loaded)}; it needs train, validation and test"
            )
        if "text" not in loaded[found].column_names:
            raise DataFileError(f"task 'bytes_lm': data set {name!r} has columns {loaded[found].column_names}, no 'text'")
        parts, total = [], 0
        for text in loaded[found]["text"]:
            if total >= needed[split]:
                break
            parts.append(data := (text + "\n").encode())
            total += len(data)
        if total < needed[split]:
            raise DataFileError(
                f"task 'bytes_lm': split {found!r} of {name!r} holds {total} bytes; the preset needs {needed[split]}"
            )
        streams[split] = b"".join(parts)
    return streams


def python_version() -> str:
    """The running Python's version, which fixes the standard library corpus: ``3.11.9``."""
    return ".".join(map(str, sys.version_info[:3]))
