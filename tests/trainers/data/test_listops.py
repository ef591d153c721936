"""ListOps: labels checked by an independent evaluator, bounds, determinism, splits, files."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from trainers.data.listops import ListOpsSpec, generate, write_release
from trainers.data.loaders import listops_release
from trainers.data.lra_files import DataFileError
from trainers.data.tokenize import LISTOPS_VOCABULARY, tokenize_listops

SMALL = ListOpsSpec(seed=3, min_length=20, max_length=120, train_size=300, val_size=40, test_size=40)
ROOT = Path(__file__).resolve().parents[3]


def stack_evaluate(source: str) -> int:
    """Evaluate a ListOps string with an explicit stack (independent of the generator)."""
    stack: list[list] = []
    result = None
    for token in source.split():
        if token in ("(", ")"):
            continue
        if token.startswith("["):
            stack.append([token])
        elif token == "]":
            operator, *values = stack.pop()
            value = {
                "[MIN": min,
                "[MAX": max,
                "[MED": lambda v: int(statistics.median(v)),
                "[SM": lambda v: sum(v) % 10,
            }[operator](values)
            if stack:
                stack[-1].append(value)
            else:
                result = value
        elif stack:
            stack[-1].append(int(token))
        else:
            result = int(token)  # a tree that is a single digit
    return result


def test_labels_match_an_independent_evaluator() -> None:
    for rows in generate(SMALL).values():
        for source, label in rows:
            assert stack_evaluate(source) == label


def test_lengths_respect_the_bounds_and_parentheses_balance() -> None:
    for rows in generate(SMALL).values():
        for source, _ in rows:
            assert SMALL.min_length < len(tokenize_listops(source)) < SMALL.max_length
            assert source.count("(") == source.count(")")


def test_same_seed_same_bytes_other_seed_other_data(tmp_path: Path) -> None:
    first = write_release(SMALL, tmp_path / "a")
    second = write_release(SMALL, tmp_path / "b")
    other = write_release(ListOpsSpec(**{**SMALL.__dict__, "seed": 4}), tmp_path / "c")
    for split in first:
        assert first[split].read_bytes() == second[split].read_bytes()
        assert first[split].read_bytes() != other[split].read_bytes()


def test_splits_are_disjoint_and_sized() -> None:
    splits = generate(SMALL)
    assert {name: len(rows) for name, rows in splits.items()} == {"train": 300, "val": 40, "test": 40}
    sources = [source for rows in splits.values() for source, _ in rows]
    assert len(set(sources)) == len(sources)


def test_labels_cover_several_classes() -> None:
    labels = {label for rows in generate(SMALL).values() for _, label in rows}
    assert len(labels) >= 8


def test_tokenizer_drops_parentheses_and_keeps_brackets() -> None:
    ids = tokenize_listops("( ( ( [MAX 2 ) 9 ) ] )")
    assert [LISTOPS_VOCABULARY[i] for i in ids] == ["[MAX", "2", "9", "]"]
    with pytest.raises(ValueError, match="unknown ListOps token '\\[FIRST'"):
        tokenize_listops("( [FIRST 1 ] )")


def test_command_line_writes_the_lra_format_and_the_loader_reads_it(tmp_path: Path) -> None:
    out = tmp_path / "lra_release" / "listops-1000"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "trainers.data.listops",
            "--out",
            str(out),
            "--seed",
            "1",
            "--min-length",
            "10",
            "--max-length",
            "60",
            "--train-size",
            "50",
            "--val-size",
            "10",
            "--test-size",
            "10",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=60,
    )
    lines = (out / "basic_train.tsv").read_text().splitlines()
    assert lines[0] == "Source\tTarget" and len(lines) == 51
    splits = listops_release(tmp_path / "lra_release", cache_dir=tmp_path / "cache")
    assert splits["train"].num_rows == 50
    first_source, first_label = lines[1].split("\t")
    assert splits["train"][0]["tokens"] == tokenize_listops(first_source)
    assert splits["train"][0]["label"] == int(first_label)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("( [MAX 1 2 ] )\t3\textra", "basic_val.tsv:3: expected 2 tab-separated columns, found 3"),
        ("( [MAX 1 2 ] )\tseven", "basic_val.tsv:3: label 'seven' is not an integer"),
        ("( [MAX 1 2 ] )\t12", "basic_val.tsv:3: label 12 is outside 0..9"),
        ("( [MAX 1 x ] )\t2", "basic_val.tsv:3: unknown ListOps token 'x'"),
        # 2001 tokens: more than LRA's ListOps has (its task's length); a cut expression is another expression
        ("( [SM " + "1 " * 1999 + "] )\t3", "basic_val.tsv:3: 2,001 tokens; LRA's ListOps has at most 2,000"),
        # a line of 10 MB is refused before it is read whole (a 5-million-token sequence otherwise)
        ("( [SM " + "1 " * 5_000_000 + "] )\t3", "basic_val.tsv:3: the line is longer than 65,536 bytes"),
    ],
    ids=["columns", "label-text", "label-range", "token", "too-long", "line-too-long"],
)
def test_malformed_rows_name_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    directory = tmp_path / "listops-1000"
    directory.mkdir()
    for split in ("train", "test"):
        (directory / f"basic_{split}.tsv").write_text("Source\tTarget\n( [MIN 1 2 ] )\t1\n")
    (directory / "basic_val.tsv").write_text(f"Source\tTarget\n( [MIN 1 2 ] )\t1\n{row}\n")
    with pytest.raises(DataFileError, match=message):
        listops_release(tmp_path, cache_dir=tmp_path / "cache")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", r"basic_val.tsv: no data rows after the header; the file is empty or truncated"),
        ("Source\tTarget\n", r"basic_val.tsv: no data rows after the header"),
        ("( [MIN 1 2 ] )\t1\n", r"basic_val.tsv:1: expected the header 'Source<TAB>Target', found '\( \[MIN 1 2 \] \)\\t1'"),
        ("Source\tTarget\n \t3\n", r"basic_val.tsv:2: column 1 is empty \(an example needs a sequence and a label\)"),
    ],
    ids=["empty", "header-only", "no-header", "empty-sequence"],
)
def test_files_without_examples_or_header_are_named(tmp_path: Path, content: str, message: str) -> None:
    """Nothing is dropped silently: a file without its header would lose its first row."""
    directory = tmp_path / "listops-1000"
    directory.mkdir()
    for split in ("train", "test"):
        (directory / f"basic_{split}.tsv").write_text("Source\tTarget\n( [MIN 1 2 ] )\t1\n")
    (directory / "basic_val.tsv").write_text(content)
    with pytest.raises(DataFileError, match=message):
        listops_release(tmp_path, cache_dir=tmp_path / "cache")


def test_bounds_no_tree_can_meet_are_refused_up_front() -> None:
    with pytest.raises(
        ValueError, match=r"no tree can be longer than min_length=50: with max_depth=2 and max_args=10 the longest has 12"
    ):
        ListOpsSpec(max_depth=2, min_length=50, max_length=100)
    assert ListOpsSpec(max_depth=2, min_length=11, max_length=100).longest_tree() == 12


def test_generation_stops_when_the_bounds_hold_too_few_distinct_trees(monkeypatch: pytest.MonkeyPatch) -> None:
    """Depth 2, two arguments: few distinct trees of 4 tokens ([OP d d ]); asking more cannot finish."""
    monkeypatch.setattr("trainers.data.listops.MAX_MISSES", 20_000)
    spec = ListOpsSpec(max_depth=2, max_args=2, min_length=3, max_length=6, train_size=1000, val_size=0, test_size=0)
    with pytest.raises(
        ValueError, match=r"20,000 random trees in a row were outside the length bounds \(3, 6\) or repeats, with 400 of 1,000"
    ):
        generate(spec)


def test_bad_bytes_name_the_file_and_line(tmp_path: Path) -> None:
    directory = tmp_path / "listops-1000"
    directory.mkdir()
    for split in ("train", "val", "test"):
        (directory / f"basic_{split}.tsv").write_bytes(b"Source\tTarget\n( [MIN 1 \xff ] )\t1\n")
    with pytest.raises(DataFileError, match=r"basic_train.tsv:2: bytes at column 10 are not valid UTF-8"):
        listops_release(tmp_path, cache_dir=tmp_path / "cache")


def test_missing_release_names_task_path_file_and_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(
        DataFileError,
        match=r"task 'listops': expected file 'listops-1000/basic_train.tsv' under .* does not exist; it comes from https://storage.googleapis.com/long-range-arena/lra_release.gz",
    ):
        listops_release(tmp_path, cache_dir=tmp_path / "cache")
    monkeypatch.delenv("LRA_DATA_DIR", raising=False)
    with pytest.raises(
        DataFileError, match="reads the LRA release files: set LRA_DATA_DIR to the unpacked lra_release directory"
    ):
        listops_release(None, cache_dir=tmp_path / "cache")


def test_the_mean_length_is_the_generated_trees_mean_token_count() -> None:
    """The plan times a step at this length: lra_sharing's quick trees average 11 tokens of the 40 allowed."""
    from trainers.data.listops import mean_length

    spec = ListOpsSpec(seed=0, max_depth=3, max_args=5, min_length=5, max_length=40, train_size=200, val_size=0, test_size=0)
    trees = generate(spec)["train"]
    counted = statistics.mean(len(tokenize_listops(source)) for source, _ in trees)
    assert mean_length(spec, sample=200) == counted
    assert spec.min_length < counted < spec.max_length / 2  # bucketed batches are far shorter than the longest
