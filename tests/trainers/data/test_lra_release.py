"""LRA release loaders read tiny files written here in each official format."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.trainers.data.release_files import AAN_ROWS, write_aan, write_cifar, write_imdb, write_pathfinder
from trainers.data.batches import iterate_pair_batches
from trainers.data.loaders import image_release, pathfinder_release, retrieval_release, text_release
from trainers.data.lra_files import DataFileError
from trainers.data.tokenize import VALUE_OFFSET


def test_text_reads_reviews_as_truncated_bytes_and_validates_on_training_reviews(tmp_path: Path) -> None:
    review = "Très bon film.".encode()
    training = {"neg": [b"Awful.", *[f"bad {i}".encode() for i in range(9)]], "pos": [review, b"Great!"]}
    write_imdb(tmp_path, {"train": training, "test": {"neg": [b"Dull."], "pos": [b"Fine."]}})
    splits = text_release(tmp_path, max_length=8, cache_dir=tmp_path / "cache")
    assert splits["train"][0]["length"] == len(b"Awful.")
    assert splits["val"].num_rows == 1 and splits["train"].num_rows == 11  # one training review in ten validates
    seen = [*splits["train"]["tokens"][:], *splits["val"]["tokens"][:]]
    assert [byte + VALUE_OFFSET for byte in review[:8]] in seen
    assert {tuple(tokens) for tokens in splits["test"]["tokens"][:]}.isdisjoint(tuple(tokens) for tokens in seen)
    assert splits["test"]["label"] == [0, 1]  # the release's test reviews, which selection never sees


def test_text_empty_review_is_named(tmp_path: Path) -> None:
    write_imdb(tmp_path, {split: {"neg": [b"Awful."], "pos": [b"", b"Great!"]} for split in ("train", "test")})
    with pytest.raises(DataFileError, match=r"aclImdb/train/pos/0_7.txt: the review is empty"):
        text_release(tmp_path, cache_dir=tmp_path / "cache")


def test_text_missing_folder_names_task_path_and_source(tmp_path: Path) -> None:
    write_imdb(tmp_path, {"train": {"neg": [b"x"], "pos": [b"y"]}})
    with pytest.raises(
        DataFileError, match=r"task 'text': expected directory 'aclImdb/test' under .* it comes from https://ai.stanford.edu"
    ):
        text_release(tmp_path, cache_dir=tmp_path / "cache")


def test_retrieval_reads_pairs_and_batches_two_towers(tmp_path: Path) -> None:
    write_aan(tmp_path, {})
    splits = retrieval_release(tmp_path, max_length=10, cache_dir=tmp_path / "cache")
    first = splits["train"][0]
    assert first["label"] == 1
    assert first["tokens1"] == [byte + VALUE_OFFSET for byte in b"first pape"]
    assert first["tokens2"] == [byte + VALUE_OFFSET for byte in b'second "qu']  # quotes are text, not quoting
    (batch,) = iterate_pair_batches(splits["val"], 4, seed=0, shuffle=False)
    assert batch["tokens1"].shape == batch["padding_mask1"].shape == (2, 10)
    assert batch["padding_mask1"].sum(dim=1).tolist() == [10, 5]
    assert batch["padding_mask2"].sum(dim=1).tolist() == [10, 10]
    assert batch["labels"].tolist() == [1, 0]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("1\tA\tB\tonly four", "new_aan_pairs.eval.tsv:2: expected 5 tab-separated columns, found 4"),
        ("yes\tA\tB\tx\ty", "new_aan_pairs.eval.tsv:2: label 'yes' is not an integer"),
        ("2\tA\tB\tx\ty", "new_aan_pairs.eval.tsv:2: label 2 is outside 0..1"),
    ],
)
def test_retrieval_malformed_rows_name_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    write_aan(tmp_path, {"eval": [AAN_ROWS[0], row]})
    with pytest.raises(DataFileError, match=message):
        retrieval_release(tmp_path, cache_dir=tmp_path / "cache")


def test_image_is_grayscale_1024_pixel_tokens(tmp_path: Path) -> None:
    written = write_cifar(tmp_path, 4, np.random.default_rng(0))
    splits = image_release(tmp_path, cache_dir=tmp_path / "cache")
    assert (splits["train"].num_rows, splits["val"].num_rows, splits["test"].num_rows) == (18, 2, 4)
    rgb = written["data_batch_1"][0].reshape(3, 1024).astype(float)
    luma = np.rint(0.2989 * rgb[0] + 0.5870 * rgb[1] + 0.1140 * rgb[2])  # ITU-R 601 weights
    tokens = np.array(splits["train"][0]["tokens"])
    assert tokens.shape == (1024,)
    assert np.array_equal(tokens, luma + VALUE_OFFSET)


def test_image_bad_label_names_file_and_example(tmp_path: Path) -> None:
    write_cifar(tmp_path, 3, np.random.default_rng(0), labels=[1, 10, 2])
    with pytest.raises(DataFileError, match=r"data_batch_1: example 1: label 10 is outside 0..9"):
        image_release(tmp_path, cache_dir=tmp_path / "cache")


def test_pathfinder_reads_metadata_and_pngs(tmp_path: Path) -> None:
    _, images = write_pathfinder(tmp_path, 10, np.random.default_rng(0))
    splits = pathfinder_release(tmp_path, cache_dir=tmp_path / "cache")
    assert (splits["train"].num_rows, splits["val"].num_rows, splits["test"].num_rows) == (8, 1, 1)
    assert splits["train"]["label"] == [0, 1] * 4
    assert splits["test"][0]["tokens"] == (images[9].reshape(-1).astype(int) + VALUE_OFFSET).tolist()


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("imgs/0 sample_0.png 0", r"0.npy:4: expected at least 4 space-separated fields"),
        ("imgs/0 sample_0.png 0 3 1.8", r"0.npy:4: label 3 is outside 0..1"),
        ("imgs/0 sample_9.png 0 1 1.8", r"0.npy:4: image .*sample_9.png does not exist"),
    ],
)
def test_pathfinder_malformed_rows_name_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    write_pathfinder(tmp_path, 3, np.random.default_rng(0), extra_row=row)
    with pytest.raises(DataFileError, match=message):
        pathfinder_release(tmp_path, cache_dir=tmp_path / "cache")


def test_pathfinder_wrong_image_size_names_the_image(tmp_path: Path) -> None:
    base, _ = write_pathfinder(tmp_path, 2, np.random.default_rng(0))
    Image.fromarray(np.zeros((16, 16), dtype=np.uint8), mode="L").save(base / "imgs" / "0" / "sample_1.png")
    with pytest.raises(DataFileError, match=r"sample_1.png: expected a 32x32 image, found 16x16"):
        pathfinder_release(tmp_path, cache_dir=tmp_path / "cache")


class _RunsACommand:
    """What a crafted "batch" pickles: unpickling it calls ``os.system`` (or any callable it names)."""

    def __init__(self, call, argument: str) -> None:
        self.call, self.argument = call, argument

    def __reduce__(self):
        return self.call, (self.argument,)


@pytest.mark.parametrize("call", [os.system, eval], ids=["os.system", "builtins.eval"])
def test_image_batches_never_run_code_from_the_files(tmp_path: Path, call) -> None:
    """A CIFAR batch is data: a pickle that names any callable but numpy's array builders is refused, unrun."""
    write_cifar(tmp_path, 3, np.random.default_rng(0))
    marker = tmp_path / "ran"
    argument = f"touch {marker}" if call is os.system else f"open({str(marker)!r}, 'w')"
    batch = tmp_path / "cifar-10-batches-py" / "data_batch_1"
    batch.write_bytes(pickle.dumps({b"data": _RunsACommand(call, argument), b"labels": [1, 2, 3]}))
    with pytest.raises(DataFileError, match=r"data_batch_1: not a CIFAR-10 python batch .*refused to load .*never code"):
        image_release(tmp_path, cache_dir=tmp_path / "cache")
    assert not marker.exists()


