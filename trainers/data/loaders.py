"""Task loaders: splits as cached Arrow datasets with ``tokens``, ``length``, ``label``.

Retrieval splits hold a pair per row: ``tokens1``/``length1`` and ``tokens2``/``length2``.
Decoder tasks (MQAR, byte-level language modelling) label every position: ``label`` is a
list of next-token ids (``IGNORE`` where there is no target).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import datasets

from trainers.data.cache import cached_splits
from trainers.data.corpus import (
    HUB_PREFIX,
    STDLIB,
    CorpusSpec,
    corpus_files,
    hub_text,
    read_until,
    split_by_file,
    stdlib_root,
    windows,
)
from trainers.data.listops import NUM_CLASSES, SPLITS, ListOpsSpec, generate
from trainers.data.lra_files import (
    CIFAR10_URL,
    IMDB_URL,
    DataFileError,
    grayscale,
    read_cifar10_batch,
    read_gray_image,
    read_imdb_split,
    read_labelled_tsv,
    read_pathfinder_metadata,
    release_file,
)
from trainers.data.recall import RecallSpec, generate_recall
from trainers.data.tokenize import tokenize_bytes, tokenize_listops, tokenize_pixels

LISTOPS_MAX_LENGTH = 2000  # tokens per expression, LRA's ListOps length
LISTOPS_LINE_BYTES = 64 * 2**10  # a release line: 2000 tokens with their brackets and spaces fit many times over
TEXT_MAX_LENGTH = 4000  # bytes per review, LRA's Text length
RETRIEVAL_MAX_LENGTH = 4000  # bytes per document, LRA's Retrieval length (two towers)
PATHFINDER_DIFFICULTIES = {"easy": "curv_baseline", "intermediate": "curv_contour_length_9", "hard": "curv_contour_length_14"}

CLASSIFICATION_FEATURES = datasets.Features(
    {"tokens": datasets.List(datasets.Value("int16")), "length": datasets.Value("int32"), "label": datasets.Value("int64")}
)
PAIR_FEATURES = datasets.Features(
    {
        "tokens1": datasets.List(datasets.Value("int16")),
        "length1": datasets.Value("int32"),
        "tokens2": datasets.List(datasets.Value("int16")),
        "length2": datasets.Value("int32"),
        "label": datasets.Value("int64"),
    }
)
NEXT_TOKEN_FEATURES = datasets.Features(
    {
        "tokens": datasets.List(datasets.Value("int32")),
        "length": datasets.Value("int32"),
        "label": datasets.List(datasets.Value("int64")),
    }
)

TEXT_VALIDATION_EVERY = 10  # LRA Text: one training review in ten validates (the release has no validation split)


def _identity(paths) -> list[list]:
    """What a cache of files depends on: each path, size and modification time."""
    return [[str(path.resolve()), path.stat().st_size, path.stat().st_mtime_ns] for path in paths]


def _columns(sequences: list[list[int]], labels: list) -> dict[str, list]:
    return {"tokens": sequences, "length": [len(s) for s in sequences], "label": labels}


def listops_generated(spec: ListOpsSpec, *, cache_dir: Path | None = None) -> datasets.DatasetDict:
    """Generated ListOps splits (train, val, test), cached.

    Args:
        spec: Generator parameters and seed.
        cache_dir: Cache location (default: ``runs/data``).

    Returns:
        The splits.
    """

    def build() -> dict[str, dict[str, list]]:
        return {
            split: _columns([tokenize_listops(source) for source, _ in rows], [label for _, label in rows])
            for split, rows in generate(spec).items()
        }

    return cached_splits(
        "listops", {"source": "generated", **asdict(spec)}, build, features=CLASSIFICATION_FEATURES, cache_dir=cache_dir
    )


def listops_release(data_dir: Path | str | None = None, *, cache_dir: Path | None = None) -> datasets.DatasetDict:
    """ListOps from LRA release TSVs (``listops-1000/basic_{train,val,test}.tsv``), cached.

    Files written by ``python -m trainers.data.listops --out DIR/listops-1000`` load the same way.

    Raises:
        DataFileError: a missing file, or a malformed row (file and line named).
    """
    paths = {split: release_file("listops", data_dir, f"listops-1000/basic_{split}.tsv") for split in SPLITS}
    identity = _identity(paths.values())

    def build() -> dict[str, dict[str, list]]:
        splits = {}
        for split, path in paths.items():
            rows = read_labelled_tsv(path, columns=2, label_column=1, num_classes=NUM_CLASSES, max_line_bytes=LISTOPS_LINE_BYTES)
            sequences = []
            for line_number, (fields, _) in enumerate(rows, start=2):
                try:
                    sequences.append(tokenize_listops(fields[0]))
                except ValueError as error:
                    raise DataFileError(f"{path}:{line_number}: {error}") from None
                if len(sequences[-1]) > LISTOPS_MAX_LENGTH:  # a cut expression would be another expression: refused
                    raise DataFileError(
                        f"{path}:{line_number}: {len(sequences[-1]):,} tokens; LRA's ListOps has at most "
                        f"{LISTOPS_MAX_LENGTH:,} (the task's length): this file is not the release's"
                    )
            splits[split] = _columns(sequences, [label for _, label in rows])
        return splits

    return cached_splits(
        "listops", {"source": "release", "files": identity}, build, features=CLASSIFICATION_FEATURES, cache_dir=cache_dir
    )


def recall(
    spec: RecallSpec, *, val_examples: int = 200, test_examples: int = 200, cache_dir: Path | None = None
) -> datasets.DatasetDict:
    """MQAR train, validation and test splits (next-token labels, ``IGNORE`` off the queries), cached.

    Each split is generated from its own seed, so no example is shared by chance of the seed alone."""

    def build() -> dict[str, dict[str, list]]:
        splits = {}
        sizes = (("train", 0, spec.num_examples), ("val", 1, val_examples), ("test", 2, test_examples))
        for split, seed_offset, size in sizes:
            part = RecallSpec(**(asdict(spec) | {"seed": 3 * spec.seed + seed_offset, "num_examples": size}))
            inputs, labels = generate_recall(part)
            splits[split] = _columns(inputs.tolist(), labels.tolist())
        return splits

    params = asdict(spec) | {"val_examples": val_examples, "test_examples": test_examples}
    return cached_splits("mqar", params, build, features=NEXT_TOKEN_FEATURES, cache_dir=cache_dir)


def byte_corpus(spec: CorpusSpec, source: str, *, cache_dir: Path | None = None) -> datasets.DatasetDict:
    """Next-byte train, validation and test splits of a text corpus (``trainers.data.corpus``), cached.

    Args:
        spec: Window length, windows per split, read order and held-out share.
        source: ``stdlib``, a directory path, or ``hf:NAME[:CONFIG]``.
        cache_dir: Cache location.

    Raises:
        DataFileError: a missing, empty, binary or too small corpus (named, with the sources there are).
    """
    counts = {"train": spec.train_examples, "val": spec.val_examples, "test": spec.test_examples}
    needed = {split: count * spec.seq_len + 1 for split, count in counts.items()}
    if source.startswith(HUB_PREFIX):
        files: dict[str, list[Path]] = {}
        identity: object = source
    else:
        root = stdlib_root() if source == STDLIB else Path(source)
        files = split_by_file(root, corpus_files(root, python_only=source == STDLIB), spec.val_share, spec.test_share)
        identity = {split: _identity(paths) for split, paths in files.items()}

    def build() -> dict[str, dict[str, list]]:
        if files:
            streams = {
                split: read_until(paths, needed[split], spec.seed + index, f"the {split} files of {source}")
                for index, (split, paths) in enumerate(files.items())
            }
        else:
            streams = hub_text(source, needed)
        return {split: _columns(*windows(stream, spec.seq_len, counts[split])) for split, stream in streams.items()}

    params = asdict(spec) | {"source": source, "files": identity}
    return cached_splits("bytes_lm", params, build, features=NEXT_TOKEN_FEATURES, cache_dir=cache_dir)


def text_release(
    data_dir: Path | str | None = None, *, max_length: int = TEXT_MAX_LENGTH, cache_dir: Path | None = None
) -> datasets.DatasetDict:
    """LRA Text: IMDB reviews as bytes (``aclImdb/{train,test}``), truncated to ``max_length``, cached.

    Every tenth training review (in the order read: negatives, then positives) validates, so
    that selection never sees the test reviews (LRA itself validated on them); the release's
    test reviews test.

    Raises:
        DataFileError: a missing folder or an empty ``pos``/``neg`` folder.
    """
    folders = {
        split: release_file("text", data_dir, f"aclImdb/{split}", source=IMDB_URL, kind="directory")
        for split in ("train", "test")
    }
    reviews = [folder / sentiment for folder in folders.values() for sentiment in ("neg", "pos")]

    def build() -> dict[str, dict[str, list]]:
        splits = {}
        for split, folder in folders.items():
            texts, labels = read_imdb_split(folder)
            splits[split] = _columns([tokenize_bytes(text, max_length) for text in texts], labels)
        training = splits["train"]
        held_out = [index % TEXT_VALIDATION_EVERY == TEXT_VALIDATION_EVERY - 1 for index in range(len(training["label"]))]
        carved = {
            part: {
                column: [value for value, out in zip(values, held_out, strict=True) if out == wanted]
                for column, values in training.items()
            }
            for part, wanted in (("train", False), ("val", True))
        }
        return {**carved, "test": splits["test"]}

    params = {
        "source": "release",
        "folders": _identity(reviews),
        "max_length": max_length,
        "validation": f"every {TEXT_VALIDATION_EVERY}th training review",
    }
    return cached_splits("text", params, build, features=CLASSIFICATION_FEATURES, cache_dir=cache_dir)


def retrieval_release(
    data_dir: Path | str | None = None, *, max_length: int = RETRIEVAL_MAX_LENGTH, cache_dir: Path | None = None
) -> datasets.DatasetDict:
    """LRA Retrieval: AAN document pairs (``tsv_data/new_aan_pairs.{train,eval,test}.tsv``), cached.

    Each row: label (1 = the papers cite each other), two paper ids, two documents; the
    documents become byte ids truncated to ``max_length`` each, for the two-tower model.

    Raises:
        DataFileError: a missing file, or a malformed row (file and line named).
    """
    files = {"train": "train", "val": "eval", "test": "test"}
    paths = {split: release_file("retrieval", data_dir, f"tsv_data/new_aan_pairs.{name}.tsv") for split, name in files.items()}

    def build() -> dict[str, dict[str, list]]:
        splits = {}
        for split, path in paths.items():
            rows = read_labelled_tsv(path, columns=5, label_column=0, num_classes=2, header=None)
            first = [tokenize_bytes(fields[3].encode(), max_length) for fields, _ in rows]
            second = [tokenize_bytes(fields[4].encode(), max_length) for fields, _ in rows]
            splits[split] = {
                "tokens1": first,
                "length1": [len(s) for s in first],
                "tokens2": second,
                "length2": [len(s) for s in second],
                "label": [label for _, label in rows],
            }
        return splits

    params = {"source": "release", "files": _identity(paths.values()), "max_length": max_length}
    return cached_splits("retrieval", params, build, features=PAIR_FEATURES, cache_dir=cache_dir)


def image_release(data_dir: Path | str | None = None, *, cache_dir: Path | None = None) -> datasets.DatasetDict:
    """LRA Image: CIFAR-10 python batches as grayscale sequences of 1024 pixel tokens, cached.

    Splits as LRA: the first 45,000 training images train, the last 5,000 validate, the
    test batch tests.

    Raises:
        DataFileError: a missing or malformed batch (file and example named).
    """
    names = [f"data_batch_{index}" for index in range(1, 6)] + ["test_batch"]
    paths = [release_file("image", data_dir, f"cifar-10-batches-py/{name}", source=CIFAR10_URL) for name in names]

    def build() -> dict[str, dict[str, list]]:
        def sequences(batch_paths: list[Path]) -> tuple[list[list[int]], list[int]]:
            tokens, labels = [], []
            for path in batch_paths:
                images, batch_labels = read_cifar10_batch(path)
                tokens += [tokenize_pixels(image) for image in grayscale(images)]
                labels += batch_labels
            return tokens, labels

        train_tokens, train_labels = sequences(paths[:5])
        cut = len(train_tokens) * 9 // 10
        return {
            "train": _columns(train_tokens[:cut], train_labels[:cut]),
            "val": _columns(train_tokens[cut:], train_labels[cut:]),
            "test": _columns(*sequences(paths[5:])),
        }

    return cached_splits(
        "image", {"source": "release", "files": _identity(paths)}, build, features=CLASSIFICATION_FEATURES, cache_dir=cache_dir
    )


def pathfinder_release(
    data_dir: Path | str | None = None, *, difficulty: str = "hard", cache_dir: Path | None = None
) -> datasets.DatasetDict:
    """LRA Pathfinder 32×32: the release's metadata and PNGs as 1024 pixel tokens, binary label, cached.

    Examples, in the order of the metadata files (sorted by number) and their rows, split
    80/10/10 into train, val and test.

    Args:
        data_dir: The unpacked release (holds ``pathfinder32/``).
        difficulty: ``easy``, ``intermediate`` or ``hard`` (LRA's benchmark setting).
        cache_dir: Cache location.

    Raises:
        DataFileError: missing metadata or images, or a malformed row (file and line named).
        ValueError: an unknown difficulty.
    """
    if difficulty not in PATHFINDER_DIFFICULTIES:
        raise ValueError(f"unknown Pathfinder difficulty {difficulty!r}; choose one of {', '.join(PATHFINDER_DIFFICULTIES)}")
    root = release_file("pathfinder", data_dir, f"pathfinder32/{PATHFINDER_DIFFICULTIES[difficulty]}", kind="directory")
    metadata = sorted((root / "metadata").glob("*.npy"), key=lambda path: (len(path.stem), path.stem))
    if not metadata:
        raise DataFileError(f"task 'pathfinder': no metadata files (*.npy) in {root / 'metadata'}; the LRA release has them")
    image_dirs = sorted(path for path in (root / "imgs").glob("*") if path.is_dir())

    def build() -> dict[str, dict[str, list]]:
        rows = [row for path in metadata for row in read_pathfinder_metadata(path, root)]
        tokens = [tokenize_pixels(read_gray_image(image, 32)) for image, _ in rows]
        labels = [label for _, label in rows]
        train_end, val_end = len(rows) * 8 // 10, len(rows) * 9 // 10
        return {
            "train": _columns(tokens[:train_end], labels[:train_end]),
            "val": _columns(tokens[train_end:val_end], labels[train_end:val_end]),
            "test": _columns(tokens[val_end:], labels[val_end:]),
        }

    # Image folders' modification times change when images are added or removed.
    params = {"source": "release", "difficulty": difficulty, "files": _identity([*metadata, *image_dirs])}
    return cached_splits("pathfinder", params, build, features=CLASSIFICATION_FEATURES, cache_dir=cache_dir)
