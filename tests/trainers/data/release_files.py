"""Tiny Long Range Arena release files, written in each loader's exact release format."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
from PIL import Image

from trainers.data.listops import ListOpsSpec, write_release


def write_imdb(root: Path, reviews: dict[str, dict[str, list[bytes]]]) -> None:
    for split, by_sentiment in reviews.items():
        for sentiment, texts in by_sentiment.items():
            folder = root / "aclImdb" / split / sentiment
            folder.mkdir(parents=True)
            for index, text in enumerate(texts):
                (folder / f"{index}_7.txt").write_bytes(text)


AAN_ROWS = ['1.0\tP01-1001\tP02-2002\tfirst paper text\tsecond "quoted" text', "0.0\tP03-3003\tP04-4004\tshort\tanother document"]


def write_aan(root: Path, rows: dict[str, list[str]]) -> None:
    (root / "tsv_data").mkdir(parents=True)
    for name in ("train", "eval", "test"):
        (root / "tsv_data" / f"new_aan_pairs.{name}.tsv").write_text("\n".join(rows.get(name, AAN_ROWS)) + "\n")


def write_cifar(
    root: Path, images_per_batch: int, rng: np.random.Generator, labels: list[int] | None = None
) -> dict[str, np.ndarray]:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    written = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, size=(images_per_batch, 3072), dtype=np.uint8)
        batch_labels = labels if labels is not None else rng.integers(0, 10, size=images_per_batch).tolist()
        with (folder / name).open("wb") as handle:
            pickle.dump({b"data": data, b"labels": batch_labels, b"batch_label": name.encode()}, handle)
        written[name] = data
    return written


def write_pathfinder(root: Path, examples: int, rng: np.random.Generator, extra_row: str = "") -> tuple[Path, list[np.ndarray]]:
    base = root / "pathfinder32" / "curv_contour_length_14"
    (base / "imgs" / "0").mkdir(parents=True)
    (base / "metadata").mkdir()
    images, rows = [], []
    for index in range(examples):
        pixels = rng.integers(0, 256, size=(32, 32), dtype=np.uint8)
        Image.fromarray(pixels, mode="L").save(base / "imgs" / "0" / f"sample_{index}.png")
        images.append(pixels)
        rows.append(f"imgs/0 sample_{index}.png 0 {index % 2} 1.8 6 2.0 5 1.5 1 1")
    (base / "metadata" / "0.npy").write_text("\n".join(rows + ([extra_row] if extra_row else [])) + "\n")
    return base, images


def write_lra_release(root: Path, rng: np.random.Generator) -> Path:
    """All five tasks' files under ``root``, a few examples each (an unpacked ``lra_release`` in miniature).

    Returns:
        ``root``.
    """
    spec = ListOpsSpec(seed=0, min_length=10, max_length=40, train_size=64, val_size=16, test_size=16)
    write_release(spec, root / "listops-1000")
    words = [b"good", b"bad", b"film", b"plot", b"dull", b"great", b"acting"]

    def review(label: int) -> bytes:
        return b" ".join(words[int(i)] for i in rng.integers(0, len(words), size=12)) + (b" great!" if label else b" awful.")

    write_imdb(
        root,
        {split: {"neg": [review(0) for _ in range(16)], "pos": [review(1) for _ in range(16)]} for split in ("train", "test")},
    )
    pairs = [f"{i % 2}.0\tP{i:02d}-1\tP{i:02d}-2\tdocument {i} cites\tdocument {i} is cited" for i in range(24)]
    write_aan(root, {"train": pairs, "eval": pairs[:8], "test": pairs[8:16]})
    write_cifar(root, 8, rng)
    write_pathfinder(root, 20, rng)
    return root