class _AsksFor:
    """What a crafted "batch" pickles: numpy's own array builder (which the loader allows) asked for ``shape``."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def __reduce__(self):
        from numpy._core.multiarray import _reconstruct

        return _reconstruct, (np.ndarray, self.shape, b"B")


def test_image_batches_never_allocate_more_than_a_batch_holds(tmp_path: Path) -> None:
    """A few bytes may ask numpy for any array; the loader knows the format's size and refuses before allocating."""
    write_cifar(tmp_path, 3, np.random.default_rng(0))
    batch = tmp_path / "cifar-10-batches-py" / "data_batch_1"
    batch.write_bytes(pickle.dumps({b"data": _AsksFor((10**12,)), b"labels": [1]}))
    assert batch.stat().st_size < 200
    with pytest.raises(DataFileError, match=r"an array of 1,000,000,000,000 bytes; a CIFAR-10 batch holds at most 30,720,000"):
        image_release(tmp_path, cache_dir=tmp_path / "cache")
    with batch.open("wb") as handle:  # a file larger than any batch: refused by its size, unread
        handle.truncate(40 * 2**20)
    with pytest.raises(DataFileError, match=r"data_batch_1: 41,943,040 bytes, more than a CIFAR-10 python batch"):
        image_release(tmp_path, cache_dir=tmp_path / "cache")
