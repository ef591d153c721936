"""Arrow caches are reused only when they match; batches are bucketed, padded and seeded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from trainers.data.batches import bucketed_batches, iterate_batches
from trainers.data.cache import MANIFEST
from trainers.data.listops import ListOpsSpec
from trainers.data.loaders import listops_generated
from trainers.data.recall import IGNORE, RecallSpec, generate_recall
from trainers.measure import interleaved_seconds

SPEC = ListOpsSpec(seed=0, min_length=10, max_length=80, train_size=200, val_size=20, test_size=20)


def test_cache_is_reused_then_rebuilt_when_tampered(tmp_path: Path) -> None:
    first = listops_generated(SPEC, cache_dir=tmp_path)
    (directory,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    manifest_time = (directory / MANIFEST).stat().st_mtime_ns
    again = listops_generated(SPEC, cache_dir=tmp_path)
    assert (directory / MANIFEST).stat().st_mtime_ns == manifest_time  # reused, not rebuilt
    assert again["train"]["tokens"] == first["train"]["tokens"]

    arrow = next(directory.rglob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[:-16] + b"\0" * 16)  # corrupt the contents
    rebuilt = listops_generated(SPEC, cache_dir=tmp_path)
    assert (directory / MANIFEST).stat().st_mtime_ns != manifest_time
    assert rebuilt["train"]["tokens"] == first["train"]["tokens"]


def test_other_parameters_get_their_own_cache(tmp_path: Path) -> None:
    listops_generated(SPEC, cache_dir=tmp_path)
    other = listops_generated(ListOpsSpec(**{**SPEC.__dict__, "seed": 1}), cache_dir=tmp_path)
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 2
    assert other["train"]["tokens"] != listops_generated(SPEC, cache_dir=tmp_path)["train"]["tokens"]


def test_bucketed_batches_cover_every_index_once_and_group_lengths() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 1000, size=1000).tolist()
    batches = bucketed_batches(lengths, 10, seed=0, bucket_batches=10)
    flat = sorted(i for batch in batches for i in batch)
    assert flat == list(range(1000))
    spread = np.mean([max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches])
    assert spread < 100  # random batches would spread over ~800
    assert batches == bucketed_batches(lengths, 10, seed=0, bucket_batches=10)
    assert batches != bucketed_batches(lengths, 10, seed=1, bucket_batches=10)


def test_padded_batches_mask_exactly_the_padding(tmp_path: Path) -> None:
    split = listops_generated(SPEC, cache_dir=tmp_path)["train"]
    for batch in iterate_batches(split, 16, seed=0):
        lengths = batch["padding_mask"].sum(dim=1)
        assert batch["tokens"].shape[1] == int(lengths.max())
        assert torch.all(batch["tokens"][~batch["padding_mask"]] == 0)
        assert torch.all(batch["tokens"][batch["padding_mask"]] != 0)


def test_recall_queries_are_earlier_keys_with_their_values() -> None:
    spec = RecallSpec(seed=0, vocab_size=40, seq_len=48, num_pairs=5, num_examples=50)
    inputs, labels = generate_recall(spec)
    assert inputs.shape == labels.shape == (50, 48)
    for row_inputs, row_labels in zip(inputs, labels, strict=True):
        pairs = dict(zip(row_inputs[0:10:2], row_inputs[1:10:2], strict=True))
        assert all(k < 20 <= v for k, v in pairs.items())  # keys low half, values high half
        queries = np.flatnonzero(row_labels != IGNORE)
        assert len(queries) == 5 and queries.min() >= 10
        for position in queries:
            assert pairs[row_inputs[position]] == row_labels[position]
    assert not np.array_equal(
        generate_recall(RecallSpec(seed=1, vocab_size=40, seq_len=48, num_pairs=5, num_examples=50))[0], inputs
    )


def test_a_pass_s_first_batch_costs_about_what_bucketing_a_plain_list_costs(tmp_path: Path) -> None:
    """Ordering a pass reads the length column at once: read row by row, a 16,000-example
    split's first batch took 160 times as long as bucketing the same lengths in a list."""
    spec = ListOpsSpec(seed=0, min_length=5, max_length=40, train_size=16_000, val_size=20, test_size=20)
    split = listops_generated(spec, cache_dir=tmp_path)["train"]
    lengths = split["length"][:]
    seconds = interleaved_seconds(
        {
            "first batch": lambda: next(iterate_batches(split, 64, seed=0)),
            "bucketing a list": lambda: bucketed_batches(lengths, 64, seed=0),
        },
        reps=3,
        device=torch.device("cpu"),
    )
    fastest = {name: min(times) for name, times in seconds.items()}
    assert fastest["first batch"] < 10 * fastest["bucketing a list"], fastest
