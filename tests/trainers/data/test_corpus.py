"""Byte-level corpora: split by file, cut into next-byte windows, described so that two machines
can tell whether they read the same text; a bad corpus names itself."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from studies.catalogue.tasks import ByteLanguageTask
from trainers.data.corpus import CorpusSpec, corpus_files, split_by_file, stdlib_root, windows
from trainers.data.loaders import byte_corpus
from trainers.data.lra_files import DataFileError
from trainers.data.tokenize import VALUE_OFFSET

SMALL = CorpusSpec(seq_len=8, train_examples=4, val_examples=2, test_examples=2)


def _text_files(root: Path, count: int, size: int = 200) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        path = root / f"part{index:02d}.txt"
        path.write_text("".join(chr(ord("a") + (index + i) % 26) for i in range(size)))
        paths.append(path)
    return paths


def _decoded(ids: list[int]) -> bytes:
    return bytes(i - VALUE_OFFSET for i in ids)


def test_windows_predict_each_next_byte_once() -> None:
    tokens, labels = windows(b"abcdefghij", seq_len=3, count=3)
    assert [_decoded(t) for t in tokens] == [b"abc", b"def", b"ghi"]
    assert [_decoded(t) for t in labels] == [b"bcd", b"efg", b"hij"]


def test_files_split_by_their_path_disjointly_and_the_same_way_when_files_are_added(tmp_path: Path) -> None:
    files = _text_files(tmp_path / "corpus", 40)
    split = split_by_file(tmp_path / "corpus", files, 0.25, 0.25)
    sides = [set(split[name]) for name in ("train", "val", "test")]
    assert all(a.isdisjoint(b) for a in sides for b in sides if a is not b)
    assert sorted(split["train"] + split["val"] + split["test"]) == files
    assert 2 <= len(split["val"]) <= 20 and 2 <= len(split["test"]) <= 20  # about a quarter of 40 each
    more = _text_files(tmp_path / "corpus", 60)  # 20 more files: no earlier file changes side
    grown = split_by_file(tmp_path / "corpus", more, 0.25, 0.25)
    assert all(set(split[name]) <= set(grown[name]) for name in ("train", "val", "test"))


def test_three_files_still_make_every_split(tmp_path: Path) -> None:
    split = split_by_file(tmp_path, _text_files(tmp_path, 3), 0.1, 0.1)
    assert len(split["train"]) == len(split["val"]) == len(split["test"]) == 1


def test_a_directory_corpus_loads_train_validation_and_test_from_different_files(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    files = _text_files(root, 12)
    (root / ".hidden").write_bytes(b"\0binary, but hidden: left out")
    splits = byte_corpus(SMALL, str(root), cache_dir=tmp_path / "cache")
    assert splits["train"].num_rows == 4 and splits["val"].num_rows == 2 and splits["test"].num_rows == 2
    row = splits["train"][0]
    assert len(row["tokens"]) == row["length"] == 8 and row["label"][:-1] == row["tokens"][1:]
    by_side = split_by_file(root, files, SMALL.val_share, SMALL.test_share)
    for split in ("val", "test"):
        text = b"".join(path.read_bytes() for path in by_side[split])
        assert _decoded(splits[split][0]["tokens"]) in text


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda root: root, r"corpus directory .*missing does not exist; give a directory of text files"),
        (lambda root: (root.mkdir(), root)[1], r"holds no files"),
        (lambda root: (_text_files(root, 1), root)[1], r"has 1 file\(s\); train, validation and test need a file each"),
        (lambda root: (_text_files(root, 3, size=5), root)[1], r"holds \d+ bytes but the preset needs 33"),
        (
            lambda root: (_text_files(root, 3), (root / "image.png").write_bytes(b"\x89PNG\0\0"), root)[-1],
            r"image.png holds NUL bytes: it is not a text file",
        ),
    ],
    ids=["missing", "empty", "one-file", "too-small", "binary"],
)
def test_a_bad_corpus_is_named_with_what_to_give_instead(tmp_path: Path, make, message: str) -> None:
    root = make(tmp_path / "missing")
    with pytest.raises(DataFileError, match=message):
        spec = CorpusSpec(seq_len=8, train_examples=4, val_examples=4, test_examples=4, val_share=0.3, test_share=0.3)
        byte_corpus(spec, str(root), cache_dir=tmp_path)


def test_a_data_set_directory_loads_through_datasets_load_dataset(tmp_path: Path) -> None:
    """``hf:`` goes through ``datasets.load_dataset``; a local data set directory needs no network."""
    data = tmp_path / "wiki"
    data.mkdir()
    (data / "train.txt").write_text("\n".join(f"training line {i}" for i in range(20)))
    (data / "validation.txt").write_text("\n".join(f"held-out line {i}" for i in range(20)))
    (data / "test.txt").write_text("\n".join(f"test-set line {i}" for i in range(20)))
    splits = byte_corpus(SMALL, f"hf:{data}", cache_dir=tmp_path / "cache")
    assert _decoded(splits["train"][0]["tokens"]) == b"training"
    assert _decoded(splits["val"][0]["tokens"]) == b"held-out"
    assert _decoded(splits["test"][0]["tokens"]) == b"test-set"


def test_an_unreachable_data_set_is_a_data_file_error(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match=r"datasets.load_dataset\(.*failed .*give a directory of text files"):
        byte_corpus(SMALL, f"hf:{tmp_path / 'no-such-data-set'}", cache_dir=tmp_path)


def test_the_standard_library_corpus_is_described_by_python_version_and_file_digest() -> None:
    task = ByteLanguageTask(SMALL)
    described = task.describe()
    files = corpus_files(stdlib_root(), python_only=True)
    assert described["corpus"] == "stdlib" and described["files"] == len(files) > 100
    assert described["python"].count(".") == 2 and len(described["files_digest"]) == 16
    assert all(path.suffix == ".py" and "site-packages" not in path.parts for path in files)
    assert task.describe() == described  # deterministic


def test_bits_per_byte_and_perplexity_follow_from_the_loss_in_nats() -> None:
    derived = ByteLanguageTask(SMALL).metrics({"val_loss": math.log(256)})
    assert math.isclose(derived["val_bits_per_byte"], 8.0) and math.isclose(derived["val_perplexity"], 256.0)


def test_with_data_dir_keeps_the_default_reads_a_directory_and_refuses_a_missing_one(tmp_path: Path) -> None:
    task = ByteLanguageTask(SMALL)
    assert task.with_data_dir(None) is task
    assert task.with_data_dir(tmp_path).corpus == str(tmp_path.resolve())
    assert task.with_data_dir("hf:wikitext:wikitext-2-raw-v1").corpus == "hf:wikitext:wikitext-2-raw-v1"
    with pytest.raises(DataFileError, match="does not exist"):
        task.with_data_dir(tmp_path / "absent")
