"""Task loaders: splits as cached Arrow datasets with ``tokens``, ``length``, ``label``."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import datasets

from trainers.data.cache import cached_splits
from trainers.data.listops import NUM_CLASSES, SPLITS, ListOpsSpec, generate
from trainers.data.lra_files import DataFileError, read_labelled_tsv, release_file
from trainers.data.recall import RecallSpec, generate_recall
from trainers.data.tokenize import tokenize_listops

CLASSIFICATION_FEATURES = datasets.Features(
    {"tokens": datasets.List(datasets.Value("int16")), "length": datasets.Value("int32"), "label": datasets.Value("int64")}
)
RECALL_FEATURES = datasets.Features(
    {"tokens": datasets.List(datasets.Value("int32")), "length": datasets.Value("int32"), "label": datasets.List(datasets.Value("int64"))}
)


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

    return cached_splits("listops", {"source": "generated", **asdict(spec)}, build, features=CLASSIFICATION_FEATURES, cache_dir=cache_dir)


def listops_release(data_dir: Path | str | None = None, *, cache_dir: Path | None = None) -> datasets.DatasetDict:
    """ListOps from LRA release TSVs (``listops-1000/basic_{train,val,test}.tsv``), cached.

    Files written by ``python -m trainers.data.listops --out DIR/listops-1000`` load the same way.

    Raises:
        DataFileError: a missing file, or a malformed row (file and line named).
    """
    paths = {split: release_file("listops", data_dir, f"listops-1000/basic_{split}.tsv") for split in SPLITS}
    identity = {split: [str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns] for split, p in paths.items()}

    def build() -> dict[str, dict[str, list]]:
        splits = {}
        for split, path in paths.items():
            rows = read_labelled_tsv(path, columns=2, label_column=1, num_classes=NUM_CLASSES)
            sequences = []
            for line_number, (fields, _) in enumerate(rows, start=2):
                try:
                    sequences.append(tokenize_listops(fields[0]))
                except ValueError as error:
                    raise DataFileError(f"{path}:{line_number}: {error}") from None
            splits[split] = _columns(sequences, [label for _, label in rows])
        return splits

    return cached_splits("listops", {"source": "release", "files": identity}, build, features=CLASSIFICATION_FEATURES, cache_dir=cache_dir)


def recall(spec: RecallSpec, *, val_examples: int = 200, cache_dir: Path | None = None) -> datasets.DatasetDict:
    """MQAR train and validation splits (next-token labels, ``IGNORE`` off the queries), cached."""
    def build() -> dict[str, dict[str, list]]:
        splits = {}
        for split, seed_offset, size in (("train", 0, spec.num_examples), ("val", 1, val_examples)):
            part = RecallSpec(**(asdict(spec) | {"seed": 2 * spec.seed + seed_offset, "num_examples": size}))
            inputs, labels = generate_recall(part)
            splits[split] = _columns(inputs.tolist(), labels.tolist())
        return splits

    params = asdict(spec) | {"val_examples": val_examples}
    return cached_splits("mqar", params, build, features=RECALL_FEATURES, cache_dir=cache_dir)
