"""Length-bucketed, seeded batches of padded token ids."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from trainers.data.recall import IGNORE
from trainers.data.tokenize import PAD_ID

# A compiled or GPU run's batches are padded to a multiple of this many positions: few lengths, all in one
# class modulo 8 (the CUDA kernels' alignment guards), at 3% of ListOps' mean length on average.
LENGTH_MULTIPLE = 64


def bucketed_batches(
    lengths: Sequence[int], batch_size: int, *, seed: int, shuffle: bool = True, bucket_batches: int = 50
) -> list[list[int]]:
    """Group example indices into batches of similar lengths.

    Indices are shuffled (seeded), cut into windows of ``bucket_batches`` batches, sorted
    by length inside each window and cut into batches, whose order is shuffled again:
    short sequences don't pay for long ones, and the order stays random.

    Args:
        lengths: Length of each example.
        batch_size: Examples per batch (the last may be smaller).
        seed: Seed of the order.
        shuffle: False keeps the file order (evaluation), batches still length-sorted per window.
        bucket_batches: Batches per sorting window.

    Returns:
        Lists of indices, one per batch.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be >= 1")
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    if shuffle:
        rng.shuffle(order)
    window = batch_size * bucket_batches
    batches = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda i: lengths[i])
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    if shuffle:
        rng.shuffle(batches)
    return batches


