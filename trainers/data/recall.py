"""Multi-query associative recall (MQAR), as Zoology defines it, seeded.

A sequence starts with ``num_pairs`` key-value pairs (keys from the lower half of the
vocabulary, values from the upper half); later, each key is queried once at a gap drawn
from a power law. The target at a query position is the key's value; every other
position has the label ``IGNORE`` (no loss). Other positions hold random tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

IGNORE = -100


@dataclass(frozen=True)
class RecallSpec:
    """Parameters of an MQAR data set.

    Attributes:
        seed: Random seed.
        vocab_size: Vocabulary size (keys below ``vocab_size // 2``, values above; 0 unused).
        seq_len: Tokens per sequence.
        num_pairs: Key-value pairs per sequence.
        num_examples: Sequences.
        power_a: Exponent of the power law of query gaps (Zoology: 0.01).
    """

    seed: int = 0
    vocab_size: int = 64
    seq_len: int = 64
    num_pairs: int = 4
    num_examples: int = 1000
    power_a: float = 0.01

    def __post_init__(self) -> None:
        if 2 * self.num_pairs > self.seq_len // 2 or self.num_pairs < 1:
            raise ValueError(f"num_pairs={self.num_pairs} must be in 1..seq_len/4={self.seq_len // 4}")
        if self.vocab_size // 2 - 1 < self.num_pairs:
            raise ValueError(f"vocab_size={self.vocab_size} leaves fewer than num_pairs={self.num_pairs} keys")


def generate_recall(spec: RecallSpec) -> tuple[np.ndarray, np.ndarray]:
    """Generate MQAR inputs and next-token labels.

    Returns:
        ``inputs`` (N, seq_len) and ``labels`` (N, seq_len) int64; ``labels[n, t]`` is the
        token expected after ``inputs[n, t]``, ``IGNORE`` except at query positions.
    """
    rng = np.random.default_rng(spec.seed)
    n, pairs = spec.num_examples, spec.num_pairs
    context = 2 * pairs
    half = spec.vocab_size // 2
    keys = np.stack([rng.choice(np.arange(1, half), size=pairs, replace=False) for _ in range(n)])  # (N, P)
    values = np.stack([rng.choice(np.arange(half, spec.vocab_size), size=pairs, replace=False) for _ in range(n)])
    kvs = np.empty((n, context), dtype=np.int64)
    kvs[:, 0::2], kvs[:, 1::2] = keys, values

    space = (spec.seq_len - context) // 2
    weights = spec.power_a * np.arange(1, space + 1) ** (spec.power_a - 1)
    weights /= weights.sum()
    gaps = np.stack([rng.choice(space, size=pairs, replace=False, p=weights) for _ in range(n)])  # (N, P)
    queries = np.zeros((n, spec.seq_len - context + 1), dtype=np.int64)
    rows = np.arange(n)[:, None]
    queries[rows, gaps * 2] = keys
    sequence = np.concatenate([kvs, queries], axis=1)  # (N, seq_len + 1)
    targets = np.full((n, spec.seq_len + 1), IGNORE, dtype=np.int64)
    targets[rows, gaps * 2 + context + 1] = values
    inputs, labels = sequence[:, :-1], targets[:, 1:]
    filler = rng.integers(1, spec.vocab_size, size=inputs.shape)
    inputs = np.where(inputs == 0, filler, inputs)
    return inputs, labels