def pad_batch(sequences: Sequence[Sequence[int]], labels: Sequence[int] | Tensor) -> dict[str, Tensor]:
    """Pad token-id sequences to the longest.

    Returns:
        ``tokens`` (B, T) long, ``padding_mask`` (B, T) bool (True = real token) and
        ``labels`` (B,) or (B, T) long.
    """
    length = max(len(s) for s in sequences)
    tokens = torch.full((len(sequences), length), PAD_ID, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        tokens[row, : len(sequence)] = torch.as_tensor(sequence, dtype=torch.long)
    mask = torch.arange(length)[None, :] < torch.tensor([len(s) for s in sequences])[:, None]  # (B, T)
    return {"tokens": tokens, "padding_mask": mask, "labels": torch.as_tensor(labels, dtype=torch.long)}


def _whole_column(split, name: str) -> list:
    """A ``datasets`` column read at once, as a list.

    Indexing or iterating the column itself reads one row per call: sorting a pass by it
    cost 3.6 ms of an MQAR training step's 14 (D=32, one CPU thread).
    """
    return split[name][:]


def _share(batches: list[list[int]], share: tuple[int, int]) -> list[list[int]]:
    """Every n-th batch from the k-th, for ``share = (k, n)``."""
    first, every = share
    return batches[first::every]


def iterate_batches(
    split, batch_size: int, *, seed: int, shuffle: bool = True, share: tuple[int, int] = (0, 1)
) -> Iterator[dict[str, Tensor]]:
    """Batches of a split with ``tokens`` and ``label`` columns (a ``datasets.Dataset``).

    Args:
        split: The split; its ``length`` column (if present) avoids reading all tokens.
        batch_size: Examples per batch.
        seed: Seed of this pass's order (use a different one per epoch).
        shuffle: Random order (training) or file order (evaluation).
        share: ``(k, n)``: only batches k, k + n, k + 2n ... of the pass, for the k-th of n
            loader workers (a ``DataLoader`` takes its workers' batches in turn: the order stays).

    Yields:
        Padded batches (see ``pad_batch``).
    """
    lengths = _whole_column(split, "length") if "length" in split.column_names else [len(t) for t in split["tokens"]]
    for indices in _share(bucketed_batches(lengths, batch_size, seed=seed, shuffle=shuffle), share):
        rows = split[indices]
        yield pad_batch(rows["tokens"], rows["label"])


def iterate_pair_batches(
    split, batch_size: int, *, seed: int, shuffle: bool = True, share: tuple[int, int] = (0, 1)
) -> Iterator[dict[str, Tensor]]:
    """Batches of a pair split (``tokens1``, ``tokens2``, ``label``) for the two-tower model.

    Pairs are bucketed by their longer document; the arguments are ``iterate_batches``'.

    Yields:
        ``tokens1``/``padding_mask1`` (B, T1), ``tokens2``/``padding_mask2`` (B, T2), ``labels`` (B,).
    """
    lengths = [max(pair) for pair in zip(_whole_column(split, "length1"), _whole_column(split, "length2"), strict=True)]
    for indices in _share(bucketed_batches(lengths, batch_size, seed=seed, shuffle=shuffle), share):
        rows = split[indices]
        first, second = pad_batch(rows["tokens1"], rows["label"]), pad_batch(rows["tokens2"], rows["label"])
        yield {
            "tokens1": first["tokens"],
            "padding_mask1": first["padding_mask"],
            "tokens2": second["tokens"],
            "padding_mask2": second["padding_mask"],
            "labels": first["labels"],
        }


@dataclass(frozen=True)
class FixedShape:
    """The shapes a compiled or GPU run's batches take: a compiled model then compiles a known, small number
    of graphs, and eager GPU kernels meet few shapes.

    Every batch has ``rows`` rows (a short one is filled with copies of its first row whose labels
    nothing counts) and a length that is a multiple of ``LENGTH_MULTIPLE`` (at most ``max_length``),
    so that the lengths fall in few classes; the padding mask is kept even where a batch has no
    padding when ``keep_masks`` (a split whose rows vary in length): a batch without padding then
    runs the same graph as one with it.

    Attributes:
        rows: Rows of every batch.
        max_length: The model's longest input (its position embeddings end there).
        keep_masks: Keep padding masks that mask nothing.
    """

    rows: int
    max_length: int
    keep_masks: bool

    def length(self, longest: int) -> int:
        """The padded length of a batch whose longest row has ``longest`` positions."""
        return max(longest, min(-(-longest // LENGTH_MULTIPLE) * LENGTH_MULTIPLE, self.max_length))

    def fit(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """The batch in this shape: the same real tokens and labels, more padding and ignored rows.

        Args:
            batch: ``tokens``/``padding_mask`` (or the pair's ``tokens1``... ``padding_mask2``), (B, T) each,
                and ``labels`` (B,) or (B, T).

        Returns:
            The same keys, (rows, T') each with T' = ``length(T)``; added positions are padding, added
            rows copy the first row with every label ``IGNORE``.

        Raises:
            ValueError: the batch has more than ``rows`` rows.
        """
        count = len(batch["labels"])
        if count > self.rows:
            raise ValueError(f"a batch of {count} rows does not fit a fixed shape of {self.rows} rows")
        fitted = {}
        for name, tensor in batch.items():
            if name == "labels":
                continue
            fill = False if name.startswith("padding_mask") else PAD_ID
            fitted[name] = _grown(tensor, self.rows, self.length(tensor.shape[1]), fill, copy_first=True)
        labels = batch["labels"]
        length = self.length(labels.shape[1]) if labels.dim() == 2 else None
        fitted["labels"] = _grown(labels, self.rows, length, IGNORE, copy_first=False)
        return fitted

    @staticmethod
    def real_rows(batch: dict[str, Tensor]) -> int:
        """How many rows of a fitted batch are real: the added ones (copies of a real row) have no label that counts."""
        labels = batch["labels"]  # (B,) or (B, T)
        return int((labels != IGNORE).reshape(len(labels), -1).any(dim=1).sum())


def _grown(tensor: Tensor, rows: int, length: int | None, fill: int | bool, *, copy_first: bool) -> Tensor:
    """(B, [T]) -> (rows, [length]): new positions hold ``fill``; new rows copy row 0 or hold ``fill``."""
    shape = (rows,) if length is None else (rows, length)
    grown = torch.full(shape, fill, dtype=tensor.dtype)
    if tensor.dim() == 1:
        grown[: len(tensor)] = tensor
    else:
        grown[: len(tensor), : tensor.shape[1]] = tensor
    if copy_first:
        grown[len(tensor) :] = grown[0]
    return grown


def rows_vary_in_length(split) -> bool:
    """Whether some rows of a split are shorter than others (so that its batches have padding)."""
    columns = [name for name in ("length", "length1", "length2") if name in split.column_names]
    lengths = [length for name in columns for length in _whole_column(split, name)]
    return len(set(lengths)) > 1
